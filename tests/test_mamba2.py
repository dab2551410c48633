"""Mamba-2: the chunked SSD against the plain recurrence, and the forecaster's properties."""
import dataclasses

import numpy as np
import pytest
import torch

from foxlib.models import mamba2 as m
from tests.conftest import recorded_training_steps


def _ssd_inputs(b, l, h, p, g, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    f64 = dict(dtype=torch.float64, generator=gen)
    x = torch.randn(b, l, h, p, **f64)
    dt = torch.rand(b, l, h, **f64) * 0.5 + 1e-3
    A = -(torch.rand(h, **f64) * 4 + 0.1)
    B = torch.randn(b, l, g, n, **f64)
    C = torch.randn(b, l, g, n, **f64)
    return x, dt, A, B, C


def ssd_sequential(x, dt, A, B, C):
    """The plain recurrence, per head (head h reads group h // (H/G)), the input discretised as dt_t·x_t:
        h_t = a_t h_{t-1} + dt_t x_t B_tᵀ,   y_t = C_t h_t,   a_t = exp(dt_t · A),
    from a zero state: y (b, l, H, P) and the final state (b, H, P, N)."""
    b, l, h, p = x.shape
    g, n = B.shape[-2:]
    B = B.repeat_interleave(h // g, dim=2)  # (b, l, H, N)
    C = C.repeat_interleave(h // g, dim=2)
    state = x.new_zeros(b, h, p, n)
    ys = []
    for t in range(l):
        decay = torch.exp(dt[:, t] * A)                                        # (b, H)
        state = decay[..., None, None] * state + (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", state, C[:, t]))
    return torch.stack(ys, dim=1), state


@pytest.mark.parametrize("b,l,h,p,g,n,q", [
    (2, 64, 4, 8, 1, 6, 16),   # a multiple of the chunk size
    (2, 50, 4, 8, 2, 6, 16),   # padded, two groups
    (1, 37, 3, 5, 1, 4, 8),    # padded, odd sizes
    (3, 7, 2, 4, 1, 3, 16),    # shorter than one chunk
    (1, 40, 2, 4, 2, 5, 1),    # chunks of one step
])
def test_chunked_ssd_equals_sequential_recurrence(b, l, h, p, g, n, q):
    x, dt, A, B, C = _ssd_inputs(b, l, h, p, g, n)
    y_ref, final_ref = ssd_sequential(x, dt, A, B, C)
    y, final = m.ssd_chunked(x, dt, A, B, C, q)
    assert y.shape == (b, l, h, p) and final.shape == (b, h, p, n)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(final, final_ref, rtol=0, atol=1e-10)


def test_segsum():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    s = m.segsum(a)
    for i in range(4):
        for j in range(4):
            expected = a[j + 1:i + 1].sum().item() if i >= j else -float("inf")
            assert s[i, j].item() == expected


def _model(cfg, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return m.build(cfg).to(dtype)


def _inputs(cfg, l=None, dtype=torch.float64, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, l or cfg.seq_len, cfg.n_features, generator=gen).to(dtype)


def test_output_shape_and_batch():
    cfg = m.PRESETS["small"]
    batch = m.example_batch(cfg, seed=0)
    assert batch["x"].shape == (cfg.batch_size, cfg.seq_len, cfg.n_features)
    assert batch["target"].shape == (cfg.batch_size, cfg.seq_len)
    assert batch["x"].dtype == batch["target"].dtype == torch.float32
    assert torch.isfinite(batch["x"]).all() and torch.isfinite(batch["target"]).all()
    assert m.build(cfg)(batch["x"]).shape == (cfg.batch_size, cfg.seq_len)


def test_chunk_size_invariance():
    l = 50  # not a multiple of any chunk size below but itself
    base = dataclasses.replace(m.PRESETS["small"], seq_len=l)
    model = _model(base)
    x = _inputs(base)
    outs = {}
    for q in (8, 16, 64, l):
        other = m.build(dataclasses.replace(base, chunk_size=q)).to(torch.float64)
        other.load_state_dict(model.state_dict())
        with torch.no_grad():
            outs[q] = other(x)
    for q, out in outs.items():
        torch.testing.assert_close(out, outs[l], rtol=0, atol=1e-10, msg=f"chunk size {q}")


def test_causality():
    cfg = m.PRESETS["small"]
    model = _model(cfg)
    x = _inputs(cfg)
    with torch.no_grad():
        y = model(x)
        for t in (0, 1, 15, 16, 17, 40, cfg.seq_len - 1):
            x2 = x.clone()
            x2[:, t:] += 10 * torch.randn_like(x2[:, t:])
            y2 = model(x2)
            torch.testing.assert_close(y2[:, :t], y[:, :t], rtol=0, atol=1e-12)
            assert (y2[:, t] - y[:, t]).abs().max() > 1e-6  # the change does arrive at t


def test_gradients_reach_every_parameter():
    cfg = m.PRESETS["small"]
    torch.manual_seed(0)
    model = m.build(cfg)
    m.loss(model, m.example_batch(cfg, seed=0)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_checkpointing_gives_same_outputs_and_gradients():
    cfg = m.PRESETS["small"]
    plain = _model(cfg)
    ckpt = m.build(dataclasses.replace(cfg, checkpointing=True)).to(torch.float64)
    ckpt.load_state_dict(plain.state_dict())
    x = _inputs(cfg)
    target = torch.randn(x.shape[:2], dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ys = []
    for model in (plain, ckpt):
        y = model(x)
        ((y - target) ** 2).mean().backward()
        ys.append(y.detach())
    torch.testing.assert_close(ys[1], ys[0], rtol=0, atol=1e-12)
    for (name, p), q in zip(plain.named_parameters(), ckpt.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_gives_finite_loss(dtype):
    cfg = m.PRESETS["small"]
    torch.manual_seed(0)
    model = m.build(cfg)
    batch = m.example_batch(cfg, seed=0)
    with torch.autocast("cpu", dtype=dtype):
        value = m.loss(model, batch)
    assert value.dtype == torch.float32
    assert torch.isfinite(value)
    value.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    with torch.no_grad():
        reference = m.loss(model, batch)
    assert abs(value.item() - reference.item()) < 0.05 * reference.item()


def parameter_count_theory(cfg: m.Mamba2Config) -> int:
    """Parameters of one Mamba2Block: D(2ED + 2GN + H) in_proj + (ED + 2GN)(K+1) conv weight and bias + 3H
    (dt_bias, A_log, D) + ED gated-norm weight + ED·D out_proj. D=256, N=64, P=64, E=2, G=1, K=4: 431,768."""
    D, ED, H, G, N, K = cfg.d_model, cfg.d_inner, cfg.nheads, cfg.ngroups, cfg.d_state, cfg.d_conv
    return D * (2 * ED + 2 * G * N + H) + (ED + 2 * G * N) * (K + 1) + 3 * H + ED + ED * D


def parameter_count_total_theory(cfg: m.Mamba2Config) -> int:
    """The whole forecaster's: blocks, pre-norms (D each), input Linear (F·D + D), final norm (D), head (D + 1)."""
    D = cfg.d_model
    return (cfg.n_layers * (parameter_count_theory(cfg) + D)
            + cfg.n_features * D + D + D + D + 1)


def test_parameter_count_matches_theory():
    cfg = m.Mamba2Config(d_model=256, d_state=64, headdim=64, expand=2, ngroups=1, d_conv=4)
    block = m.Mamba2Block(cfg)
    assert sum(p.numel() for p in block.parameters()) == parameter_count_theory(cfg) == 431_768
    for cfg in (m.PRESETS["small"], m.PRESETS["seed"], dataclasses.replace(m.PRESETS["small"], ngroups=2)):
        block = m.Mamba2Block(cfg)
        assert sum(p.numel() for p in block.parameters()) == parameter_count_theory(cfg)
    cfg = m.PRESETS["small"]
    assert sum(p.numel() for p in m.build(cfg).parameters()) == parameter_count_total_theory(cfg)


def test_training_lowers_the_loss(monkeypatch):
    made = recorded_training_steps(monkeypatch, m)
    history = m.train(m.PRESETS["small"], steps=120, seed=0)
    assert len(history) == 120 and all(np.isfinite(history))
    # every step one call of one TrainingStep (foxlib.memory.step), fp32, clipped to norm 1: its losses
    (step,) = made
    assert step.losses == history and step.clip == 1.0 and step.precision == "fp32" and step.scaler is None
    first, last = np.mean(history[:30]), np.mean(history[-30:])
    # measured (seed 0): first 30 steps ~2.06, last 30 ~1.06
    assert last < 0.75 * first, (first, last)


def test_example_batch_reproducible():
    cfg = m.PRESETS["small"]
    a, b = m.example_batch(cfg, seed=3), m.example_batch(cfg, seed=3)
    c = m.example_batch(cfg, seed=4)
    assert torch.equal(a["x"], b["x"]) and torch.equal(a["target"], b["target"])
    assert not torch.equal(a["x"], c["x"])


def test_card():
    card = m.CARD
    assert card.name == "mamba2" and set(card.presets) >= {"seed", "small"}
    assert card.preset("seed").batch_size == m.PRESETS["seed"].batch_size
