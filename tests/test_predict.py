"""predict_step (fake tensors, nothing allocated) against profile_step (measured on the CPU),
a hand-counted MLP, and largest_fitting (screening by prediction, confirmed by one measurement).

Figures counted from the tensors themselves (parameters, gradients, optimizer state, batch, saved
activations of hand-countable models) are asserted to the byte; what depends on the CPU's kernels
(peaks, the 16-bit kernels' scratch, the oneDNN LSTM's workspace) within the tolerances the
reports claim (foxlib.memory.tolerances.within). scripts/test-isa.sh runs this file under ISA caps."""
import pytest
import torch

from foxlib.memory import tolerances as prediction
from foxlib.memory import profile_step
from foxlib.memory.accounting import unique_bytes
from foxlib.memory.predict import (SCRATCH_OPS, is_fake, predict_model_step, predict_step, probe_kernel_scratch,
                                   probe_spec, storage_id)
from foxlib.models import MODELS
from foxlib.harness.screening import largest_fitting

F32 = 4


@pytest.fixture(scope="module")
def small_pairs():
    """(predicted, measured) for every card's "small" preset, fp32, Adam as foxlib.harness.measure_step makes it."""
    out = {}
    for name, card in MODELS.items():
        cfg = card.config("small")
        batch = card.example_batch(cfg, device="cpu", seed=0)
        torch.manual_seed(0)
        model = card.build(cfg)
        optimizer = torch.optim.Adam(model.parameters(), lr=getattr(cfg, "lr", 1e-3))
        measured = profile_step(model, batch, card.loss, optimizer, buffers=card.buffers(batch))
        predicted = predict_step(card, cfg, batch=batch)
        out[name] = (predicted, measured)
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_prediction_matches_measurement(small_pairs, name):
    pred, meas = small_pairs[name]
    assert pred.device == "predicted (cpu)" and pred.peak_method.startswith("predicted:")
    # counted from the tensors themselves: equal to the byte
    for field in ("n_parameters", "parameters", "gradients", "optimizer_state", "batch", "live_before_step",
                  "saved_tensor_saves"):
        assert getattr(pred, field) == getattr(meas, field), field
    assert pred.buffers == meas.buffers
    # kernel-dependent (the LSTM's oneDNN workspace, the kernels' scratch): within the report's
    # tolerances (measured on the AVX2, avx512_bf16 and AMX paths: equal to within a few bytes;
    # the allocator also sees the 8-byte tensors Python numbers become, which no dispatch mode sees)
    assert set(pred.activations_by_module) == set(meas.activations_by_module)
    for field in ("activations", "forward_peak", "peak"):
        assert prediction.within(field, getattr(pred, field), getattr(meas, field)), \
            (field, getattr(pred, field), getattr(meas, field))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_16bit_prediction_matches_measurement(name, precision):
    """Under autocast the matmuls run oneDNN's 16-bit kernels where the CPU has them, whose
    scratchpad is on the peak of these small MLPs: without it the DQN's bf16 peak was predicted
    11-12 % low with avx512_bf16 or AMX, the PPO's fp16 peak 12 % low with AMX (none on AVX2)."""
    card = MODELS[name]
    cfg = card.config("small")
    batch = card.example_batch(cfg, device="cpu", seed=0)
    torch.manual_seed(0)
    model = card.build(cfg)
    meas = profile_step(model, batch, card.loss, torch.optim.Adam(model.parameters(), lr=getattr(cfg, "lr", 1e-3)),
                        precision, buffers=card.buffers(batch))
    pred = predict_step(card, cfg, precision=precision, batch=batch)
    for field in ("parameters", "gradients", "optimizer_state", "batch", "activations"):
        assert getattr(pred, field) == getattr(meas, field), field
    for field in ("forward_peak", "peak"):
        assert prediction.within(field, getattr(pred, field), getattr(meas, field)), \
            (field, getattr(pred, field), getattr(meas, field))


