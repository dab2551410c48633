"""foxlib's TFT under torch.compile, for the peer benchmark's compiled rows (benchmarks/peer_tft.py).

The model's forward is compiled (`torch.compile(model.forward)`); the loss and the Adam step run
eagerly, as in foxlib's recipe (foxlib/harness/recipe.py). The wrapper module holds the model as its
only child: profile_step's hooks (foxlib/memory/accounting.py, SavedTensorTracker) sit on the wrapper
and on the model, outside the compiled code, so measuring the memory recompiles nothing.
Graph breaks are counted with torch._dynamo.explain over the eager forward, and with Dynamo's
counters while the compiled row takes its first steps (which are also its compile time).
"""
from __future__ import annotations

import collections
import time
from typing import Any, Callable

import torch

MODES = ("default", "reduce-overhead")
FIRST_STEPS = 3  # reduce-overhead: a warm-up run, then the CUDA graph's recording, then replays


def enabled(choice: str, device: torch.device, why_off: str | None = None) -> tuple[bool, str]:
    """--compile {auto,on,off}: (on?, why). `why_off` (--compile-off-reason, with off only) is what the
    page says instead of "not asked for", e.g. that a run with torch.compile failed."""
    if why_off and choice != "off":
        raise ValueError("--compile-off-reason goes with --compile off only")
    if choice == "on":
        return True, "asked for (--compile on)"
    if choice == "off":
        return False, f"{why_off.strip()} (--compile off)" if why_off else "not asked for (--compile off)"
    if device.type == "cuda":
        return True, "auto: on for CUDA"
    return False, ("auto: off on the CPU, where compiling the TFT takes minutes per row on a few cores; "
                   "--compile on runs these rows")


class CompiledTFT(torch.nn.Module):
    """`model` with its forward compiled in `mode` ("default" or "reduce-overhead"); the model's config
    and parameters are the wrapper's (foxlib's loss reads model.config)."""

    def __init__(self, model: torch.nn.Module, mode: str, backend: str = "inductor"):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"unknown torch.compile mode {mode!r}; valid: {', '.join(MODES)}")
        self.model = model
        self.mode, self.backend = mode, backend
        options = {"mode": mode} if backend == "inductor" else {}  # a mode is Inductor's
        self._forward = torch.compile(model.forward, backend=backend, **options)

    @property
    def config(self):
        return self.model.config

    def forward(self, batch):
        if self.mode == "reduce-overhead":  # one forward per training step: each one a new CUDA-graph step
            torch.compiler.cudagraph_mark_step_begin()
        return self._forward(batch)


def _first_line(text: str) -> str:
    return str(text).strip().splitlines()[0] if str(text).strip() else "?"


def _where(reason) -> str:
    """The innermost frame of a break reason's user stack, e.g. "foxlib/models/tft.py:461 _lstm_block"."""
    stack = getattr(reason, "user_stack", None) or []
    if not stack:
        return "?"
    f = stack[-1]
    name = str(f.filename)
    return f"{name[name.rfind('foxlib/'):] if 'foxlib/' in name else name.rsplit('/', 1)[-1]}:{f.lineno} {f.name}"


def graph_breaks(model: torch.nn.Module, batch: Any) -> dict[str, Any]:
    """{"graphs", "graph_breaks", "break_reasons": [{"reason", "where", "count"}], "method"} of the model's forward,
    or {"error"} where explain fails. Dynamo's caches are reset afterwards."""
    import torch._dynamo as dynamo
    try:
        ex = dynamo.explain(model)(batch)
    except Exception as exc:  # noqa: BLE001 - the count is informational; the rows still run
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"[:300]}
    finally:
        dynamo.reset()
    reasons = collections.Counter((_first_line(getattr(r, "reason", r)), _where(r)) for r in ex.break_reasons)
    return {"graphs": ex.graph_count, "graph_breaks": ex.graph_break_count,
            "break_reasons": [{"reason": r, "where": w, "count": n} for (r, w), n in reasons.most_common()],
            "method": "torch._dynamo.explain over foxlib's eager forward, one batch"}


def first_steps(step: Callable[[], Any], device: torch.device, n: int = FIRST_STEPS) -> dict[str, Any]:
    """Run the compiled row's first `n` training steps, timed: the first one compiles (its wall time is
    the compile time reported); Dynamo's counters over them give graphs compiled and graph-break events."""
    from torch._dynamo.utils import counters
    counters.clear()
    times = []
    for _ in range(n):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t)
    return {"compile_s": times[0], "first_steps_s": times,
            "graphs_compiled": int(counters["stats"].get("unique_graphs", 0)),
            "graph_break_events": int(sum(counters["graph_break"].values()))}
