"""The CPU's peak memory of a region of code, from the profiler's allocation events.

The CPU has no allocator statistics; torch.profiler with profile_memory=True records every allocation and free of
the CPU allocator, whose running sum from the region's start is the change in live bytes. (A tensor made before
the profiler started and freed inside is not reported as a free: the sum can only overstate, and profile_step
frees the gradients before the measured step.)

Kineto, under the profiler, writes a "USDT: ... profiler_start/stop" line to stderr at every start and stop (torch
2.13's CPU build): 24 of them in CPU 8.13's notebook as committed before quiet_kineto existed. `quiet_kineto`
turns its log off (KINETO_LOG_LEVEL=6, above its highest level, 5) before any foxlib profiler starts, unless the
user set KINETO_LOG_LEVEL.
"""
from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass, field

import torch

MARK_FORWARD_END = "foxlib::forward_end"
CPU_EVENTS_FORMAT = "foxlib.cpu_allocations/1"  # the file CpuTimeline.write makes (JSON)
_RANGE_PREFIXES = ("foxlib::", "Optimizer.")  # record_function ranges kept (phase boundaries)
QUIET_KINETO = "6"  # Kineto's log levels run 0 (verbose) .. 5 (USDT): 6 prints none of them


def quiet_kineto() -> None:
    """Kineto's log off for this process (KINETO_LOG_LEVEL, read when a profiler first starts), unless set already."""
    os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_KINETO)


@dataclass
class CpuTimeline:
    """Allocation deltas of one region, in time order, and where a forward ended."""
    allocations: list[tuple[int, int, int, tuple[str, ...]]] = field(default_factory=list)
    """(time ns, bytes +/-, address, names of the ops it was made in, innermost first), in time order."""
    ranges: list[tuple[str, int, int]] = field(default_factory=list)
    """(name, start ns, end ns) of the record_function ranges named foxlib::* or Optimizer.* (phases)."""

    @property
    def forward_end_ns(self) -> int | None:
        """When mark_forward_end ran (its range's start), None without a mark."""
        return next((start for name, start, _ in self.ranges if name == MARK_FORWARD_END), None)

    def peak_delta(self, until_ns: int | None = None) -> int:
        """Largest rise of live bytes above the start, up to `until_ns` (whole region if None)."""
        total = best = 0
        for t, d in sorted((t, d) for t, d, _, _ in self.allocations):
            if until_ns is not None and t > until_ns:
                break
            total += d
            best = max(best, total)
        return best

    def write(self, path: str, live_at_start: int) -> None:
        """The events as JSON (CPU_EVENTS_FORMAT) with the bytes live at the start, for live_series.load."""
        with open(path, "w") as f:
            json.dump({"format": CPU_EVENTS_FORMAT, "live_at_start_bytes": live_at_start,
                       "allocations": [[t, d, a, list(ops)] for t, d, a, ops in self.allocations],
                       "ranges": [list(r) for r in self.ranges]}, f)


@contextlib.contextmanager
def cpu_allocations():
    """A CpuTimeline filled in when the block exits; inside, call `mark_forward_end()` after forward + loss."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    timeline = CpuTimeline()
    quiet_kineto()
    with warnings.catch_warnings(action="ignore"), \
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        yield timeline
    allocations = []

    def walk(e):
        if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu":
            ops, p = [], e.parent
            while p is not None:
                ops.append(p.name)
                p = p.parent
            allocations.append((e.start_time_ns, e.extra_fields.alloc_size, e.extra_fields.ptr, tuple(ops)))
        elif e.name.startswith(_RANGE_PREFIXES):
            timeline.ranges.append((e.name, e.start_time_ns, e.end_time_ns))
        for c in e.children:
            walk(c)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    timeline.allocations = sorted(allocations, key=lambda a: a[0])
    timeline.ranges.sort(key=lambda r: r[1])


def mark_forward_end():
    """Leave a marker in the profiler's trace (a no-op when no profiler runs)."""
    with torch.profiler.record_function(MARK_FORWARD_END):
        pass
