"""Temporal Fusion Transformer (Lim, Arik, Loeff & Pfister, "Temporal Fusion Transformers for
interpretable multi-horizon time series forecasting", Int. J. Forecasting 37(4), 2021), paper-faithful,
one attention layer, and its model card (CARD: presets, build, example_batch, the quantile loss);
"Eq. n" and "Sec. n" refer to the paper. The blocks are in foxlib/models/tft_blocks.py, the config
in foxlib/models/tft_config.py; its switches (checkpointing, memory_efficient, vsn_chunk, vsn_batched)
leave the parameters, and so the state dict, unchanged. The plain path (memory_efficient=False,
checkpointing not CHUNKED) is the reference: embeddings materialised, a loop over the per-variable
GRNs, explicit attention."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from foxlib.data.market import N_KNOWN, SERIES, MarketWindows
from foxlib.models.card import ModelCard
from foxlib.models.tft_blocks import (GateAddNorm, GatedResidualNetwork, InterpretableMultiHeadAttention,
                                      RealEmbedding, StaticCovariateEncoder, VariableSelectionNetwork)
from foxlib.models.tft_config import CHUNKED, TFTConfig


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
        encoders = self.static_encoders.forward_batched if self.config.vsn_batched else self.static_encoders
        c_s, c_e, c_h, c_c = self._run("block", encoders, xi)
        if self.config.memory_efficient or self.config.checkpointing in CHUNKED:  # folded embeddings
            # CHUNKED modes checkpoint inside the VSN (per chunk); the other modes around it, as for the plain path
            select = ((lambda fn, *a: fn(*a)) if self.config.checkpointing in CHUNKED
                      else lambda *a: self._run("vsn", *a))
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

    def _select_folded(self, vsn, x, emb_weight, emb_bias, c_s):
        chunked, chunk = self.config.checkpointing in CHUNKED, self.config.vsn_chunk
        if self.config.vsn_batched and not chunked and (chunk == 0 or chunk >= x.shape[-1]):  # all at once
            return vsn.forward_batched(x, emb_weight, emb_bias, c_s)[0]
        inner = chunked and self.training and torch.is_grad_enabled()
        return vsn.forward_folded(x, emb_weight, emb_bias, c_s, chunk or None, checkpointed=inner,
                                  fused=self.config.vsn_batched)[0]

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


PRESETS = {
    # 72 MB of F32 parameters = 18.0 M. d = 256, H = 4:
    # parameter_count_theory (tests/test_tft.py) gives 17.80 M with 31 observed variables, 18.15 M with 32 and 20.6 M
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


_windows = lru_cache(maxsize=8)(MarketWindows)


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
