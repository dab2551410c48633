"""Live memory through one training step, as a small typed series (MemoryTimeline,
foxlib/memory/live_series_record.py), read from either file `profile_step(..., snapshot_path=...)`
writes (foxlib/memory/profile.py): a CUDA allocator snapshot, replayed on the allocator's address
map (foxlib/memory/live_series_cuda.py), or the CPU profiler's allocation events
(foxlib/memory/live_series_cpu.py); `load` reads whichever a file is. Phases: forward (+ loss)
ends at the `foxlib::forward_end` mark; backward ends where the optimizer step starts
(`Optimizer.step#...`, which torch.optim opens around every step), and the optimizer step ends
with that range."""
from __future__ import annotations

from foxlib.memory.live_series_cpu import cpu_owner_name, from_cpu_events
from foxlib.memory.live_series_cuda import cuda_owner_name, from_cuda_snapshot, round_size
from foxlib.memory.live_series_record import (MAX_POINTS, PHASES, MemoryTimeline, PeakOwner, Phase, downsample,
                                              phase_at)
from foxlib.memory.timeline import CPU_EVENTS_FORMAT, MARK_FORWARD_END

__all__ = ["CPU_EVENTS_FORMAT", "MARK_FORWARD_END", "MAX_POINTS", "PHASES", "MemoryTimeline", "PeakOwner", "Phase",
           "cpu_owner_name", "cuda_owner_name", "downsample", "from_cpu_events", "from_cuda_snapshot", "load",
           "phase_at", "round_size"]


def load(path: str, *, label: str = "", max_points: int = MAX_POINTS) -> MemoryTimeline:
    """A CUDA snapshot (pickle) or a CPU allocation record (JSON), whichever the file is."""
    with open(path, "rb") as f:
        head = f.read(1)
    if head == b"{":
        return from_cpu_events(path, label=label, max_points=max_points)
    return from_cuda_snapshot(path, label=label, max_points=max_points)