def test_the_tft_is_predicted_on_fake_parameters():
    """predict_step builds the model under its FakeTensorMode: the TFT's parameters are fake (none allocated) and
    counted from their storages, each once, as many as the real model has."""
    import dataclasses
    card, built = MODELS["tft"], []
    spy = dataclasses.replace(card, build=lambda cfg: built.append(card.build(cfg)) or built[-1])
    pred = predict_step(spy, card.config("small"))
    params = list(built[0].parameters())
    assert len(built) == 1 and params and all(is_fake(p) for p in params)
    n = sum(p.numel() for p in card.build(card.config("small")).parameters())  # the real model's
    assert pred.n_parameters == sum(p.numel() for p in params) == n
    assert pred.parameters == unique_bytes(params, storage_id) == F32 * n


def mse(model, batch):
    return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])


@pytest.mark.parametrize("foreach", [None, True])
def test_mlp_prediction_equals_hand_count(foreach):
    """A parameter-heavy MLP: the step peak falls in Adam's step. Bytes counted by hand."""
    B, I, H, O = 4, 256, 512, 8
    torch.manual_seed(0)
    batch = {"x": torch.randn(B, I), "y": torch.randn(B, O)}

    def build():
        return torch.nn.Sequential(torch.nn.Linear(I, H), torch.nn.ReLU(), torch.nn.Linear(H, O))

    pred = predict_model_step(build, batch, mse, foreach=foreach)
    w1, sizes = F32 * I * H, [F32 * I * H, F32 * H, F32 * H * O, F32 * O]
    n = I * H + H + H * O + O
    assert pred.n_parameters == n
    assert pred.parameters == pred.gradients == F32 * n
    assert pred.optimizer_state == 2 * F32 * n + F32 * 4  # two moments + a 0-dim "step" per tensor
    # saved: x (Linear 0), ReLU's output (ReLU, Linear 2), Linear 2's output and y (the loss)
    assert pred.activations == F32 * (B * I + B * H + B * O + B * O)
    assert pred.batch == F32 * (B * I + B * O)
    assert pred.live_before_step == pred.parameters + pred.optimizer_state + pred.batch
    # forward: Linear 0's output and ReLU's output live together
    assert pred.forward_peak == pred.live_before_step + 2 * F32 * B * H
    # the optimizer step: every gradient, the loss (the CPU mse_loss returns its mean as a view
    # of its B x O elementwise buffer, alive while `loss` is) and Adam's temporaries:
    #  - for-loop (CPU default): denom = sqrt(v) / bias_correction -> sqrt and quotient of ONE
    #    parameter live together, the largest and first (W1): 2 x W1;
    #  - multi-tensor (CUDA default): _foreach_sqrt of ALL exp_avg_sq at once: 1 x all parameters.
    adam = 2 * w1 if foreach is None else sum(sizes)
    assert pred.peak == pred.live_before_step + pred.gradients + F32 * B * O + adam

    # and the measurement agrees: the tensors' own bytes exactly, the peaks within the report's tolerances
    model = build()
    meas = profile_step(model, batch, mse, torch.optim.Adam(model.parameters(), foreach=foreach))
    for field in ("parameters", "gradients", "optimizer_state", "activations", "live_before_step"):
        assert getattr(pred, field) == getattr(meas, field), field
    for field in ("forward_peak", "peak"):
        assert prediction.within(field, getattr(pred, field), getattr(meas, field)), field


