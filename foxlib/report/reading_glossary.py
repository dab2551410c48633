"""The glossary every report closes with (foxlib/report/reading.py's closing): GLOSSARY, the terms
the reports use, each defined once, and glossary(), all of them or a few as a Block
(tests/test_reading.py)."""
from __future__ import annotations

import html
import re
from typing import Iterable

from foxlib.report.reading_block import Block, code_html


def _definition(quantity: str) -> str:
    """A figure's definition as foxlib.core.figures gives it, without its unit suffix."""
    from foxlib.core.figures import DEFINITIONS
    return re.sub(r"\s*\(bytes\)$", "", DEFINITIONS[quantity])


GLOSSARY: dict[str, str] = {
    "VSN (variable selection network)":
        "the TFT block that weighs its input variables at every time step: each variable goes through "
        "its own GRN, a softmax over a GRN of all of them gives the weights, and the output is the "
        "weighted sum (foxlib/models/tft.py, VariableSelectionNetwork).",
    "GRN (gated residual network)":
        "the TFT's basic block: a dense layer, ELU, a second dense layer, a gated linear unit, then a "
        "residual connection and layer normalisation (foxlib/models/tft.py, GatedResidualNetwork).",
    "memory-efficient path":
        "the TFT's `memory_efficient=True` switch: the per-variable GRNs of a VSN run as batched "
        "operations over chunks of variables, the real-valued embeddings are folded into the first "
        "layers (the (batch, time, variables, width) embedding is never built) and attention uses the "
        "fused scaled_dot_product_attention. Same function and parameters as the plain path, up to "
        "floating-point rounding.",
    "floor of 16 B/parameter":
        "what fp32 training with Adam needs per parameter before any activation: 4 bytes of weight, 4 of "
        "gradient and 8 of Adam's two moments (foxlib/memory/theory.py).",
    "CUDA graph":
        "a training step captured once as a graph of GPU kernels and replayed with one launch, "
        "removing the per-kernel launch cost from Python; its tensors live in the graph's private "
        "memory pool, kept between replays (foxlib/memory/cuda_graph.py).",
    "saved for backward (activations)":
        "tensors autograd keeps from the forward pass to compute the gradients in the backward pass; "
        "the reports' activations figure counts them, each storage once, parameters excluded, the "
        "input batch included. Gradient checkpointing saves fewer and recomputes the rest.",
    "allocated vs reserved":
        "allocated: bytes in live tensors (torch.cuda.memory_allocated); reserved: what PyTorch's "
        "caching allocator holds from the driver, allocated plus cached free blocks "
        "(torch.cuda.memory_reserved). nvidia-smi shows reserved plus the CUDA context.",
    "model peak vs process peak":
        f"model peak: {_definition('model_peak')}; process peak: {_definition('process_peak')}. "
        "The card must hold the process peak.",
    "CUDA context":
        "memory the driver and libraries take for a process before any tensor: kernels, cuBLAS/cuDNN "
        "handles; outside PyTorch's allocator, measured as NVML's per-process figure minus reserved.",
    "IQR (interquartile range)":
        "the 75th minus the 25th percentile of repeated timings; the reports give a timing's noise as "
        "IQR / median.",
    "confidence interval, tie":
        "a ratio of step times comes with a bootstrap interval over alternating rounds (foxlib/harness/timing.py: "
        "95 %); two configurations whose intervals overlap are a tie, settled by memory, and a "
        "limit such as the 2x slowdown passes only when the interval's upper end is under it.",
    "skill margin over the naive forecast":
        "how much lower the TFT's validation loss is than that of a naive forecast with no skill; "
        "near zero or negative, the model has learnt nothing and an accuracy comparison between "
        "precisions or strategies has no power.",
    "MB, MiB, a \"4 GB\" card":
        "MB = 10^6 bytes (every report); MiB = 2^20 bytes; a card sold as 4 GB holds 4 GiB = "
        "4,294,967,296 bytes = 4,295.0 MB (budgets.toml).",
}


def glossary(terms: Iterable[str] | None = None) -> Block:
    """The glossary (all terms, or those whose name starts with one of `terms`), as a Block."""
    items = list(GLOSSARY.items())
    if terms is not None:
        wanted = list(terms)
        chosen = [(k, v) for k, v in items if any(k.lower().startswith(t.lower()) for t in wanted)]
        unknown = [t for t in wanted if not any(k.lower().startswith(t.lower()) for k in GLOSSARY)]
        if unknown:
            raise ValueError(f"unknown glossary term(s) {unknown}; known: {', '.join(GLOSSARY)}")
        items = chosen
    rows = "".join(f"<dt><b>{html.escape(k)}</b></dt><dd>{code_html(html.escape(v))}</dd>" for k, v in items)
    md = "\n".join(f"- **{k}**: {v}" for k, v in items)
    return Block(f'<details class="foxlib-glossary"><summary><b>Glossary</b></summary><dl>{rows}</dl></details>',
                 "**Glossary**\n\n" + md)
