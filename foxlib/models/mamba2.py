"""Mamba-2 (Dao & Gu, 2024, "Transformers are SSMs"), pure PyTorch: a causal forecaster whose output at day t
is the log return from day t to t+1, in percent, from the daily market features up to t.

The state space duality (SSD) layer runs in its chunked form (paper, section 6 and listing 1): inside a chunk
of Q steps the output is a masked "attention" (C Bᵀ ∘ L) X, between chunks a small recurrence carries the
state. tests/test_mamba2.py checks it against the plain recurrence.

Notation: D = d_model, E = expand, H = heads, P = headdim (E·D = H·P), N = d_state, G = ngroups, K = d_conv,
Q = chunk_size. Under autocast the projections and contractions run in 16 bits, but the log-decays (dt·A), their
sums and exponentials and both RMSNorms in float32 (float64 stays), so nothing overflows in float16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from foxlib.data.market import TARGET_SCALE, market_features
from foxlib.memory.step import TrainingStep
from foxlib.models.card import ModelCard, seeded

# Initialisation ranges of the reference implementation (mamba_ssm, Mamba2 defaults).
DT_MIN, DT_MAX, DT_INIT_FLOOR = 1e-3, 1e-1, 1e-4  # dt = softplus(dt_bias) log-uniform in [DT_MIN, DT_MAX]
A_INIT_RANGE = (1.0, 16.0)                         # A = -exp(A_log), -A uniform in this range
NORM_EPS = 1e-5


@dataclass(frozen=True)
class Mamba2Config:
    n_features: int = 53  # market features per day (the first n of foxlib.data.market's feature library, 1..53)
    d_model: int = 256  # model width D (the residual stream)
    n_layers: int = 4  # number of Mamba-2 blocks
    d_state: int = 64  # SSM state size N per head
    d_conv: int = 4  # kernel width K of the depthwise causal convolution over x, B, C
    expand: int = 2  # expansion E: the inner width is E·D
    headdim: int = 64  # head dimension P; the number of heads is H = E·D / P
    ngroups: int = 1  # groups G of B and C shared across heads (like grouped-query attention)
    chunk_size: int = 64  # SSD chunk length Q (256 in the paper's kernels; 64 suits pure PyTorch better)
    seq_len: int = 256  # days per training window
    batch_size: int = 3  # windows per training batch
    lr: float = 1e-3  # Adam learning rate
    checkpointing: bool = False  # per-block gradient checkpointing (torch.utils.checkpoint, non-reentrant)

    def __post_init__(self):
        if self.d_inner % self.headdim:
            raise ValueError(f"expand*d_model={self.d_inner} must be a multiple of headdim={self.headdim}")
        if self.nheads % self.ngroups:
            raise ValueError(f"nheads={self.nheads} must be a multiple of ngroups={self.ngroups}")
        if self.chunk_size < 1 or self.seq_len < 1 or self.batch_size < 1:
            raise ValueError("chunk_size, seq_len and batch_size must be at least 1")

    @property
    def d_inner(self) -> int:
        """E·D."""
        return self.expand * self.d_model

    @property
    def nheads(self) -> int:
        """H = E·D / P."""
        return self.d_inner // self.headdim


# seed: the seed team's nvidia-smi figure for Mamba-2 training was 164 MB; `seed`'s real fp32 training memory
# is of that size. Counted on the CPU for one forward + loss (saved_tensors_hooks, each storage once, parameters
# excluded, the batch included): 1,742,433 parameters (4 x 431,768 per block, 4 x 256 pre-norms, input Linear
# 53*256 + 256, final norm 256, head 257) x 16 B = 27,878,928 B, plus 129,797,960 B saved for backward at B = 3,
# L = 256 (42.25 KB per token per block: unfused projections, einsum's contiguous copies, the (B, H, L, Q) decay
# and score matrices, the CPU conv's workspace): 157,676,888 B ~ 158 MB (B = 4: 200.9 MB). profile_step (fp32,
# CPU) agrees on the activations and measured a step peak of 154,375,296 B: backward frees what gradients reuse.
# Under bf16 or fp16 autocast 97,681,992 B are saved (0.75x: the residual stream, the SSD's decays and the norms
# stay fp32, weight casts are saved); with checkpointing=True 5,677,056 B (block inputs only).
# seq_len 256 is about one trading year: 4 chunks of Q = 64.
PRESETS = {
    "seed": Mamba2Config(n_features=53, d_model=256, n_layers=4, d_state=64, headdim=64,
                         chunk_size=64, seq_len=256, batch_size=3, lr=1e-3),
    # Fast on 2 CPU cores, for tests: 4 heads of 16, 2 blocks, 16-day chunks.
    "small": Mamba2Config(n_features=16, d_model=32, n_layers=2, d_state=16, headdim=16,
                          chunk_size=16, seq_len=64, batch_size=16, lr=3e-3),
}


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    """float64 stays float64; everything else (fp32, bf16, fp16) is computed in float32."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def segsum(a: torch.Tensor) -> torch.Tensor:
    """(..., T) -> (..., T, T): out[..., i, j] = a[j+1] + ... + a[i] for i >= j, -inf above the diagonal, so
    that exp(segsum(a)) is the SSD's decay matrix L. A masked cumulative sum: a difference of cumsums loses
    precision when they are large."""
    T = a.shape[-1]
    strictly_lower = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device), diagonal=-1)
    rows = a.unsqueeze(-1).expand(*a.shape, T)                 # rows[..., i, j] = a[i]
    out = torch.cumsum(rows.masked_fill(~strictly_lower, 0), dim=-2)
    lower = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device))
    return out.masked_fill(~lower, -math.inf)