def test_fused_dropout_saves_a_one_byte_mask_where_the_cpu_saves_float_noise():
    """dropout="fused" (CUDA's native_dropout): a bool mask of B x H; the CPU composite: float noise.
    Everything else the same: the difference is 3 bytes an element of the dropped tensor."""
    B, I, H = 8, 16, 32
    torch.manual_seed(0)
    batch = {"x": torch.randn(B, I), "y": torch.randn(B, 1)}

    def build():
        return torch.nn.Sequential(torch.nn.Linear(I, H), torch.nn.Dropout(0.5), torch.nn.Linear(H, 1))

    original = torch.nn.functional.dropout
    cpu = predict_model_step(build, batch, mse)
    fused = predict_model_step(build, batch, mse, dropout="fused")
    assert torch.nn.functional.dropout is original  # patched only inside the prediction
    assert cpu.activations - fused.activations == (F32 - 1) * B * H
    model = build()  # the CPU prediction is the CPU measurement
    meas = profile_step(model, batch, mse, torch.optim.Adam(model.parameters()))
    assert cpu.activations == meas.activations
    with pytest.raises(ValueError, match="cpu, fused"):
        predict_model_step(build, batch, mse, dropout="maybe")


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_autocast_prediction_matches_measurement(precision):
    """Under autocast: 16-bit saved inputs and weight casts, the LayerNorm's float32 statistics
    (the meta kernel says 16-bit), for fp16 the GradScaler, and the 16-bit matmuls' oneDNN
    scratchpad (none on the AVX2 path; 14-26 kB a call with avx512_bf16 or AMX)."""
    B, I, H = 16, 64, 128
    torch.manual_seed(0)
    batch = {"x": torch.randn(B, I), "y": torch.randn(B, 1)}

    def build():
        return torch.nn.Sequential(torch.nn.Linear(I, H), torch.nn.LayerNorm(H), torch.nn.ReLU(),
                                   torch.nn.Linear(H, 1))

    pred = predict_model_step(build, batch, mse, precision=precision)
    model = build()
    meas = profile_step(model, batch, mse, torch.optim.Adam(model.parameters()), precision)
    for field in ("parameters", "gradients", "optimizer_state", "activations", "live_before_step"):
        assert getattr(pred, field) == getattr(meas, field), field
    assert pred.activations_by_module == meas.activations_by_module
    for field in ("forward_peak", "peak"):
        assert prediction.within(field, getattr(pred, field), getattr(meas, field)), field
    # the scratch is what the CPU's kernels hold beyond their outputs: never negative
    bare = predict_model_step(build, batch, mse, precision=precision, kernel_scratch=False)
    assert bare.forward_peak <= pred.forward_peak and bare.peak <= pred.peak
    assert (bare.parameters, bare.activations) == (pred.parameters, pred.activations)


def test_kernel_scratch_probe_counts_outputs_and_scratch():
    """probe_kernel_scratch: a real call's high-water mark, at least its output; cached per spec."""
    a, b = torch.zeros(32, 64, dtype=torch.bfloat16), torch.zeros(64, 96, dtype=torch.bfloat16)
    key = (torch.ops.aten.mm.default, probe_spec((a, b.t().contiguous().t())))  # a transposed operand
    assert key[0] in SCRATCH_OPS
    got = probe_kernel_scratch([key])
    assert got[key] >= 32 * 96 * 2  # the bf16 output, and oneDNN's scratchpad where it has one
    assert probe_kernel_scratch([key]) == got  # cached: the same CPU gives the same size


def test_sgd_has_no_state_and_unknown_optimizer_is_refused():
    batch = {"x": torch.randn(3, 5), "y": torch.randn(3, 2)}
    pred = predict_model_step(lambda: torch.nn.Linear(5, 2), batch, mse, optimizer="sgd")
    assert pred.optimizer_state == 0 and pred.gradients == F32 * (5 * 2 + 2)
    with pytest.raises(ValueError, match="adam, sgd"):
        predict_model_step(lambda: torch.nn.Linear(5, 2), batch, mse, optimizer="lbfgs")


