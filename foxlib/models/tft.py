"""Temporal Fusion Transformer (Lim, Arik, Loeff & Pfister, "Temporal Fusion Transformers for
interpretable multi-horizon time series forecasting", Int. J. Forecasting 37(4), 2021).

Paper-faithful, one attention layer. "Eq. n" and "Sec. n" refer to the paper. Switches that
leave the parameters (and so the state dict) unchanged:
- `checkpointing`: gradient checkpointing at one of five granularities (Chen et al. 2016);
- `memory_efficient`: the per-variable GRNs of a VSN as batched ops over chunks of
  `vsn_chunk` variables, the real-valued embeddings folded into the first layers (below), and
  attention through fused `scaled_dot_product_attention` (weights computed on the side).

Folded embeddings. Each real input j is embedded as ξ_j = x_j·w_j + b_j (a Linear(1, d)), so
every linear map of the embeddings is a linear map of the m raw scalars: the flattened GRN's
first layer W[ξ_1..ξ_m] = x·Aᵀ + W·b with A[:, j] = W_j w_j (d × m), its skip likewise, and each
per-variable GRN's first layer W_j ξ_j = x_j·(W_j w_j) + W_j b_j. The encoder and decoder VSNs
of the folded path (memory_efficient, or a CHUNKED checkpointing) never build the
(B, T, m, d) embedding (nor its m·d-wide flattening, nor their gradients): ξ_j appears only
inside the residual of its GRN, one chunk at a time. Same function and parameters as the plain
path, up to floating-point rounding (float64: ~1e-15).

The plain path (memory_efficient=False, checkpointing not CHUNKED) is the reference:
embeddings materialised, a loop over the per-variable GRNs, explicit attention.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from foxlib.data.market import N_FEATURES_MAX, N_KNOWN, SERIES, MarketWindows
from foxlib.models.card import ModelCard

CHECKPOINTING = ("none", "vsn", "blocks", "all", "variables", "vsn_variables")
CHUNKED = ("variables", "vsn_variables")  # the modes that checkpoint the VSNs chunk by chunk (folded path)


@dataclass(frozen=True)
class TFTConfig:
    hidden_size: int = 16
    """d: width of every embedding, GRN, LSTM and attention (paper: 160-320)."""
    num_heads: int = 2
    """H attention heads; each has its own Q and K projection d -> d/H (paper: 1 or 4)."""
    n_observed: int = 8
    """Observed past inputs: the first n_observed market features of foxlib.data.market (1..53)."""
    encoder_length: int = 20
    """T_e: past days seen by the encoder LSTM."""
    decoder_length: int = 3
    """T_d: forecast horizon in days (known inputs only)."""
    batch_size: int = 8
    """Windows per training batch."""
    dropout: float = 0.1
    """Dropout rate before every GLU and on the attention weights (paper: 0.1-0.3)."""
    quantiles: tuple[float, ...] = (0.1, 0.5, 0.9)
    """Quantiles predicted at each horizon step; the loss sums their pinball losses (Eq. 24)."""
    lr: float = 1e-3
    """Adam learning rate (paper: 1e-3 for electricity, traffic and retail)."""
    checkpointing: str = "none"
    """Gradient checkpointing: none, vsn (the VSNs), blocks (every major block), all (the whole body),
    variables (blocks, with the encoder and decoder VSNs in segments of vsn_chunk variables each) or
    vsn_variables (only the encoder and decoder VSNs, in those segments: the rest keeps its activations)."""
    memory_efficient: bool = False
    """Batched per-variable GRNs in chunks of vsn_chunk, folded embeddings, fused SDPA attention (on CPU
    only at dropout 0); same parameters."""
    vsn_chunk: int = 4
    """Variables per chunk of the folded VSN path (memory_efficient or a CHUNKED checkpointing): one
    batched op, or one checkpoint segment, per chunk. Smaller: lower peak, more (smaller) ops. Seed
    preset, fp32, CPU, "variables": step peak 1.20x the 290 MB floor at 4, 1.46x at 8, 1.13x at 1 (Adam's step)."""

    def __post_init__(self):
        object.__setattr__(self, "quantiles", tuple(float(q) for q in self.quantiles))
        if self.checkpointing not in CHECKPOINTING:
            raise ValueError(f"unknown checkpointing {self.checkpointing!r}; valid: {', '.join(CHECKPOINTING)}")
        for name in ("hidden_size", "num_heads", "encoder_length", "decoder_length", "batch_size", "vsn_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if not 1 <= self.n_observed <= N_FEATURES_MAX:
            raise ValueError(f"n_observed must be in 1..{N_FEATURES_MAX}, got {self.n_observed}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.quantiles or not all(0.0 < q < 1.0 for q in self.quantiles):
            raise ValueError(f"quantiles must be a non-empty tuple of values in (0, 1), got {self.quantiles}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not isinstance(self.memory_efficient, bool):
            raise ValueError(f"memory_efficient must be True or False, got {self.memory_efficient!r}")


class RealEmbedding(nn.Module):
    """m real variables, each through its own Linear(1, d) (Sec. 4.2); weights stacked as (m, d)."""

    def __init__(self, m: int, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(m, d))
        self.bias = nn.Parameter(torch.empty(m, d))
        nn.init.uniform_(self.weight, -1.0, 1.0)  # nn.Linear's default for fan_in = 1
        nn.init.uniform_(self.bias, -1.0, 1.0)

    def forward(self, x):  # (..., m) -> (..., m, d)
        return torch.addcmul(self.bias, x.unsqueeze(-1), self.weight)


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    """The dtype a linear layer on t's device outputs under the current autocast state."""
    if torch.is_autocast_enabled(t.device.type) and t.dtype != torch.float64:  # autocast leaves float64 alone
        return torch.get_autocast_dtype(t.device.type)
    return t.dtype


def _folded_linear(x, weight, bias, emb_weight, emb_bias):
    """F.linear(flatten(ξ), weight, bias) with ξ_j = x_j·w_j + b_j, from x (..., m) alone:
    x·Aᵀ + (bias + W·b), A[o, j] = Σ_i W[o, j·d + i] w[j, i]. A and the constant are parameter-sized
    and computed in the parameters' dtype (autocast off): the (..., m·d) input never exists."""
    m, d = emb_weight.shape
    with torch.autocast(x.device.type, enabled=False):
        a = torch.einsum("omi,mi->om", weight.view(-1, m, d), emb_weight)         # (out, m)
        c = F.linear(emb_bias.flatten(), weight, bias)                              # (out,)
    return F.linear(x, a, c)  # under autocast: 16-bit, as the plain path's Linear


class GatedLinearUnit(nn.Module):
    """GLU(γ) = σ(W4 γ + b4) ⊙ (W5 γ + b5) (Eq. 5), dropout on γ; W5, W4 stored as one Linear(in, 2·out)."""

    def __init__(self, d_in: int, d_out: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(d_in, 2 * d_out)

    def forward(self, x):
        return F.glu(self.fc(self.dropout(x)), dim=-1)  # F.glu saves one tensor, sigmoid*mul two


class GatedResidualNetwork(nn.Module):
    """GRN(a, c) = LayerNorm(skip(a) + GLU(η1)), η1 = W1 η2 + b1, η2 = ELU(W2 a + W3 c + b2) (Eqs. 2-4).

    skip is the identity when d_in == d_out, else a Linear (the paper's "linear transformation").
    """

    def __init__(self, d_in: int, d_hidden: int, d_out: int, dropout: float, d_context: int | None = None):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)                                            # W2, b2
        self.context = nn.Linear(d_context, d_hidden, bias=False) if d_context else None  # W3
        self.fc2 = nn.Linear(d_hidden, d_hidden)                                        # W1, b1
        self.glu = GatedLinearUnit(d_hidden, d_out, dropout)
        self.skip = nn.Linear(d_in, d_out) if d_in != d_out else None
        self.norm = nn.LayerNorm(d_out)

    def forward(self, a, c=None):
        h = self.fc1(a)
        if c is not None:
            h = h + self.context(c)
        h = self.fc2(F.elu(h, inplace=True))  # in place: autograd keeps only ELU's output
        return self.norm((a if self.skip is None else self.skip(a)) + self.glu(h))


class VariableGRNs(nn.Module):
    """The m per-variable GRN(d -> d) of a VSN, no context (Eq. 7), weights stacked on a leading
    variable axis like nn.Linear's (out, in). The plain path loops over variables with one slice
    of each weight; the batched path (memory_efficient) runs all m in one bmm per layer.
    Both read the same parameters, so one state dict serves either."""

    def __init__(self, m: int, d: int, dropout: float):
        super().__init__()
        self.fc1_weight, self.fc1_bias = nn.Parameter(torch.empty(m, d, d)), nn.Parameter(torch.empty(m, d))
        self.fc2_weight, self.fc2_bias = nn.Parameter(torch.empty(m, d, d)), nn.Parameter(torch.empty(m, d))
        self.glu_weight, self.glu_bias = nn.Parameter(torch.empty(m, 2 * d, d)), nn.Parameter(torch.empty(m, 2 * d))
        self.norm_weight, self.norm_bias = nn.Parameter(torch.ones(m, d)), nn.Parameter(torch.zeros(m, d))
        self.dropout = nn.Dropout(dropout)
        bound = 1.0 / math.sqrt(d)  # nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        for p in (self.fc1_weight, self.fc1_bias, self.fc2_weight, self.fc2_bias, self.glu_weight, self.glu_bias):
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x, batched: bool = False):  # (..., m, d) -> (..., m, d)
        return self._batched(x) if batched else self._loop(x)

    def _loop(self, x):
        d, out = x.shape[-1], []
        for j in range(x.shape[-2]):
            a = x[..., j, :]
            h = F.elu(F.linear(a, self.fc1_weight[j], self.fc1_bias[j]), inplace=True)
            h = F.linear(h, self.fc2_weight[j], self.fc2_bias[j])
            h = F.glu(F.linear(self.dropout(h), self.glu_weight[j], self.glu_bias[j]), dim=-1)
            out.append(F.layer_norm(a + h, (d,), self.norm_weight[j], self.norm_bias[j]))
        return torch.stack(out, dim=-2)

    def _batched(self, x):
        m, d = x.shape[-2:]
        xv = x.movedim(-2, 0).reshape(m, -1, d)  # (m, N, d): a strided view of x, no copy
        h = torch.baddbmm(self.fc1_bias.unsqueeze(1), xv, self.fc1_weight.transpose(1, 2))
        h = torch.baddbmm(self.fc2_bias.unsqueeze(1), F.elu(h, inplace=True), self.fc2_weight.transpose(1, 2))
        h = torch.baddbmm(self.glu_bias.unsqueeze(1), self.dropout(h), self.glu_weight.transpose(1, 2))
        r = (xv + F.glu(h, dim=-1)).transpose(0, 1).reshape(-1, m * d)  # token-major (N, m·d)
        # m LayerNorms with per-variable affine at once: GroupNorm with one group per variable
        return F.group_norm(r, m, self.norm_weight.flatten(), self.norm_bias.flatten()).view(x.shape)

    def chunks(self, size: int):
        """The stacked parameters split into chunks of `size` variables: one tuple per chunk, in
        folded()'s order. Split once per forward, outside any checkpoint segment: autograd joins the
        pieces' gradients once at the end (SplitBackward), where a slice per chunk would allocate an
        (m, ...)-sized zero gradient in every chunk's backward."""
        names = ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "glu_weight", "glu_bias", "norm_weight", "norm_bias")
        return list(zip(*(getattr(self, n).split(size) for n in names)))

    def folded(self, x, v, emb_weight, emb_bias, w1, b1, w2, b2, wg, bg, nw, nb, batched: bool = False):
        """Σ_j v_j GRN_j(ξ_j) over one chunk of c variables, ξ_j = x_j·w_j + b_j folded in (module
        docstring). x, v: (N, c) raw inputs and selection weights; emb_*: (c, d); w1 .. nb: the chunk's
        piece of each stacked parameter (chunks()). -> (N, d). Intermediates are (N, c, d) at most."""
        c, d = emb_weight.shape
        with torch.autocast(x.device.type, enabled=False):  # parameter-sized: in the parameters' dtype
            u = torch.bmm(w1, emb_weight.unsqueeze(-1)).squeeze(-1)                              # W1_j w_j
            k = torch.baddbmm(b1.unsqueeze(-1), w1, emb_bias.unsqueeze(-1)).squeeze(-1)          # W1_j b_j + b1_j
        dt = _compute_dtype(u)
        u, k = u.to(dt), k.to(dt)
        if batched:
            xt = x.t().contiguous().to(dt).unsqueeze(-1)                                        # (c, N, 1)
            h = torch.addcmul(k.unsqueeze(1), xt, u.unsqueeze(1))                               # (c, N, d) = fc1(ξ_j)
            h = torch.baddbmm(b2.unsqueeze(1), F.elu(h, inplace=True), w2.transpose(1, 2))
            h = torch.baddbmm(bg.unsqueeze(1), self.dropout(h), wg.transpose(1, 2))
            # the residual ξ_j + GLU built token-major (N, c, d), in place: GroupNorm reads it with no copy
            r = torch.addcmul(emb_bias, x.unsqueeze(-1), emb_weight).add_(F.glu(h, dim=-1).transpose(0, 1))
            y = F.group_norm(r.view(-1, c * d), c, nw.flatten(), nb.flatten())
            return (v.unsqueeze(-2) @ y.view(-1, c, d)).squeeze(-2)
        out = None
        for j in range(c):  # the plain loop's ops, dropout drawn in the same order
            xj = x[:, j:j + 1]
            h = torch.addcmul(k[j], xj.to(dt), u[j])                                             # (N, d) = fc1(ξ_j)
            h = F.linear(F.elu(h, inplace=True), w2[j], b2[j])
            h = F.glu(F.linear(self.dropout(h), wg[j], bg[j]), dim=-1)
            y = F.layer_norm(torch.addcmul(emb_bias[j], xj, emb_weight[j]).add_(h), (d,), nw[j], nb[j]).to(dt)
            out = v[:, j:j + 1] * y if out is None else out.addcmul_(v[:, j:j + 1], y)  # in v's dtype (float32)
        return out.to(dt)  # the dtype of the plain path's weighted sum (a matmul: 16-bit under autocast)


class VariableSelectionNetwork(nn.Module):
    """VSN over m variables (Sec. 4.2): v = Softmax(GRN_v(Ξ, c_s)) from the flattened inputs (Eq. 6),
    each variable through its own GRN (Eq. 7), output Σ_j v_j ξ̃_j (Eq. 8). Returns (output, v)."""

    def __init__(self, m: int, d: int, dropout: float, context: bool, batched: bool):
        super().__init__()
        self.flat_grn = GatedResidualNetwork(m * d, d, m, dropout, d_context=d if context else None)
        self.variable_grns = VariableGRNs(m, d, dropout)
        self.batched = batched

    def forward(self, x, context=None):  # x: (..., m, d); context: broadcastable to (..., d)
        weights = torch.softmax(self.flat_grn(x.flatten(-2), context), dim=-1)   # (..., m)
        transformed = self.variable_grns(x, batched=self.batched)                # (..., m, d)
        return (weights.unsqueeze(-2) @ transformed).squeeze(-2), weights

    def forward_folded(self, x, emb_weight, emb_bias, context=None, chunk: int | None = None,
                       checkpointed: bool = False):
        """forward(x·w + b) for m real inputs x (..., m) with embedding weights w, b (m, d), the embedding
        folded into the first layers (module docstring). The selection weights v, then Σ_j v_j ξ̃_j
        accumulated over chunks of `chunk` variables (all m if None). checkpointed: v's GRN is one
        checkpoint segment and each chunk another, each from the raw inputs: the forward keeps x, v
        and the segments' parameter pieces (views), O(N·m); a backward rebuilds one chunk at a time.
        Dropout is drawn in the order of the un-checkpointed computation with the same chunks
        (checkpoint restores the RNG state), and, on the loop path, in the plain forward's order."""
        def run(fn, *args):
            return checkpoint(fn, *args, use_reentrant=False) if checkpointed else fn(*args)

        m = x.shape[-1]
        weights = run(self._folded_weights, x, emb_weight, emb_bias, context)   # (..., m)
        chunk = chunk or m
        pieces = zip(x.reshape(-1, m).split(chunk, dim=1), weights.reshape(-1, m).split(chunk, dim=1),
                     emb_weight.split(chunk), emb_bias.split(chunk), self.variable_grns.chunks(chunk))
        out = None
        for xc, vc, wc, bc, params in pieces:
            part = run(self.variable_grns.folded, xc, vc, wc, bc, *params, self.batched)   # (N, d)
            out = part if out is None else out + part
        return out.view(*x.shape[:-1], out.shape[-1]), weights

    def _folded_weights(self, x, emb_weight, emb_bias, context=None):
        """v = Softmax(GRN_v(Ξ, c_s)) (Eq. 6) from the raw x (..., m): GatedResidualNetwork.forward's
        ops with its two Linear maps of the m·d-wide Ξ folded (_folded_linear)."""
        g = self.flat_grn
        h = _folded_linear(x, g.fc1.weight, g.fc1.bias, emb_weight, emb_bias)
        if context is not None:
            h = h + g.context(context)
        h = g.fc2(F.elu(h, inplace=True))
        skip = (torch.addcmul(emb_bias, x.unsqueeze(-1), emb_weight).flatten(-2) if g.skip is None  # d = 1
                else _folded_linear(x, g.skip.weight, g.skip.bias, emb_weight, emb_bias))
        return torch.softmax(g.norm(skip + g.glu(h)), dim=-1)


class StaticCovariateEncoder(nn.Module):
    """Four GRNs turn the static embedding ξ into the contexts c_s (variable selection), c_e
    (enrichment), c_h and c_c (LSTM initial state) (Sec. 4.3)."""

    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.grns = nn.ModuleList(GatedResidualNetwork(d, d, d, dropout) for _ in range(4))

    def forward(self, xi):
        return tuple(grn(xi) for grn in self.grns)


class InterpretableMultiHeadAttention(nn.Module):
    """Interpretable multi-head attention (Sec. 4.4, Eqs. 13-16): per-head Q and K projections
    d -> d/H, ONE value projection shared by all heads, heads averaged (Ã = mean_h A_h), then
    W_H: d/H -> d. Causal mask. Returns (output (B, T, d), weights Ã (B, T, T) or None)."""

    def __init__(self, d: int, num_heads: int, dropout: float, fused: bool):
        super().__init__()
        self.num_heads, self.head_dim, self.dropout, self.fused = num_heads, d // num_heads, dropout, fused
        self.query = nn.Linear(d, d)               # the H per-head W_Q^(h) (d -> d/H), side by side
        self.key = nn.Linear(d, d)                 # the H per-head W_K^(h)
        self.value = nn.Linear(d, self.head_dim)   # W_V, shared by every head (Eq. 14)
        self.out = nn.Linear(self.head_dim, d)     # W_H

    def _weights(self, q, k):  # (B, H, T, T) causal softmax weights
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        T = scores.shape[-1]
        future = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
        # finfo.min, never -1e9: -1e9 does not fit in fp16 (the mask overflow pytorch-forecasting users hit)
        return scores.masked_fill(future, torch.finfo(scores.dtype).min).softmax(dim=-1)

    def forward(self, x, need_weights: bool = False):
        B, T, _ = x.shape
        H, dk = self.num_heads, self.head_dim
        q = self.query(x).view(B, T, H, dk).transpose(1, 2)  # (B, H, T, d/H)
        k = self.key(x).view(B, T, H, dk).transpose(1, 2)
        v = self.value(x)                                       # (B, T, d/H)
        p = self.dropout if self.training else 0.0
        # PyTorch's CPU flash kernel has no dropout: SDPA would fall back to its math path, which
        # saves more than the explicit path below. So on CPU, fused only when dropout is off.
        if self.fused and (p == 0.0 or x.device.type != "cpu"):
            heads = F.scaled_dot_product_attention(q, k, v.unsqueeze(1).expand(B, H, T, dk),
                                                   dropout_p=p, is_causal=True)
            with torch.no_grad():  # SDPA returns no weights: compute them on the side, for reading only
                weights = self._weights(q, k).mean(1) if need_weights else None
            return self.out(heads.mean(1)), weights
        a = self._weights(q, k)
        weights = a.mean(1) if need_weights else None
        # mean_h(A_h V) = Ã V because V is shared: one (B, T, T) @ (B, T, d/H) product (Eq. 15)
        return self.out(F.dropout(a, p, self.training).mean(1) @ v), weights


class GateAddNorm(nn.Module):
    """Gated skip connection LayerNorm(skip + GLU(x)) (Eqs. 17, 20, 22; "Gate + Add & Norm", Fig. 2)."""

    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.glu = GatedLinearUnit(d, d, dropout)
        self.norm = nn.LayerNorm(d)

    def forward(self, x, skip):
        return self.norm(skip + self.glu(x))


class TemporalFusionTransformer(nn.Module):
    """TFT with one attention layer. forward(batch) -> quantile predictions (B, T_d, n_q);
    forward(batch, return_attention=True) -> (predictions, Ã) with Ã (B, T, T) the causal attention
    weights averaged over heads (the paper's interpretable weights, Eq. 15), T = T_e + T_d.

    Checkpointing (training mode with grad enabled only): "vsn" checkpoints the three variable
    selections (each VSN with its input embeddings); "blocks" every major block (those three, the
    static encoders, the LSTM block, the attention block, the GRN stack after attention); "all"
    the whole forward, embeddings included, as one segment (only the raw batch is kept).
    "variables" is "blocks" with the encoder and decoder VSNs finer: on the folded path
    (VariableSelectionNetwork.forward_folded), the selection GRN is one segment and every chunk
    of `vsn_chunk` variables (embedding, per-variable GRNs, its share of Σ_j v_j ξ̃_j) another,
    each from the raw inputs. A whole-VSN segment is recomputed at once in the backward, when
    the gradients already exist: the step peak hardly moves. Chunk segments are rebuilt one at
    a time, so the backward holds one chunk's intermediates, (B, T, vsn_chunk, d)-sized.
    With memory_efficient=False the chunk loops over its variables (the plain path's ops and
    dropout order); with True it is one batched op per layer. "vsn_variables" checkpoints those
    chunk segments only: the other blocks keep their activations (a few % of the TFT's), so the
    backward recomputes the VSNs alone.
    """

    def __init__(self, config: TFTConfig):
        super().__init__()
        self.config = cfg = config
        d, p, fast = cfg.hidden_size, cfg.dropout, cfg.memory_efficient
        self.static_embedding = nn.Embedding(len(SERIES), d)   # series id, the one static input
        self.known_embedding = RealEmbedding(N_KNOWN, d)
        self.observed_embedding = RealEmbedding(cfg.n_observed, d)
        self.static_vsn = VariableSelectionNetwork(1, d, p, context=False, batched=fast)
        self.static_encoders = StaticCovariateEncoder(d, p)
        self.encoder_vsn = VariableSelectionNetwork(N_KNOWN + cfg.n_observed, d, p, context=True, batched=fast)
        self.decoder_vsn = VariableSelectionNetwork(N_KNOWN, d, p, context=True, batched=fast)
        self.lstm_encoder = nn.LSTM(d, d, batch_first=True)
        self.lstm_decoder = nn.LSTM(d, d, batch_first=True)
        self.post_lstm_gate = GateAddNorm(d, p)
        self.static_enrichment = GatedResidualNetwork(d, d, d, p, d_context=d)
        self.attention = InterpretableMultiHeadAttention(d, cfg.num_heads, p, fused=fast)
        self.post_attention_gate = GateAddNorm(d, p)
        self.positionwise_grn = GatedResidualNetwork(d, d, d, p)
        self.pre_output_gate = GateAddNorm(d, p)
        self.output = nn.Linear(d, len(cfg.quantiles))

    def _run(self, kind: str, fn, *args):
        """fn(*args), checkpointed when the config's granularity covers this kind of segment."""
        mode = self.config.checkpointing
        covered = mode == kind or (mode in ("blocks", "variables") and kind in ("vsn", "block"))
        if covered and self.training and torch.is_grad_enabled():
            return checkpoint(fn, *args, use_reentrant=False)  # preserves the RNG state: same dropout
        return fn(*args)

    def forward(self, batch, return_attention: bool = False):
        args = (batch["static"], batch["known"], batch["observed"], return_attention)
        pred, weights = self._run("all", self._body, *args)
        return (pred, weights) if return_attention else pred

    def _body(self, static, known, observed, need_weights):
        # tensors go to _run one by one: checkpoint's saved inputs stay visible to saved-tensor
        # hooks (tensors inside a tuple argument are held where no hook sees them)
        Te = self.config.encoder_length
        xi = self._run("vsn", self._select_static, static)                          # ξ (B, d)
        c_s, c_e, c_h, c_c = self._run("block", self.static_encoders, xi)
        if self.config.memory_efficient or self.config.checkpointing in CHUNKED:  # folded embeddings
            # CHUNKED modes checkpoint inside the VSN (per chunk); the other modes around it, as for the plain path
            select = self._direct if self.config.checkpointing in CHUNKED else lambda *a: self._run("vsn", *a)
            past = select(self._select_past_folded, known[:, :Te], observed, c_s.unsqueeze(1))
            future = select(self._select_future_folded, known[:, Te:], c_s.unsqueeze(1))
        else:
            past = self._run("vsn", self._select_past, known[:, :Te], observed, c_s.unsqueeze(1))
            future = self._run("vsn", self._select_future, known[:, Te:], c_s.unsqueeze(1))
        phi = self._run("block", self._lstm_block, past, future, c_h, c_c)        # φ (B, T, d)
        delta, weights = self._run("block", self._attention_block, phi, c_e.unsqueeze(1), need_weights)
        return self._run("block", self._output_block, delta, phi[:, Te:]), weights

    # Each selection segment starts from the raw inputs, so a checkpointed VSN recomputes its
    # embeddings too and keeps only the (B, T, m) inputs, not their (B, T, m, d) embeddings.
    def _select_static(self, static):
        return self.static_vsn(self.static_embedding(static))[0]        # m = 1 static variable

    def _select_past(self, known, observed, c_s):
        x = torch.cat([self.known_embedding(known), self.observed_embedding(observed)], dim=-2)
        return self.encoder_vsn(x, c_s)[0]                               # (B, T_e, d)

    def _select_future(self, known, c_s):
        return self.decoder_vsn(self.known_embedding(known), c_s)[0]     # (B, T_d, d)

    @staticmethod
    def _direct(fn, *args):
        return fn(*args)

    def _select_folded(self, vsn, x, emb_weight, emb_bias, c_s):
        inner = self.config.checkpointing in CHUNKED and self.training and torch.is_grad_enabled()
        return vsn.forward_folded(x, emb_weight, emb_bias, c_s, self.config.vsn_chunk, checkpointed=inner)[0]

    def _select_past_folded(self, known, observed, c_s):
        emb = (self.known_embedding, self.observed_embedding)
        return self._select_folded(self.encoder_vsn, torch.cat([known, observed], dim=-1),
                                   torch.cat([e.weight for e in emb]), torch.cat([e.bias for e in emb]), c_s)

    def _select_future_folded(self, known, c_s):
        e = self.known_embedding
        return self._select_folded(self.decoder_vsn, known, e.weight, e.bias, c_s)

    def _lstm_block(self, past, future, c_h, c_c):
        """Seq2seq LSTM from the static state (Sec. 4.5.1); φ = LayerNorm(GLU(lstm_out) + vsn_out) (Eq. 17)."""
        state = (c_h.unsqueeze(0).to(past.dtype), c_c.unsqueeze(0).to(past.dtype))
        enc, state = self.lstm_encoder(past, state)
        dec, _ = self.lstm_decoder(future, state)
        return self.post_lstm_gate(torch.cat([enc, dec], dim=1), torch.cat([past, future], dim=1))

    def _attention_block(self, phi, c_e, need_weights):
        """θ = GRN(φ, c_e) (Eq. 18); causal attention over all T; δ = LayerNorm(θ + GLU(attn)) (Eq. 20).
        Position-wise from here on, so only the T_d decoder positions are carried further (the
        paper's code computes every position and drops the encoder ones at the output: same result)."""
        theta = self.static_enrichment(phi, c_e)
        attn, weights = self.attention(theta, need_weights)
        Te = self.config.encoder_length
        return self.post_attention_gate(attn[:, Te:], theta[:, Te:]), weights

    def _output_block(self, delta, phi_decoder):
        """ψ = GRN(δ) (Eq. 21); LayerNorm(φ + GLU(ψ)) (Eq. 22); Linear to the quantiles (Eq. 23)."""
        return self.output(self.pre_output_gate(self.positionwise_grn(delta), phi_decoder))


def quantile_loss(pred, target, quantiles) -> torch.Tensor:
    """Mean over batch and horizon of Σ_q max(q·e, (q−1)·e), e = target − pred (Eqs. 24-25), in float32.
    quantiles: a sequence, or a float32 tensor already on pred's device (no host-to-device copy: CUDA-graph safe)."""
    with torch.autocast(pred.device.type, enabled=False):
        q = quantiles if isinstance(quantiles, torch.Tensor) else torch.as_tensor(quantiles, dtype=torch.float32,
                                                                                  device=pred.device)
        e = target.float().unsqueeze(-1) - pred.float()  # (B, T_d, n_q)
        return torch.maximum(q * e, (q - 1) * e).sum(-1).mean()


def parameter_count_theory(cfg: TFTConfig) -> int:
    """Parameters by formula (models.md's, exact for the blocks built here)."""
    d, H, nq = cfg.hidden_size, cfg.num_heads, len(cfg.quantiles)
    g = 4 * d * d + 6 * d  # one GRN(d -> d) without context; with context + d²

    def vsn(m: int, context: bool = True) -> int:
        # m·g per-variable GRNs; flattened GRN(m·d -> d -> m) with skip Linear(m·d, m) and context
        total = m * g + m * d * d + m * m * d + 2 * d * d + 2 * m * d + 2 * d + 5 * m
        return total if context else total - d * d  # W3 of the flattened GRN

    # core: static encoders 4g, two LSTMs 2(8d²+8d), three gates 3(2d²+4d), enrichment g+d²,
    # positionwise g, attention 2d²+2d²/H+3d+d/H, output d·nq+nq. models.md writes 64d, not
    # 67d + d/H: it leaves out the biases of Q (d), K (d), V (d/H) and W_H (d).
    core = 49 * d * d + 2 * d * d // H + 67 * d + d // H + d * nq + nq
    vsns = vsn(1, context=False) + vsn(N_KNOWN + cfg.n_observed) + vsn(N_KNOWN)
    embeddings = 2 * d * (N_KNOWN + cfg.n_observed) + len(SERIES) * d  # Linear(1, d) each; Embedding(2, d)
    return core + vsns + embeddings


PRESETS = {
    # 72 MB of F32 parameters = 18.0 M. d = 256 (as in models.md's memory measurements), H = 4:
    # parameter_count_theory gives 17.80 M with 31 observed variables, 18.15 M with 32 and 20.6 M
    # with 39 (m = 44 encoder variables); 32 -> 18,146,330 parameters = 72.59 MB (+0.8 %).
    "seed": TFTConfig(hidden_size=256, num_heads=4, n_observed=32, encoder_length=60, decoder_length=5,
                      batch_size=32, dropout=0.1, lr=1e-3),
    # fast on 2 CPU cores, for tests
    "small": TFTConfig(hidden_size=16, num_heads=2, n_observed=8, encoder_length=20, decoder_length=3,
                       batch_size=8, dropout=0.1, lr=1e-3),
}


def build(cfg: TFTConfig) -> TemporalFusionTransformer:
    if not isinstance(cfg, TFTConfig):
        raise TypeError(f"expected a TFTConfig, got {type(cfg).__name__}")
    return TemporalFusionTransformer(cfg)


@lru_cache(maxsize=8)
def _windows(n_observed: int, encoder_length: int, decoder_length: int, split: str) -> MarketWindows:
    return MarketWindows(n_observed, encoder_length, decoder_length, split)


def example_batch(cfg: TFTConfig, device="cpu", seed: int = 0) -> dict[str, torch.Tensor]:
    """A reproducible batch of training windows from the real market data."""
    windows = _windows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    return windows.sample(cfg.batch_size, seed, device)


def loss(model: TemporalFusionTransformer, batch) -> torch.Tensor:
    return quantile_loss(model(batch), batch["target"], model.config.quantiles)


def device_loss(cfg: TFTConfig, device) -> Callable[[TemporalFusionTransformer, Any], torch.Tensor]:
    """`loss` with the quantile levels put on `device` once: the step copies nothing from the host,
    as a step captured in a CUDA graph must (foxlib.memory.cuda_graph)."""
    levels = torch.tensor(cfg.quantiles, dtype=torch.float32, device=device)
    return lambda model, batch: quantile_loss(model(batch), batch["target"], levels)


CARD = ModelCard(name="tft", title="Temporal Fusion Transformer", presets=PRESETS,
                 build=build, example_batch=example_batch, loss=loss)
