"""The live-memory series of a CPU allocation record: the JSON of `CpuTimeline.write`
(foxlib/memory/timeline.py), the bytes live at the start and every allocation (+) and free (-) of
the CPU allocator with the ops it was made in, the same events whose running sum gives
profile_step's CPU peak; allocations are named by their ops (cpu_owner_name: a backward node, a
checkpoint's recompute, the optimizer step). tests/test_memory_timelines.py checks it."""
from __future__ import annotations

import json
from typing import Any, Sequence

from foxlib.memory.live_series_record import (MAX_POINTS, OPTIMIZER_STEP_PREFIX, LiveAllocation, MemoryTimeline,
                                              Replay, finish_series, step_phases)
from foxlib.memory.timeline import CPU_EVENTS_FORMAT, MARK_FORWARD_END

# composite forward ops that no backward formula calls: under a backward node they are a recompute
_RECOMPUTE_MARKERS = {"aten::linear", "aten::dropout", "aten::feature_dropout", "aten::layer_norm", "aten::matmul",
                      "aten::lstm", "aten::glu", "aten::elu", "aten::scaled_dot_product_attention", "aten::einsum"}
_FACTORY_OPS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zeros", "aten::zeros_like",
                "aten::ones", "aten::ones_like", "aten::full", "aten::full_like", "aten::resize_",
                "aten::resize_as_", "aten::new_empty", "aten::new_empty_strided", "aten::new_zeros",
                "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone"}


def cpu_owner_name(ops: Sequence[str]) -> str:
    """A short name for where a CPU allocation was made, from its ops (innermost first)."""
    if not ops:
        return "no op (freed outside any op)"
    work = [o for o in ops if o not in _FACTORY_OPS] or list(ops)
    inner, outer = work[0], ops[-1]
    node = outer.split(": ", 1)[1] if outer.startswith("autograd::engine::evaluate_function: ") else ""
    if node:
        # a forward op under a backward node: checkpointing's recompute (its unpack hook runs the forward again)
        forward = [o for o in ops[:-1] if o in _RECOMPUTE_MARKERS]
        if forward:
            return f"recompute: {forward[-1]} in {node}"
        return f"backward {node}" + ("" if inner in (node, outer) else f" ({inner})")
    if outer.startswith(OPTIMIZER_STEP_PREFIX):
        return f"{outer} ({inner})" if inner != outer else outer
    return inner if inner == outer else f"{inner} in {outer}"


def from_cpu_events(events: dict[str, Any] | str, *, label: str = "", max_points: int = MAX_POINTS) -> MemoryTimeline:
    """The series of a CPU allocation record (a dict or the path of the JSON CpuTimeline.write makes)."""
    source = ""
    if isinstance(events, str):
        source = events
        with open(events) as f:
            events = json.load(f)
    if events.get("format") != CPU_EVENTS_FORMAT:
        raise ValueError(f"not a CPU allocation record: format {events.get('format')!r}, "
                         f"expected {CPU_EVENTS_FORMAT!r}")
    allocations = events["allocations"]
    ranges = events.get("ranges", [])
    times = [a[0] for a in allocations] + [r[1] for r in ranges] + [r[2] for r in ranges]
    if not times:
        raise ValueError("the CPU allocation record is empty")
    t0 = min(times)
    ms = lambda t: (t - t0) / 1e6  # noqa: E731
    fwd = next((r[1] for r in ranges if r[0] == MARK_FORWARD_END), None)
    opt = next((r for r in ranges if r[0].startswith(OPTIMIZER_STEP_PREFIX)), None)
    phases = step_phases(0.0, None if fwd is None else ms(fwd), None if opt is None else ms(opt[1]),
                     None if opt is None else ms(opt[2]), ms(max(times)))
    live = start = int(events["live_at_start_bytes"])
    alive: dict[int, LiveAllocation] = {}
    replay = Replay()
    replay.add(0.0, live, alive)
    for t, d, addr, ops in allocations:
        x = ms(t)
        live += d
        if d > 0:
            alive[addr] = LiveAllocation(d, cpu_owner_name(ops), x, tuple(ops[:6]))
        else:
            alive.pop(addr, None)
        replay.add(x, live, alive)
    return finish_series(replay, label=label, device="cpu", phases=phases,
                   phase_source="annotations" if phases else "none: no forward mark in the record",
                   start_bytes=start, events=len(allocations), source=source,
                   method=("CPU: tensors live at the start + running sum of the CPU allocator's allocation events "
                           "(torch.profiler, profile_memory=True)"), max_points=max_points)
