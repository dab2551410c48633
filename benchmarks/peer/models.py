"""The peer benchmark's models: pytorch-forecasting's TFT built at foxlib's configuration (or at its
own defaults), the losses both sides back-propagate, parameter counts, and the notes on what differs
between the two architectures.

Used by benchmarks/peer_tft.py; building the peer needs pytorch-forecasting.
"""
from __future__ import annotations

import collections
import warnings
from typing import Any


def build_peer(ds, cfg, hidden_continuous_size: int | None = None):
    """pytorch-forecasting's TFT. hidden_continuous_size None: at foxlib's configuration (the notes of
    same_configuration); a number: at the peer's own defaults for what that row sets to foxlib's (its
    real-variable prescalers and per-variable GRNs that wide, the series embedding at the size its
    rule picks from the category count), the rest (d, heads, dropout, quantiles, data) still shared."""
    from pytorch_forecasting import TemporalFusionTransformer
    from pytorch_forecasting.metrics import QuantileLoss
    if hidden_continuous_size is None:
        own = {"hidden_continuous_size": cfg.hidden_size,        # per-variable GRNs at full width d, as foxlib's
               "embedding_sizes": {"series": (2, cfg.hidden_size)}}  # the static embedding at width d, as foxlib's
    else:
        own = {"hidden_continuous_size": hidden_continuous_size}  # embedding_sizes: the peer's default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's save_hyperparameters notes about loss/logging_metrics
        return TemporalFusionTransformer.from_dataset(
            ds, hidden_size=cfg.hidden_size, attention_head_size=cfg.num_heads, **own,
            dropout=cfg.dropout, loss=QuantileLoss(quantiles=list(cfg.quantiles)),
            lstm_layers=1, learning_rate=cfg.lr)


def peer_loss(model, batch):
    """What the peer's training_step back-propagates: its loss metric on its forward's prediction."""
    x, y = batch
    return model.loss(model(x).prediction, y)


def by_block(model) -> dict[str, int]:
    """Parameter count per top-level child (shared modules counted once, under their first name)."""
    counts: dict[str, int] = collections.Counter()
    for name, p in model.named_parameters():  # named_parameters de-duplicates shared parameters
        counts[name.split(".")[0]] += p.numel()
    return dict(counts)


def parameter_summary(model) -> dict[str, Any]:
    from foxlib.memory import accounting
    return {"n_parameters": sum(p.numel() for p in model.parameters()),
            "parameter_bytes": accounting.parameter_bytes(model), "by_block": by_block(model)}


def same_configuration(cfg) -> str:
    return (f"Both models: hidden size d = {cfg.hidden_size} everywhere (the peer's hidden_continuous_size = d, "
            f"so its per-variable GRNs and real-variable prescalers run at d like foxlib's, and its series-id "
            f"embedding has width d), {cfg.num_heads} attention heads, one LSTM layer, dropout {cfg.dropout}, "
            f"quantiles {list(cfg.quantiles)}; the same variables: 1 static categorical (series id), 5 known reals "
            f"(4 calendar features + a relative-time index: the peer's relative_time_idx, foxlib's horizon index), "
            f"{cfg.n_observed} observed reals (unknown in the future); encoder {cfg.encoder_length} days, decoder "
            f"{cfg.decoder_length} days; the same {cfg.batch_size} training windows (inputs and targets checked "
            f"equal); Adam at lr {cfg.lr}. The peer runs fp32, its default.")


def peer_architecture(peer) -> dict[str, Any]:
    """The few facts of the built peer the notes quote (read while it exists)."""
    flat = getattr(peer.encoder_variable_selection, "flattened_grn", None)
    return {"encoder_variables": len(peer.encoder_variables), "decoder_variables": len(peer.decoder_variables),
            "static_variables": len(peer.static_variables),
            "encoder_flattened_grn_hidden": getattr(flat, "hidden_size", None),
            "hidden_continuous_size": peer.hparams.hidden_continuous_size,
            "embedding_sizes": {k: list(v) for k, v in peer.hparams.embedding_sizes.items()},
            "output_size": peer.hparams.output_size, "mask_bias": peer.hparams.mask_bias}


def architecture_notes(arch: dict[str, Any], fox_cfg, peer_params: dict, fox_params: dict) -> list[str]:
    d = fox_cfg.hidden_size
    m_enc = arch["encoder_variables"]
    flat_hidden = arch["encoder_flattened_grn_hidden"]
    n_p, n_f = peer_params["n_parameters"], fox_params["n_parameters"]
    return [
        f"Parameters: foxlib {n_f:,}, peer {n_p:,} (foxlib/peer {n_f / n_p:.3f}). Where they differ:",
        f"Variable-selection weights: the peer's flattened GRN (all m variables -> m weights) has hidden width "
        f"min(d, m) = {flat_hidden} for the encoder's m = {m_enc} variables and a parameter-free residual "
        f"(linear interpolation m·d -> m, then LayerNorm); foxlib's follows the paper: hidden width d = {d} and a "
        f"Linear skip (m·d -> m). This is most of the gap (encoder VSN "
        f"{fox_params['by_block'].get('encoder_vsn', 0):,} vs {peer_params['by_block'].get('encoder_variable_selection', 0):,}).",
        "Static side: the peer does not pass a categorical embedding through a GRN (its static VSN over one "
        "variable is a LayerNorm); foxlib's static VSN has the paper's per-variable GRN and flattened GRN "
        f"({fox_params['by_block'].get('static_vsn', 0):,} vs {peer_params['by_block'].get('static_variable_selection', 0):,} parameters). "
        "The four static context GRNs are the same.",
        "Real inputs: the peer's prescalers (one Linear(1, hidden_continuous_size) per real, shared by encoder and "
        "decoder) equal foxlib's RealEmbedding at hidden_continuous_size = d; with the peer's default of 8 they "
        "would be narrower, and its per-variable GRNs too (GRN(8 -> 8 -> d) with an interpolated residual).",
        "Attention: the peer loops over heads in Python (one Linear per head for Q and K), computes queries only "
        "at the decoder steps (T_d x T scores instead of T x T), masks with -1e9 (overflows fp16), and its W_H has "
        "no bias; foxlib projects all heads at once, computes all T positions (fused SDPA when memory_efficient, "
        "except on the CPU with dropout > 0) and carries only the decoder positions after attention.",
        "LSTMs: the peer packs every sequence (pack_padded_sequence, enforce_sorted=False) to support variable "
        "lengths, even when all lengths are equal; foxlib runs nn.LSTM on the padded batch.",
        "Post-LSTM gate: the same parameters (the peer shares one GLU + AddNorm between encoder and decoder and "
        "calls it twice; foxlib calls it once on the concatenation). The peer's pre-output gate has no dropout.",
        "Loss: the peer's QuantileLoss is 2 x pinball averaged over quantiles (a torchmetrics Metric whose batch "
        "state is also accumulated, without grad); foxlib's sums the pinball losses over quantiles. A constant "
        "scale: no effect on memory or time.",
        "The peer's step is its forward + loss metric + backward + Adam, outside a Lightning Trainer (no "
        "logging metrics, callbacks or dataloader): the network's own cost, as for foxlib.",
        "Initialisation differs (the peer: Kaiming/Xavier, zero biases; foxlib: PyTorch's defaults); it does not "
        "change memory or time.",
    ]


