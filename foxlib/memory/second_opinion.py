"""A second opinion on a step's memory: PyTorch's own memory profiler, whose categories come from its data-flow
analysis of the step, independent of foxlib's accounting. Its API is private (`_memory_profile`) and may change
between releases: a failure is reported, not raised. Kineto's log is off as for foxlib's own profiling
(foxlib.memory.timeline.quiet_kineto).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch

from foxlib.core.schema import Sparse
from foxlib.memory.step import TrainingStep
from foxlib.memory.timeline import quiet_kineto


@dataclass(frozen=True)
class SecondOpinion(Sparse):
    """torch_memory_categories' data, typed on load (bytes): where the profiler ran, its method, the step's peak, each
    category at the peak and its own maximum ("unknown": in no category); where it failed, why (note)."""
    available: bool
    method: str | None = None
    peak_bytes: int | None = None
    at_peak: dict[str, int] | None = None
    max_by_category: dict[str, int] | None = None
    note: str | None = None


def torch_memory_categories(model: torch.nn.Module, batch: Any, loss_fn: Callable, optimizer: torch.optim.Optimizer,
                            precision: str = "fp32") -> dict[str, Any]:
    """Per category: bytes at the step's peak and each category's own maximum, by torch's profiler (after a warm-up)."""
    step = TrainingStep(model, batch, loss_fn, optimizer, precision)  # checks the precision, finds the device
    device = step.device
    step()
    optimizer.zero_grad(set_to_none=True)
    try:
        quiet_kineto()
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with warnings.catch_warnings(action="ignore"):
            with profile(activities=activities, profile_memory=True, record_shapes=True, with_stack=True) as prof:
                step()
            timeline = MemoryProfileTimeline(prof._memory_profile())
            times, sizes = timeline._coalesce_timeline(str(device) if device.type != "cuda" else
                                                       f"cuda:{device.index or 0}")
    except Exception as exc:  # a private API: say what went wrong instead of failing the wave
        return {"available": False, "note": f"torch's memory profiler failed: {type(exc).__name__}: {exc}"}
    # sizes[t][index + 1] holds the bytes of the category with that index (None: not categorised)
    names = {i + 1: (c.name.lower() if c is not None else "unknown") for c, i in _CATEGORY_TO_INDEX.items()}
    totals = [sum(s) for s in sizes]
    at = max(range(len(totals)), key=totals.__getitem__) if totals else 0
    return {
        "available": True,
        "method": "torch.profiler memory timeline (profile_memory, record_shapes, with_stack): "
                  "categories from PyTorch's data-flow analysis",
        "peak_bytes": totals[at] if totals else 0,
        "at_peak": {n: int(sizes[at][i]) for i, n in names.items()} if sizes else {},
        "max_by_category": {n: int(max(s[i] for s in sizes)) for i, n in names.items()} if sizes else {},
    }