def ssd_chunked(x, dt, A, B, C, chunk_size):
    """The SSD recurrence h_t = exp(dt_t·A) h_{t-1} + dt_t x_t B_tᵀ, y_t = C_t h_t (head h reads group h // (H/G)),
    from a zero state, in four steps over chunks of Q = chunk_size (numbered below). x (b, l, H, P), dt (b, l, H),
    A (H,), B and C (b, l, G, N) -> y (b, l, H, P) and the final state (b, H, P, N). The sequence is zero-padded
    to a multiple of Q (dt = 0 there: the final state is unchanged). Every contraction is an einsum of two
    operands: no (b, c, l, l, h, n) broadcast is ever built."""
    b, l, h, p = x.shape
    g, n = B.shape[-2:]
    if dt.shape != (b, l, h) or A.shape != (h,) or B.shape != (b, l, g, n) or C.shape != B.shape:
        raise ValueError(f"SSD shapes: x {tuple(x.shape)} dt {tuple(dt.shape)} A {tuple(A.shape)} "
                         f"B {tuple(B.shape)} C {tuple(C.shape)}")
    if h % g:
        raise ValueError(f"heads ({h}) must be a multiple of groups ({g})")
    r = h // g  # heads per group
    q = chunk_size
    pad = (-l) % q
    if pad:
        x, dt = F.pad(x, (0, 0, 0, 0, 0, pad)), F.pad(dt, (0, 0, 0, pad))
        B, C = F.pad(B, (0, 0, 0, 0, 0, pad)), F.pad(C, (0, 0, 0, 0, 0, pad))
    c = (l + pad) // q
    fdtype = _compute_dtype(x)
    dt = dt.to(fdtype)
    a = (dt * A.to(fdtype)).reshape(b, c, q, g, r)                 # log-decay per step, float32/64
    X = x.reshape(b, c, q, g, r, p) * dt.reshape(b, c, q, g, r, 1)  # discretised input dt·x
    B = B.reshape(b, c, q, g, n)
    C = C.reshape(b, c, q, g, n)
    a_cum = torch.cumsum(a, dim=2)                              # (b, c, q, g, r)

    # 1. intra-chunk: Y_diag[l] = sum_{s<=l} (C_l · B_s) L[l, s] X_s
    L = torch.exp(segsum(a.permute(0, 1, 3, 4, 2)))                  # (b, c, g, r, q, q)
    CB = torch.einsum("bclgn,bcsgn->bcgls", C, B)                    # (b, c, g, q, q)
    scores = CB.unsqueeze(3) * L                                     # (b, c, g, r, q, q)
    Y_diag = torch.einsum("bcgrls,bcsgrp->bclgrp", scores, X)

    # 2. the state at the end of each chunk: sum_s exp(a_cum[-1] - a_cum[s]) X_s B_sᵀ
    decay_to_end = torch.exp(a_cum[:, :, -1:] - a_cum)              # (b, c, q, g, r)
    states = torch.einsum("bclgn,bclgrp->bcgrpn", B, X * decay_to_end.unsqueeze(-1))

    # 3. across chunks, with a zero state as the end state of a chunk -1:
    #    entering[z] = sum_{c<z} exp(total log-decay of chunks c+1 .. z-1) · end_state[c]
    states = torch.cat([states.new_zeros(b, 1, g, r, p, n), states], dim=1)  # (b, c+1, g, r, p, n)
    chunk_decay = F.pad(a_cum[:, :, -1].permute(0, 2, 3, 1), (1, 0))  # (b, g, r, c+1)
    across = torch.exp(segsum(chunk_decay))                         # (b, g, r, c+1, c+1)
    states = torch.einsum("bgrzc,bcgrpn->bzgrpn", across.to(states.dtype), states)
    entering, final = states[:, :-1], states[:, -1]

    # 4. state-to-output: Y_off[l] = exp(a_cum[l]) C_l · state entering the chunk
    Y_off = torch.einsum("bclgn,bcgrpn->bclgrp", C, entering) * torch.exp(a_cum).unsqueeze(-1)

    y = (Y_diag + Y_off).reshape(b, c * q, h, p)[:, :l]
    return y, final.reshape(b, h, p, n)


