"""What a training step should need, from the model's shapes alone: the yardstick for measurements.

fp32 + Adam: 16 bytes per parameter (weights 4, gradients 4, two moments 8; autocast keeps all three in fp32),
plus the model's own count of saved activations where it has one (the TFT's, below). The peak bound assumes
everything is live at once, which the real step never quite reaches (gradients appear while activations are freed).

The TFT's saved-for-backward bytes are counted by hand from its shapes (fp32, training mode), each tensor once, at
the block that first saves it (as the profiler attributes it), following the ops of its plain path
(foxlib/models/tft.py, its blocks in foxlib/models/tft_blocks.py):
- GRN(d_in -> h -> o) over n rows saves ELU's output (4nh), the dropout mask (k·nh) and output (4nh), the GLU's
  input (8no), LayerNorm's input, mean and rstd (4no + 8n): n((8+k)h + 12o + 8) bytes, plus its input, counted
  where that input is first saved. k, the bytes of a dropout mask element: 4 on the CPU (a float32 noise
  tensor), 1 on CUDA (a bool mask);
- a gate (GLU + Add & Norm) over n rows: n((16+k)d + 8);
- the m per-variable GRN(d -> d) of a VSN: m·n((20+k)d + 8), the dominant term;
- the LSTM keeps its input (a transposed copy), output and states, plus a backend workspace (oneDNN on the CPU,
  cuDNN on CUDA) of the library's choosing: left out here, the expected gap (tests/test_theory.py: every other
  block equals this count, the LSTM's exceeds it).
"""
from __future__ import annotations

from typing import Any

from foxlib.data.market import N_KNOWN

F32 = 4
ADAM_FP32_BYTES_PER_PARAMETER = 4 * F32  # fp32 weights + gradients + two Adam moments


def _grn(n: int, h: int, o: int, k: int) -> int:
    return n * ((8 + k) * h + 12 * o + 8)


def _gate(n: int, d: int, k: int) -> int:
    return n * ((16 + k) * d + 8)


def _vsn(n: int, m: int, d: int, k: int) -> int:
    return (F32 * n * m * d                     # the stacked embeddings, input of every GRN
            + _grn(n, d, m, k)                  # the flattened GRN that selects
            + F32 * n * m                       # softmax weights
            + m * _grn(n, d, d, k)              # the m per-variable GRNs
            + F32 * n * m * d)                  # their stacked outputs, saved by the weighted sum


def _lstm(t: int, b: int, d: int, new_initial_state: bool) -> int:
    return F32 * (2 * t * b * d                 # input (a transposed copy) and output
                  + (2 if new_initial_state else 0) * b * d + 2 * b * d)  # h0, c0; h_n, c_n


def activation_theory_by_block(cfg, device_type: str = "cpu") -> dict[str, int] | None:
    """Bytes saved for backward per top-level block of the plain fp32 TFT (LSTM workspaces excluded)."""
    if cfg.memory_efficient or cfg.checkpointing != "none":
        return None
    b, d, te, td, q, h = (cfg.batch_size, cfg.hidden_size, cfg.encoder_length, cfg.decoder_length,
                          len(cfg.quantiles), cfg.num_heads)
    t = te + td
    p = 0 if cfg.dropout == 0 else (4 if device_type == "cpu" else 1)  # bytes of a dropout-mask element
    m_enc = N_KNOWN + cfg.n_observed
    dk = d // h
    return {
        "static_embedding": 8 * b,                                   # series ids (int64)
        "known_embedding": F32 * b * t * N_KNOWN,                    # the known inputs
        "observed_embedding": F32 * b * te * cfg.n_observed,         # the observed inputs
        "static_vsn": _vsn(b, 1, d, p),
        "static_encoders": F32 * b * d + 4 * _grn(b, d, d, p),       # ξ + four GRNs
        "encoder_vsn": _vsn(b * te, m_enc, d, p) + F32 * b * d,      # + the context c_s
        "decoder_vsn": _vsn(b * td, N_KNOWN, d, p),
        "lstm_encoder": _lstm(te, b, d, True),
        "lstm_decoder": _lstm(td, b, d, False),
        "post_lstm_gate": _gate(b * t, d, p),
        "static_enrichment": F32 * b * t * d + _grn(b * t, d, d, p) + F32 * b * d,   # φ, GRN, c_e
        "attention": (F32 * b * t * d + 2 * F32 * b * t * d          # θ; per-head q and k
                      + t * t                                        # causal mask (bool)
                      + F32 * b * h * t * t + p * b * h * t * t  # softmax, dropout mask
                      + F32 * b * t * t + 2 * F32 * b * t * dk),     # head mean, V, W_H input
        "post_attention_gate": _gate(b * td, d, p),
        "positionwise_grn": F32 * b * td * d + _grn(b * td, d, d, p),
        "pre_output_gate": _gate(b * td, d, p),
        "output": F32 * b * td * d,
        "loss": 2 * F32 * b * td * q + 2 * F32 * q,  # both inputs of the max; q and q - 1
    }


def training_step(model: str, cfg: Any, n_parameters: int, precision: str = "fp32",
                  device_type: str = "cpu") -> dict[str, int | None]:
    """Theoretical bytes per category for one Adam training step of `model` built from `cfg`."""
    params = F32 * n_parameters
    # the one hand count: the TFT's, of its plain fp32 path
    blocks = activation_theory_by_block(cfg, device_type) if model == "tft" and precision == "fp32" else None
    activations = None if blocks is None else sum(blocks.values())
    return {
        "parameters": params,
        "gradients": params,
        "optimizer_state": 2 * params,
        "activations": activations,
        "peak": None if activations is None else ADAM_FP32_BYTES_PER_PARAMETER * n_parameters + activations,
        "formula": "16 B/param (fp32 weights, gradients, 2 Adam moments) + the model's saved-activation count",
    }