@pytest.mark.slow
def test_largest_fitting_batch_size_tft_small(small_pairs):
    card = MODELS["tft"]
    base = card.config("small")  # batch_size 8
    ladder = [4, 8]
    # first pass: predicted peaks only (an unlimited budget fits every rung)
    scan = largest_fitting(card, base, "batch_size", 1 << 40, candidates=ladder, confirm=False)
    peaks = scan["probes"]
    assert list(peaks) == ladder and peaks[4] < peaks[8]
    assert peaks[8] == small_pairs["tft"][0].peak  # the same prediction as above (memoised)
    assert scan["answer"] == 8 and scan["confirmation"] is None
    # a budget between the two predicted peaks: the answer is 4, confirmed by measuring it
    budget = (peaks[4] + peaks[8]) // 2
    res = largest_fitting(card, base, "batch_size", budget, candidates=ladder)
    assert res["answer"] == 4 and res["predicted_peak"] == peaks[4]
    assert res["probes"] == peaks  # 8 was probed (memoised) and did not fit
    conf = res["confirmation"]
    assert conf["fits"] and conf["measured_peak"] <= budget
    assert abs(conf["relative_error"]) <= prediction.PEAK_TOLERANCE_PCT / 100
    assert conf["error_bytes"] == res["predicted_peak"] - conf["measured_peak"]


def test_largest_fitting_search_and_bad_field(monkeypatch):
    """The search on a hand-made peak (1,000 bytes a sample + 500; batches over 40 refused by the model):
    every probe and answer counted by hand. The real predictions are the tests above; the TFT ladder
    with its confirming measurement is the slow test before this one."""
    import types

    from foxlib.harness import screening

    def peak(card, cfg, **kwargs):
        if cfg.batch_size > 40:
            raise ValueError("the model refuses it")
        return types.SimpleNamespace(peak=1000 * cfg.batch_size + 500)
    monkeypatch.setattr(screening, "predict_step", peak)
    card = MODELS["dqn"]
    base = card.config("small", batch_size=8)
    scan = largest_fitting(card, base, "batch_size", 1 << 40, confirm=False, max_value=32)
    assert scan["answer"] == 32 and scan["probes"] == {8: 8500, 16: 16500, 32: 32500}  # doubling up to the cap
    assert scan["predicted_peak"] == 32500 and scan["confirmation"] is None
    # a budget just below the peak of batch size 8: halving to 4, then bisecting 4..8
    res = largest_fitting(card, base, "batch_size", 8499, confirm=False)
    assert res["answer"] == 7 and list(res["probes"]) == [8, 4, 6, 7] and res["predicted_peak"] == 7500
    # a refused value counts as not fitting: doubling stops at 64, bisecting 32..64 finds 40
    res = largest_fitting(card, base, "batch_size", 1 << 40, confirm=False)
    assert res["answer"] == 40 and list(res["probes"]) == [8, 16, 32, 64, 48, 40, 44, 42, 41]
    assert res["probes"][64] is None
    # nothing fits: None, no predicted peak
    none = largest_fitting(card, base, "batch_size", 1000, confirm=False)
    assert none["answer"] is None and none["predicted_peak"] is None and list(none["probes"]) == [8, 4, 2, 1]
    # a ladder stops at its first rung over the budget
    ladder = largest_fitting(card, base, "batch_size", 20_000, candidates=[16, 4, 32, 8], confirm=False)
    assert ladder["answer"] == 16 and list(ladder["probes"]) == [4, 8, 16, 32]
    with pytest.raises(ValueError, match="no config field"):
        largest_fitting(card, base, "seq_len", 1 << 30, confirm=False)


def test_kernel_scratch_probe_allocates_little_for_a_large_call():
    """A call whose inputs exceed PROBE_MAX_BYTES is not run (a prediction of a configuration too
    large for this machine must not allocate it): its scratch counts 0."""
    from foxlib.memory.predict import PROBE_MAX_BYTES
    n = int((PROBE_MAX_BYTES // 4) ** 0.5) + 1  # two bf16 n x n operands, 4 n² bytes: just over the limit
    spec = (("tensor", (n, n), (n, 1), torch.bfloat16), ("tensor", (n, n), (n, 1), torch.bfloat16))
    key = (torch.ops.aten.mm.default, spec)
    assert probe_kernel_scratch([key]) == {key: 0}