class RMSNorm(nn.Module):
    """RMSNorm, optionally gated before normalising: norm(x · silu(z)) · weight (Mamba-2's). In float32 (float64
    stays), returned in x's dtype."""

    def __init__(self, dim: int, eps: float = NORM_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        dtype = _compute_dtype(x)
        h = x.to(dtype)
        if z is not None:
            h = h * F.silu(z.to(dtype))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * self.weight.to(dtype)).to(x.dtype)


class Mamba2Block(nn.Module):
    """The Mamba-2 mixer: in_proj -> causal depthwise conv over (x, B, C) -> SSD -> gated
    RMSNorm -> out_proj. (b, l, D) -> (b, l, D)."""

    def __init__(self, cfg: Mamba2Config):
        super().__init__()
        self.cfg = cfg
        D, ED, H, G, N, K = cfg.d_model, cfg.d_inner, cfg.nheads, cfg.ngroups, cfg.d_state, cfg.d_conv
        self.conv_dim = ED + 2 * G * N
        self.in_proj = nn.Linear(D, 2 * ED + 2 * G * N + H, bias=False)     # -> z, x, B, C, dt
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, K, groups=self.conv_dim, padding=K - 1)
        # dt = softplus(dt_raw + dt_bias); at init softplus(dt_bias) is log-uniform in [DT_MIN, DT_MAX]
        dt = torch.exp(torch.rand(H) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
        dt = dt.clamp(min=DT_INIT_FLOOR)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))      # inverse softplus
        self.A_log = nn.Parameter(torch.log(torch.empty(H).uniform_(*A_INIT_RANGE)))
        self.D = nn.Parameter(torch.ones(H))                                # skip y += D·x, per head
        self.norm = RMSNorm(ED)
        self.out_proj = nn.Linear(ED, D, bias=False)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        b, l, _ = u.shape
        ED, H, P, G, N = cfg.d_inner, cfg.nheads, cfg.headdim, cfg.ngroups, cfg.d_state
        z, xBC, dt = torch.split(self.in_proj(u), [ED, self.conv_dim, H], dim=-1)
        xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :l].transpose(1, 2))  # causal: drop the right pad
        x, B, C = torch.split(xBC, [ED, G * N, G * N], dim=-1)
        dt = F.softplus(dt.to(_compute_dtype(dt)) + self.dt_bias)          # (b, l, H)
        A = -torch.exp(self.A_log.to(dt.dtype))                            # (H,)
        x = x.reshape(b, l, H, P)
        y, _ = ssd_chunked(x, dt, A, B.reshape(b, l, G, N), C.reshape(b, l, G, N), cfg.chunk_size)
        y = y + x * self.D[:, None].to(x.dtype)
        y = self.norm(y.reshape(b, l, ED), z)
        return self.out_proj(y)


