"""The blocks of the Temporal Fusion Transformer (foxlib/models/tft.py; "Eq. n" and "Sec. n" refer
to Lim et al. 2021): real-valued embeddings, GLU, GRN, the per-variable GRNs and the variable
selection network (VSN), the static covariate encoder, interpretable multi-head attention and
gate + add & norm. Folded embeddings: each real input j is embedded as ξ_j = x_j·w_j + b_j (a
Linear(1, d)), so every linear map of the embeddings is a linear map of the m raw scalars: the
flattened GRN's first layer W[ξ_1..ξ_m] = x·Aᵀ + W·b with A[:, j] = W_j w_j (d × m), its skip
likewise, and each per-variable GRN's first layer W_j ξ_j = x_j·(W_j w_j) + W_j b_j. The encoder and
decoder VSNs of the folded path (memory_efficient, or a CHUNKED checkpointing) never build the
(B, T, m, d) embedding (nor its m·d-wide flattening, nor their gradients): ξ_j appears only inside
the residual of its GRN, one chunk at a time. Same function and parameters as the plain path, up
to floating-point rounding (tests/test_tft.py checks it in float64)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


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

    def fused(self, x, v, emb_weight, emb_bias, w1, b1, w2, b2, wg, bg, nw, nb):
        """folded(..., batched=True) in fewer kernels and bytes: Σ_j v_j GRN_j(ξ_j) over c variables (all m,
        or one chunk: the arguments as folded's), one batched product per layer, ξ_j + GLU in one more (a
        rank-2 product [x_j, 1]·[w_j; b_j] added to the GLU's output): ξ_j never on its own. Every product is
        a bmm, whose backward is products again (addcmul's would be (N, c, d) temporaries). The c LayerNorms
        run in this variable-major layout, their affine weight as one mul and their bias folded into the
        weighted sum (v·b, a small product); folded()'s token-major GroupNorm takes a copy, and its backward
        two float32 (N, c·d) buffers (one element per channel and sample). Under autocast the residual and
        the norm stay in the 16-bit compute dtype (folded() sums and normalises in float32, then rounds for
        the weighted sum): half the bytes, fewer casts. Dropout: one draw over (c, N, d), as folded's. -> (N, d)."""
        d = emb_weight.shape[1]
        with torch.autocast(x.device.type, enabled=False):  # parameter-sized, in the parameters' dtype
            wb = torch.stack([emb_weight, emb_bias], dim=1)                                      # (c, 2, d)
            uk = torch.baddbmm(F.pad(b1.unsqueeze(1), (0, 0, 1, 0)), wb, w1.transpose(1, 2))  # W1 w_j; W1 b_j + b1
        dt = _compute_dtype(uk)
        xt1 = F.pad(x.t().unsqueeze(-1), (0, 1), value=1.0).to(dt)                             # (c, N, 2): [x_j, 1]
        h = F.elu(torch.bmm(xt1, uk.to(dt)), inplace=True)                                      # (c, N, d)
        h = torch.baddbmm(b2.unsqueeze(1), h, w2.transpose(1, 2))
        h = torch.baddbmm(bg.unsqueeze(1), self.dropout(h), wg.transpose(1, 2))
        with torch.autocast(x.device.type, enabled=False):  # in dt: autocast would run the norm in float32
            r = torch.baddbmm(F.glu(h, dim=-1), xt1, wb.to(dt))                                 # ξ_j + GLU
            z = F.layer_norm(r, (d,)) * nw.unsqueeze(1).to(dt)                                  # ξ̃_j - b_j
            v = v.to(dt)  # Σ_j v_j ξ̃_j = Σ_j v_j z_j + v·nb: the affine's bias folded into the weighted sum's
            return torch.baddbmm((v @ nb.to(dt)).unsqueeze(1), v.unsqueeze(1), z.transpose(0, 1)).squeeze(1)

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
                       checkpointed: bool = False, fused: bool = False):
        """forward(x·w + b) for m real inputs x (..., m) with embedding weights w, b (m, d), the embedding
        folded into the first layers (module docstring). The selection weights v, then Σ_j v_j ξ̃_j
        accumulated over chunks of `chunk` variables (all m if None). checkpointed: v's GRN is one
        checkpoint segment and each chunk another, each from the raw inputs: the forward keeps x, v
        and the segments' parameter pieces (views), O(N·m); a backward rebuilds one chunk at a time.
        Dropout is drawn in the order of the un-checkpointed computation with the same chunks
        (checkpoint restores the RNG state), and, on the loop path, in the plain forward's order.
        fused: forward_batched's kernels (the selection GRN's fc1 and skip as one product, VariableGRNs.fused
        per chunk), the same dropout draws as the batched path's."""
        def run(fn, *args):
            return checkpoint(fn, *args, use_reentrant=False) if checkpointed else fn(*args)

        m = x.shape[-1]
        select = self._batched_weights if fused and self.flat_grn.skip is not None else self._folded_weights
        weights = run(select, x, emb_weight, emb_bias, context)                   # (..., m)
        chunk = chunk or m
        pieces = zip(x.reshape(-1, m).split(chunk, dim=1), weights.reshape(-1, m).split(chunk, dim=1),
                     emb_weight.split(chunk), emb_bias.split(chunk), self.variable_grns.chunks(chunk))
        grn, extra = (self.variable_grns.fused, ()) if fused else (self.variable_grns.folded, (self.batched,))
        out = None
        for xc, vc, wc, bc, params in pieces:
            part = run(grn, xc, vc, wc, bc, *params, *extra)  # (N, d)
            out = part if out is None else out + part
        return out.view(*x.shape[:-1], out.shape[-1]), weights

    def forward_batched(self, x, emb_weight, emb_bias, context=None):
        """forward_folded(x, emb_weight, emb_bias, context) (all m variables in one chunk) in fewer kernels:
        the selection GRN's two folded maps of Ξ (fc1 and skip) as ONE product of x with their stacked
        folded weights, then every variable's GRN as one batched product per layer over all m at once
        (no chunks: no split of the stacked parameters, no partial sums), Σ_j v_j ξ̃_j as one batched
        matrix-vector product. Dropout drawn as forward_folded draws it with chunk=m. -> (output, v)."""
        m, d = emb_weight.shape
        fused = self.flat_grn.skip is not None  # d = 1 has no skip map to stack with fc1
        weights = (self._batched_weights if fused else self._folded_weights)(x, emb_weight, emb_bias, context)
        g = self.variable_grns
        out = g.fused(x.reshape(-1, m), weights.reshape(-1, m), emb_weight, emb_bias, g.fc1_weight, g.fc1_bias,
                      g.fc2_weight, g.fc2_bias, g.glu_weight, g.glu_bias, g.norm_weight, g.norm_bias)
        return out.view(*x.shape[:-1], d), weights

    def _batched_weights(self, x, emb_weight, emb_bias, context=None):
        """_folded_weights with its two folded maps of Ξ (fc1 and skip) as one product of x with their
        stacked folded weights (d + m, m). Each map is folded on its own (a cat of the two (·, m·d) weights
        would be an m·d-wide copy that its product keeps for backward), the small results stacked."""
        g, m, d = self.flat_grn, x.shape[-1], emb_weight.shape[1]
        with torch.autocast(x.device.type, enabled=False):  # parameter-sized, in the parameters' dtype
            w = emb_weight.unsqueeze(-1)                                                           # (m, d, 1)
            a = torch.cat([torch.bmm(g.fc1.weight.view(d, m, d).transpose(0, 1), w),
                           torch.bmm(g.skip.weight.view(m, m, d).transpose(0, 1), w)], dim=1)      # (m, d + m, 1)
            c = torch.cat([torch.addmv(g.fc1.bias, g.fc1.weight, emb_bias.flatten()),
                           torch.addmv(g.skip.bias, g.skip.weight, emb_bias.flatten())])          # (d + m,)
        h, skip = F.linear(x, a.squeeze(-1).t(), c).split([d, m], dim=-1)
        h = F.elu(h if context is None else h + g.context(context))
        return torch.softmax(g.norm(skip + g.glu(g.fc2(h))), dim=-1)

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

    def forward_batched(self, xi):
        """forward(xi) in a few kernels: the four GRNs read the same ξ, so their weights are stacked (one
        stack per parameter: the backward only views its pieces) and each layer is one batched product over
        the four. Same function and parameters; dropout is one draw over (4, B, d) where forward draws four
        of (B, d) (the same function at dropout 0)."""
        g = self.grns

        def stacked(name: str):
            return torch.stack([m.get_parameter(name) for m in g])

        x = xi.unsqueeze(0).expand(len(g), *xi.shape)                                           # (4, B, d)
        h = torch.baddbmm(stacked("fc1.bias").unsqueeze(1), x, stacked("fc1.weight").transpose(1, 2))
        h = torch.baddbmm(stacked("fc2.bias").unsqueeze(1), F.elu(h, inplace=True), stacked("fc2.weight").transpose(1, 2))
        h = torch.baddbmm(stacked("glu.fc.bias").unsqueeze(1), g[0].glu.dropout(h), stacked("glu.fc.weight").transpose(1, 2))
        y = F.layer_norm(x + F.glu(h, dim=-1), xi.shape[-1:])  # each GRN's LayerNorm; the affine below
        return tuple(torch.addcmul(stacked("norm.bias").unsqueeze(1), y, stacked("norm.weight").unsqueeze(1)).unbind(0))


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
