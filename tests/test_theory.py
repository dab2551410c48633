"""The shape-based count of the TFT's saved activations against the profiler, block by block (CPU)."""
import pytest
import torch

from foxlib.memory import profile_step
from foxlib.models import MODELS
from foxlib.memory.theory import training_step
from foxlib.memory.theory import activation_theory_by_block


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_every_tft_block_matches_its_hand_count_except_the_lstm_workspace(dropout):
    card = MODELS["tft"]
    cfg = card.config("small", dropout=dropout, batch_size=6, encoder_length=12)
    torch.manual_seed(0)
    model = card.build(cfg)
    prof = profile_step(model, card.example_batch(cfg), card.loss, torch.optim.Adam(model.parameters()))
    theory = activation_theory_by_block(cfg, "cpu")
    assert set(prof.activations_by_module) == set(theory)
    for block, measured in prof.activations_by_module.items():
        if block.startswith("lstm"):
            assert measured > theory[block]  # + the oneDNN workspace
        else:
            assert measured == theory[block], block
    # 16 bytes per parameter for weights, gradients and Adam's two moments
    t = training_step("tft", cfg, prof.n_parameters)
    assert t["parameters"] == prof.parameters and t["gradients"] == prof.gradients
    assert prof.optimizer_state - t["optimizer_state"] == 4 * len(list(model.parameters()))  # Adam's step counters


def test_theory_is_silent_where_it_does_not_apply():
    card = MODELS["tft"]
    assert activation_theory_by_block(card.config("small", memory_efficient=True)) is None
    assert training_step("tft", card.preset("small"), 100, "bf16")["activations"] is None
