"""Every model in every precision: a training step runs, the loss is finite, and the profile's
categories move the way the precision says they should."""
import pytest
import torch

from foxlib.memory import profile_step
from foxlib.models import MODELS


# On a CPU without avx512_bf16 (the AVX2 path: scripts/test-isa.sh) the Mamba-2's 16-bit backward
# runs ATen's reference kernels, about 30 s a step at the small preset's batch of 16; what this
# file checks does not depend on the batch or sequence size: the Mamba-2 runs 2 sequences of 32 here.
CHEAPER = {"mamba2": {"batch_size": 2, "seq_len": 32}}


def _profile(name, precision):
    card = MODELS[name]
    cfg = card.config("small", **CHEAPER.get(name, {}))
    torch.manual_seed(0)
    model = card.build(cfg)
    batch = card.example_batch(cfg, seed=0)
    return profile_step(model, batch, card.loss, torch.optim.Adam(model.parameters()), precision,
                        buffers=card.buffers(batch))


@pytest.fixture(scope="module")
def fp32_profiles():
    return {name: _profile(name, "fp32") for name in MODELS}


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("name", ["tft", "dqn", "ppo", "mamba2"])
def test_precision_changes_activations_not_master_weights(name, precision, fp32_profiles):
    fp32, half = fp32_profiles[name], _profile(name, precision)
    assert torch.isfinite(torch.tensor(half.loss))
    # autocast keeps weights, gradients and Adam state in fp32
    assert (half.parameters, half.gradients, half.optimizer_state) == \
        (fp32.parameters, fp32.gradients, fp32.optimizer_state)
    # matmul inputs are saved in 16 bits: fewer bytes saved for backward, but not half of them
    # (norms, softmax and losses stay fp32, and casts add 16-bit copies of the weights)
    assert half.activations < fp32.activations
    assert half.activations > 0.25 * fp32.activations
    assert half.buffers == fp32.buffers  # replay and rollout storage is not touched by autocast