class ResidualBlock(nn.Module):
    """Pre-norm residual around a Mamba-2 block: u + Mamba2Block(RMSNorm(u))."""

    def __init__(self, cfg: Mamba2Config):
        super().__init__()
        self.norm = RMSNorm(cfg.d_model)
        self.mixer = Mamba2Block(cfg)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return u + self.mixer(self.norm(u))


class Mamba2Forecaster(nn.Module):
    """Daily market features (b, l, F) -> forecast of the next-day log return in percent (b, l).
    Causal: the output at day t depends on days <= t only."""

    def __init__(self, cfg: Mamba2Config):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Linear(cfg.n_features, cfg.d_model)
        self.layers = nn.ModuleList(ResidualBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, 1)
        # GPT-2 / mamba_ssm residual init: scale each block's output projection by 1/sqrt(n_layers)
        with torch.no_grad():
            for layer in self.layers:
                layer.mixer.out_proj.weight.div_(math.sqrt(cfg.n_layers))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        h = self.embed(features)
        checkpointed = self.cfg.checkpointing and torch.is_grad_enabled()
        for layer in self.layers:
            h = checkpoint(layer, h, use_reentrant=False) if checkpointed else layer(h)
        return self.head(self.norm_f(h)).squeeze(-1)


build = Mamba2Forecaster  # config -> module


def example_batch(cfg: Mamba2Config, device: str | torch.device = "cpu", seed: int = 0) -> dict[str, torch.Tensor]:
    """batch_size random windows of seq_len training-split days of either series: {"x": (B, L, F) features,
    "target": (B, L) next-day log returns in percent}, float32; a window's last return ends before validation."""
    f = market_features(cfg.n_features)
    n_starts = f.train_end - cfg.seq_len
    if n_starts < 1:
        raise ValueError(f"seq_len={cfg.seq_len} is longer than the training split ({f.train_end} days)")
    rng = np.random.default_rng(seed)
    series = rng.integers(0, f.observed.shape[0], size=cfg.batch_size)
    t0 = rng.integers(0, n_starts, size=cfg.batch_size)
    days = t0[:, None] + np.arange(cfg.seq_len)[None, :]              # (B, L)
    x = f.observed[series[:, None], days]                              # (B, L, F)
    target = f.next_return[series[:, None], days] * TARGET_SCALE       # (B, L)
    return {"x": torch.as_tensor(x, dtype=torch.float32, device=device),
            "target": torch.as_tensor(target, dtype=torch.float32, device=device)}


def loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean squared error of the forecasts against the targets, in float32."""
    return F.mse_loss(model(batch["x"]).float(), batch["target"].float())


def train(cfg: Mamba2Config, steps: int, device: str | torch.device = "cpu", seed: int = 0) -> list[float]:
    """A short training run, each step one TrainingStep (foxlib.memory.step: Adam at cfg.lr, gradients clipped to
    norm 1) on a fresh seeded batch: the loss of every step. On "small" (seed 0) it falls from about 2.1 to about
    1.1 within 120 steps, below the variance of next-day returns: the model fits the training period; it says
    nothing of skill after it."""
    model = seeded(build, cfg, seed, torch.device(device))
    run = TrainingStep(model, None, loss, torch.optim.Adam(model.parameters(), lr=cfg.lr), clip=1.0)
    return [run(example_batch(cfg, device=device, seed=seed * 1_000_003 + step)).item() for step in range(steps)]


CARD = ModelCard(name="mamba2", title="Mamba-2", presets=PRESETS, build=build,
                 example_batch=example_batch, loss=loss)
