"""Tests of the Temporal Fusion Transformer (foxlib/models/tft.py) on the small preset."""
from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

from foxlib.data.market import N_KNOWN, SERIES
from foxlib.memory.accounting import SavedTensorTracker
from foxlib.memory.timeline import cpu_allocations
from foxlib.models import MODELS
from foxlib.models.tft import CARD, PRESETS, build, example_batch, quantile_loss
from foxlib.models.tft_config import CHECKPOINTING, TFTConfig

SMALL = PRESETS["small"]
M_ENC = N_KNOWN + SMALL.n_observed  # 13 encoder variables


def make(cfg: TFTConfig, seed: int = 0, dtype=torch.float32):
    torch.manual_seed(seed)
    return build(cfg).to(dtype)


def batch_as(batch, dtype):
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in batch.items()}


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def forward_backward(model, batch, seed=1, return_attention=False):
    """Forward + backward with a fixed RNG state (same dropout masks); returns outputs and grads."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    out = model(batch, return_attention=return_attention)
    pred = out[0] if return_attention else out
    quantile_loss(pred, batch["target"], model.config.quantiles).backward()
    return out, grads(model)


def saved_bytes(model, batch):
    """Bytes (each storage once, parameters excluded) and largest storage autograd keeps from one forward."""
    with SavedTensorTracker(model) as tracker:
        out = model(batch)
    live = tracker.live()
    del out
    return sum(k[2] for k in live), max(k[2] for k in live)


def assert_grads_close(g1, g2, **tol):
    assert g1.keys() == g2.keys()
    for name in g1:
        torch.testing.assert_close(g1[name], g2[name], msg=lambda m: f"{name}: {m}", **tol)


@pytest.fixture(scope="module")
def batch():
    return example_batch(SMALL, seed=0)


def test_card_registered():
    assert MODELS["tft"] is CARD
    assert CARD.preset("seed") is PRESETS["seed"]


@pytest.mark.parametrize("efficient", [False, True])
def test_shapes(batch, efficient):
    cfg = dataclasses.replace(SMALL, memory_efficient=efficient)
    model = make(cfg).eval()
    B, Td, T = cfg.batch_size, cfg.decoder_length, cfg.encoder_length + cfg.decoder_length
    with torch.no_grad():
        pred = model(batch)
        pred2, attn = model(batch, return_attention=True)
    assert pred.shape == (B, Td, len(cfg.quantiles))
    torch.testing.assert_close(pred, pred2)
    assert attn.shape == (B, T, T)  # averaged over heads
    torch.testing.assert_close(attn.sum(-1), torch.ones(B, T))
    assert (attn.triu(1) == 0).all(), "attention to future positions"


def test_quantile_loss_hand_computed():
    pred = torch.tensor([[[0.0, 1.0], [2.0, 2.0]]])  # (B=1, T_d=2, n_q=2)
    target = torch.tensor([[1.0, 0.0]])
    # step 1: e = 1 - 0 = 1 -> q=0.1: 0.1 ; e = 1 - 1 = 0 -> 0       ; sum 0.1
    # step 2: e = 0 - 2 = -2 -> q=0.1: (0.1-1)(-2) = 1.8 ; q=0.9: (0.9-1)(-2) = 0.2 ; sum 2.0
    loss = quantile_loss(pred, target, (0.1, 0.9))
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx((0.1 + 2.0) / 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert quantile_loss(pred.bfloat16(), target, (0.1, 0.9)).dtype == torch.float32


@pytest.mark.parametrize("efficient", [False, True])
def test_gradients_reach_every_parameter(batch, efficient):
    model = make(dataclasses.replace(SMALL, memory_efficient=efficient)).train()
    _, g = forward_backward(model, batch)
    assert g.keys() == {n for n, _ in model.named_parameters()}
    for name, grad in g.items():
        assert torch.isfinite(grad).all(), name
        # a softmax over the single static variable is constantly 1: its selection GRN gets zero gradient
        if not name.startswith("static_vsn.flat_grn."):
            assert grad.abs().sum() > 0, f"{name} gets no gradient"


@pytest.mark.parametrize("efficient", [False, True])
def test_causality(batch, efficient):
    cfg = dataclasses.replace(SMALL, dropout=0.0, memory_efficient=efficient)
    model = make(cfg).eval()
    Te, Td = cfg.encoder_length, cfg.decoder_length
    with torch.no_grad():
        base, attn = model(batch, return_attention=True)
        for j in range(1, Td):  # perturb the known inputs at decoder step j (and later)
            changed = dict(batch, known=batch["known"].clone())
            changed["known"][:, Te + j:] += 3.0
            pred = model(changed)
            torch.testing.assert_close(pred[:, :j], base[:, :j], rtol=0, atol=1e-6)
            assert not torch.allclose(pred[:, j], base[:, j]), "the perturbation had no effect at all"


@pytest.mark.parametrize("efficient", [False, True])
def test_checkpointing_equals_plain(batch, efficient):
    """Same outputs and gradients in float64, dropout on (checkpoint restores the RNG state)."""
    b = batch_as(batch, torch.float64)
    ref_cfg = dataclasses.replace(SMALL, dropout=0.2, memory_efficient=efficient)
    ref = make(ref_cfg, dtype=torch.float64).train()
    (ref_out, _), ref_g = forward_backward(ref, b, return_attention=True)
    saved_counts, saved = {}, {}
    for mode in CHECKPOINTING:
        model = make(dataclasses.replace(ref_cfg, checkpointing=mode), dtype=torch.float64).train()
        model.load_state_dict(ref.state_dict())
        (out, _), g = forward_backward(model, b, return_attention=True)
        torch.testing.assert_close(out, ref_out, rtol=1e-10, atol=1e-12)
        assert_grads_close(g, ref_g, rtol=1e-9, atol=1e-12)
        n = [0]
        with torch.autograd.graph.saved_tensors_hooks(lambda t: n.__setitem__(0, n[0] + 1) or t, lambda t: t):
            model(b)
        saved_counts[mode] = n[0]
        saved[mode] = saved_bytes(model, b)
    # checkpointing is active: fewer tensors are saved for backward, fewest with one segment
    assert saved_counts["all"] < saved_counts["blocks"] < saved_counts["vsn"] < saved_counts["none"]
    # "variables" keeps what "blocks" keeps plus the VSNs' raw inputs and weights v, O(B·T·m) (no d factor):
    # the (B, T, m, d) embeddings and per-variable GRN intermediates are not kept
    B, Te = SMALL.batch_size, SMALL.encoder_length
    assert saved["blocks"][0] < saved["variables"][0] <= saved["blocks"][0] + 3 * B * Te * M_ENC * 8
    assert saved["variables"][1] == saved["blocks"][1]  # largest kept tensor: the same one
    assert saved["variables"][0] < saved["none"][0] / 20
    # "vsn_variables": the VSNs as "variables" does them, every other block as without checkpointing
    # (about what "vsn" keeps: the whole-VSN segments keep their inputs, the chunks theirs and v)
    assert saved["variables"][0] < saved["vsn_variables"][0] < saved["none"][0] / 3
    assert abs(saved["vsn_variables"][0] - saved["vsn"][0]) < 0.1 * saved["vsn"][0]
    model.eval()  # and inactive in eval mode: plain forward
    with torch.no_grad():
        model(b)


@pytest.mark.parametrize("mode", ["variables", "vsn_variables"])
@pytest.mark.parametrize("chunk", [1, 3, M_ENC])
@pytest.mark.parametrize("efficient", [False, True])
def test_variables_checkpointing_equals_plain(batch, efficient, chunk, mode):
    """checkpointing="variables" against the plain reference (loop, embeddings materialised, no
    checkpointing), float64, for chunks of 1, 3 (13 = 3+3+3+3+1) and all m variables.

    Loop path, dropout on: the chunks draw their masks variable by variable in the plain forward's
    order, and checkpoint restores the RNG state for the recompute, so outputs and gradients match.
    Batched path: one dropout draw per chunk of (chunk, N, d) where the plain path draws m of (N, d)
    (on CUDA the masks then differ), so dropout on is compared with the un-checkpointed batched model
    of the same chunks (same draws: the recompute's masks are right), and dropout 0 with the plain one
    (the folded formulation is right)."""
    b = batch_as(batch, torch.float64)
    cases = [(0.2, efficient)] + ([(0.0, False)] if efficient else [])  # (dropout, reference's path)
    for dropout, ref_efficient in cases:
        ref_cfg = dataclasses.replace(SMALL, dropout=dropout, vsn_chunk=chunk, memory_efficient=ref_efficient)
        ref = make(ref_cfg, dtype=torch.float64).train()
        cfg = dataclasses.replace(ref_cfg, checkpointing=mode, memory_efficient=efficient)
        model = make(cfg, seed=1, dtype=torch.float64)
        model.load_state_dict(ref.state_dict())
        model.train()
        (ref_out, ref_attn), ref_g = forward_backward(ref, b, return_attention=True)
        (out, attn), g = forward_backward(model, b, return_attention=True)
        torch.testing.assert_close(out, ref_out, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(attn, ref_attn, rtol=1e-10, atol=1e-12)
        assert_grads_close(g, ref_g, rtol=1e-9, atol=1e-12)
        with torch.no_grad():  # eval: no checkpoint, no dropout
            torch.testing.assert_close(model.eval()(b), ref.eval()(b), rtol=1e-10, atol=1e-12)


def test_variables_checkpointing_lowers_the_backward_peak():
    """The point of "variables": a whole-VSN segment ("blocks") is recomputed at once in the
    backward, chunk segments one at a time. Peak of live CPU bytes during forward + backward
    (profiler allocation events, gradients included) on a mid-sized config (d 64, m 29)."""
    base = dataclasses.replace(SMALL, hidden_size=64, n_observed=24, memory_efficient=True)
    batch = example_batch(base, seed=0)

    def peak(**overrides):
        torch.manual_seed(0)
        model = build(dataclasses.replace(base, **overrides)).train()
        for measured in (False, True):  # a warm-up step first: first calls allocate one-time state
            model.zero_grad(set_to_none=True)
            with cpu_allocations() if measured else contextlib.nullcontext() as timeline:
                quantile_loss(model(batch), batch["target"], base.quantiles).backward()
        return timeline.peak_delta(), sum(p.numel() * p.element_size() for p in model.parameters())

    blocks, grads = peak(checkpointing="blocks")
    whole, _ = peak(checkpointing="variables", vsn_chunk=29)
    small, _ = peak(checkpointing="variables", vsn_chunk=2)
    assert small < 0.6 * blocks and small < 0.6 * whole
    assert small < 1.4 * grads  # what the step cannot avoid: the gradients themselves
    # the VSNs in chunks, the rest un-checkpointed: the VSNs were the bulk, so the peak stays near
    vsn_only, _ = peak(checkpointing="vsn_variables", vsn_chunk=2)
    plain, _ = peak(checkpointing="none")
    assert small <= vsn_only < 0.6 * plain


def test_memory_efficient_equals_plain(batch, monkeypatch):
    b = batch_as(batch, torch.float64)
    plain = make(dataclasses.replace(SMALL, dropout=0.0), dtype=torch.float64).train()
    fast = make(dataclasses.replace(SMALL, dropout=0.0, memory_efficient=True), seed=123, dtype=torch.float64)
    assert {k: v.shape for k, v in plain.state_dict().items()} == {k: v.shape for k, v in fast.state_dict().items()}
    fast.load_state_dict(plain.state_dict())
    fast.train()
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    (p_out, p_attn), p_g = forward_backward(plain, b, return_attention=True)
    assert not calls
    (f_out, f_attn), f_g = forward_backward(fast, b, return_attention=True)
    assert calls, "the memory-efficient path did not use scaled_dot_product_attention"
    torch.testing.assert_close(f_out, p_out, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(f_attn, p_attn, rtol=1e-9, atol=1e-11)
    assert_grads_close(f_g, p_g, rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("overrides", [{}, {"memory_efficient": True, "dropout": 0.0},  # dropout 0: SDPA on CPU
                                       {"checkpointing": "blocks"},
                                       {"checkpointing": "variables", "vsn_chunk": 3},
                                       {"checkpointing": "variables", "memory_efficient": True, "vsn_chunk": 3}],
                         ids=["plain", "efficient", "blocks", "variables", "variables-efficient"])
def test_autocast_finite(batch, dtype, overrides):
    model = make(dataclasses.replace(SMALL, **overrides)).train()
    with torch.autocast("cpu", dtype=dtype):
        pred, attn = model(batch, return_attention=True)
        loss = quantile_loss(pred, batch["target"], SMALL.quantiles)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert torch.isfinite(attn.float()).all()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_card_loss_and_example_batch():
    a, b, c = example_batch(SMALL, seed=3), example_batch(SMALL, seed=3), example_batch(SMALL, seed=4)
    assert a.keys() == {"static", "known", "observed", "target"}
    for k in a:
        assert torch.equal(a[k], b[k])
    assert not all(torch.equal(a[k], c[k]) for k in a)
    assert a["observed"].shape == (SMALL.batch_size, SMALL.encoder_length, SMALL.n_observed)
    loss = CARD.loss(CARD.build(SMALL), a)
    assert loss.shape == () and torch.isfinite(loss)


def parameter_count_theory(cfg: TFTConfig) -> int:
    """Parameters by formula, exact for the blocks foxlib/models/tft.py builds."""
    d, H, nq = cfg.hidden_size, cfg.num_heads, len(cfg.quantiles)
    g = 4 * d * d + 6 * d  # one GRN(d -> d) without context; with context + d²

    def vsn(m: int, context: bool = True) -> int:
        # m·g per-variable GRNs; flattened GRN(m·d -> d -> m) with skip Linear(m·d, m) and context
        total = m * g + m * d * d + m * m * d + 2 * d * d + 2 * m * d + 2 * d + 5 * m
        return total if context else total - d * d  # W3 of the flattened GRN

    # core: static encoders 4g, two LSTMs 2(8d²+8d), three gates 3(2d²+4d), enrichment g+d²,
    # positionwise g, attention 2d²+2d²/H+3d+d/H, output d·nq+nq; 67d + d/H includes the biases
    # of Q (d), K (d), V (d/H) and W_H (d).
    core = 49 * d * d + 2 * d * d // H + 67 * d + d // H + d * nq + nq
    vsns = vsn(1, context=False) + vsn(N_KNOWN + cfg.n_observed) + vsn(N_KNOWN)
    embeddings = 2 * d * (N_KNOWN + cfg.n_observed) + len(SERIES) * d  # Linear(1, d) each; Embedding(2, d)
    return core + vsns + embeddings


def test_seed_parameter_count():
    cfg = CARD.preset("seed")
    with torch.device("meta"):
        model = build(cfg)
    n = sum(p.numel() for p in model.parameters())
    assert 16.2e6 <= n <= 19.8e6  # 72 MB of F32 parameters, ±10 %
    assert n == parameter_count_theory(cfg)
    assert (cfg.batch_size, cfg.encoder_length, cfg.decoder_length, cfg.num_heads) == (32, 60, 5, 4)


def test_small_parameter_count_matches_theory():
    for cfg in (SMALL, dataclasses.replace(SMALL, hidden_size=24, num_heads=3, n_observed=5)):
        assert sum(p.numel() for p in build(cfg).parameters()) == parameter_count_theory(cfg)


def test_unknown_preset_and_bad_config():
    with pytest.raises(ValueError, match="seed") as err:
        CARD.preset("nope")
    assert "small" in str(err.value)
    with pytest.raises(ValueError, match="none, vsn, blocks, all"):
        dataclasses.replace(SMALL, checkpointing="sometimes")
    with pytest.raises(ValueError, match="vsn_chunk"):
        dataclasses.replace(SMALL, vsn_chunk=-1)
    with pytest.raises(ValueError, match="divisible"):
        dataclasses.replace(SMALL, hidden_size=10, num_heads=4)
    with pytest.raises(ValueError, match="n_observed"):
        dataclasses.replace(SMALL, n_observed=54)
