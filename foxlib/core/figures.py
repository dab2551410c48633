"""Named figures: one definition, one value, wherever a figure is shown.

A wave lists the figures its report shows in results.json under "figures": a key naming the
quantity and the configuration it was measured in (e.g. ``tft/seed/b32/t60/fp32/model_peak``),
its raw value and unit. Two pages of one device that show the same key must show the same value:
`foxlib.report.consistency` checks the committed reports for that. A page formats a figure with
`display` only, so the number a reader sees is the recorded one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from foxlib.core.config import MB

DEFINITIONS = {
    "parameters": "weights and module buffers, each storage once (bytes)",
    "gradients": ".grad of every parameter after backward (bytes)",
    "optimizer_state": "tensors in the optimizer's state: Adam's two moments and step (bytes)",
    "activations": "bytes autograd saves for backward in the measured step, each storage once, parameters "
                   "excluded, inputs included",
    "model_peak": "the largest total of the step's own live tensors during one measured training step "
                  "(library workspaces and the CUDA context excluded) (bytes)",
    "workspace": "library workspaces the step's streams hold (cuBLAS, once per stream); 0 on a CPU (bytes)",
    "allocator_peak": "the caching allocator's max_memory_allocated over the step: model peak + the "
                      "workspaces allocated in it; equal to the model peak on a CPU (bytes)",
    "process_peak": "what the process holds on the device at the step's peak: model peak + workspaces "
                    "once per stream + CUDA context; on a CPU the model peak (bytes)",
    "predicted_process_peak": "process_peak as foxlib.memory.predict_step predicts it on fake tensors, where the "
                              "step was not run (a CPU without the precision's kernels) (bytes)",
    "forward_peak": "the largest total of the step's own live tensors during forward + loss (bytes)",
    "theory_peak": "16 B/parameter (fp32 weights, gradients, two Adam moments) + the model's saved-activation "
                   "count (foxlib.memory.theory) (bytes)",
    "card": "the memory of the card emulated: card_gb x 2^30, or the device's own memory where that is less (bytes)",
    "cap": "the allocator cap the run trained and served under: card - CUDA context after the warm-up (bytes)",
    "context": "the CUDA context: NVML's per-process figure less the allocator's reserve (bytes)",
    "context_end": "the CUDA context at the end of the run, the largest of its phases (bytes)",
    "training_peak": "what the card must hold for the interleaved ensemble training: the allocator's reserved "
                     "peak under the cap (or what it needed where it ran out) + the CUDA context (bytes)",
    "inference_peak": "the same for concurrent inference (bytes)",
    "model_peaks_sum": "the sum of the ensemble members' model peaks in the interleaved run (bytes)",
    "nvml_max_process": "the largest NVML per-process figure sampled during training and inference (bytes)",
    "step_time": "median wall time of one training step over alternating rounds (seconds)",
}
# each unit as a page writes it (display): MB (10^6 bytes) with one decimal, ms, ratios x
FORMATS = {"bytes": lambda v: f"{v / MB:,.1f} MB", "s": lambda v: f"{v * 1e3:,.1f} ms", "ratio": lambda v: f"{v:,.2f}x",
           "fraction": lambda v: f"{v * 100:,.1f} %", "count": lambda v: f"{v:,}", "text": str}
UNITS = tuple(FORMATS)


@dataclass(frozen=True)
class Figure:
    key: str
    value: Any
    unit: str
    low: float | None = None
    """The lower end of the value's confidence interval, where it has one (timing ratios)."""
    high: float | None = None
    confidence: float | None = None
    """The interval's coverage (foxlib.harness.timing.stated_confidence: less than 95 % from too few rounds)."""
    runs: tuple[tuple[float, float, float], ...] | None = None
    """(median, low, high) of each independent run of the same figure, where it was measured in several."""

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"figure {self.key!r}: unknown unit {self.unit!r}; valid units: {', '.join(UNITS)}")
        if self.unit == "bytes" and self.quantity not in DEFINITIONS:
            raise ValueError(f"figure {self.key!r}: {self.quantity!r} has no definition; "
                             f"defined: {', '.join(DEFINITIONS)}")

    @property
    def quantity(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        d = {"value": self.value, "unit": self.unit}
        if self.low is not None or self.high is not None:
            d["low"], d["high"] = self.low, self.high
            if self.confidence is not None:
                d["confidence"] = self.confidence
        if self.runs:
            d["runs"] = [list(r) for r in self.runs]
        return d


def key(model: str, preset: str, batch_size: int, encoder_length: int | None, precision: str, quantity: str,
        variant: str | None = None) -> str:
    """`model/preset/b<batch>/t<encoder>/<precision>[/<variant>]/<quantity>` (t only where a model has one)."""
    t = [f"t{encoder_length}"] if encoder_length else []
    return "/".join([model, preset, f"b{batch_size}", *t, precision, *([variant] if variant else []), quantity])


def slug(name: str) -> str:
    """A strategy or configuration name as a key part: "checkpoint all" -> "checkpoint-all"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def display(value: Any, unit: str) -> str:
    """The one way a figure is written on a page (FORMATS; another unit as str); "—" where there is no value."""
    return "—" if value is None else FORMATS.get(unit, str)(value)


def mb_text(value: Any) -> str:
    """Bytes as a page writes them: display(value, "bytes")."""
    return display(value, "bytes")


def as_dict(figures: Iterable[Figure]) -> dict[str, dict[str, Any]]:
    """results.json's "figures": {key: {"value", "unit"}}; a key listed twice with two values is an error."""
    out: dict[str, dict[str, Any]] = {}
    for f in figures:
        if f.key in out and out[f.key] != f.to_dict():
            raise ValueError(f"figure {f.key} given twice: {out[f.key]} and {f.to_dict()}")
        out[f.key] = f.to_dict()
    return out
