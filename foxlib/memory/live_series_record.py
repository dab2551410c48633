"""The live-memory series of one training step (MemoryTimeline: live bytes over milliseconds, its
phases, its peak and what was live at it) and the helpers that build one from a replay of
allocation events: one point per event while building, then downsampled to at most about
MAX_POINTS points with the envelope and the peak kept (foxlib/memory/live_series_cuda.py and
foxlib/memory/live_series_cpu.py replay the two sources; tests/test_memory_timelines.py)."""
from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Sequence

MAX_POINTS = 4000  # default size of a downsampled series
OPTIMIZER_STEP_PREFIX = "Optimizer.step"
PHASES = ("forward", "backward", "optimizer step")


@dataclass(frozen=True)
class Phase:
    """One part of the step on the series' x-axis (milliseconds since the step began)."""
    name: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class PeakOwner:
    """Allocations live at the peak that one place in the code made, and their bytes together."""
    name: str
    """Where they were made: CUDA, the innermost frame of the model's code (file:line function) and
    the torch function below it; CPU, the op that allocated and the op or backward node it ran in."""
    bytes: int
    count: int
    phase: str
    """The phase the largest of them was allocated in."""
    frames: tuple[str, ...] = ()
    """The largest one's stack, innermost first, torch and the runner's frames left out (CUDA) or
    its ops, innermost first (CPU)."""


@dataclass(frozen=True)
class MemoryTimeline:
    """Live bytes through one training step, downsampled, with its phases and its peak.

    x: milliseconds since the step began; live_bytes: bytes live after each point's event."""
    label: str
    device: str
    """"cuda" or "cpu"."""
    x_ms: tuple[float, ...]
    live_bytes: tuple[int, ...]
    phases: tuple[Phase, ...]
    phase_source: str
    """"annotations" (the step's own marks) or how they were inferred."""
    peak_bytes: int
    peak_ms: float
    peak_phase: str
    owners: tuple[PeakOwner, ...]
    """Allocations made in the step and live at the peak, grouped by where they were made, largest first."""
    start_bytes: int
    """Bytes live when the step began (parameters, optimizer state, batch, ...)."""
    events: int
    """Allocation and free events in the step (before downsampling)."""
    source: str = ""
    method: str = ""
    reconstruction_error_bytes: int | None = None
    """CUDA: the replay's live bytes at the end less the snapshot's allocated blocks (0: exact)."""
    forward_end_bytes: int | None = None
    """Bytes live when the forward (+ loss) ended: what it leaves for backward on top of start_bytes."""

    def __post_init__(self):
        if len(self.x_ms) != len(self.live_bytes):
            raise ValueError(f"x_ms has {len(self.x_ms)} points, live_bytes {len(self.live_bytes)}")

    @property
    def owner(self) -> PeakOwner | None:
        return self.owners[0] if self.owners else None

    def phase_at(self, x_ms: float) -> str:
        return phase_at(self.phases, x_ms)

    def phase_peak_bytes(self, name: str) -> int:
        """The largest live bytes within one phase."""
        ph = next((p for p in self.phases if p.name == name), None)
        if ph is None:
            raise ValueError(f"no phase {name!r}; phases: {', '.join(p.name for p in self.phases)}")
        inside = [b for x, b in zip(self.x_ms, self.live_bytes) if ph.start_ms <= x <= ph.end_ms]
        return max(inside) if inside else 0

    def without(self, outside_bytes: int) -> "MemoryTimeline":
        """The same step less `outside_bytes` live throughout that are not the step's (what the process
        held before it: cuBLAS workspaces, earlier measurements' memory): its own bytes, whose peak is
        the model peak (foxlib.memory.profile)."""
        if not 0 <= outside_bytes <= self.start_bytes:
            raise ValueError(f"outside_bytes must be within 0..start_bytes ({self.start_bytes:,}), got {outside_bytes:,}")
        return replace(self, live_bytes=tuple(b - outside_bytes for b in self.live_bytes),
                       peak_bytes=self.peak_bytes - outside_bytes, start_bytes=self.start_bytes - outside_bytes,
                       forward_end_bytes=None if self.forward_end_bytes is None
                       else self.forward_end_bytes - outside_bytes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MemoryTimeline":
        d = dict(d)
        d["x_ms"] = tuple(d["x_ms"])
        d["live_bytes"] = tuple(d["live_bytes"])
        d["phases"] = tuple(Phase(**p) for p in d["phases"])
        d["owners"] = tuple(PeakOwner(**{**o, "frames": tuple(o.get("frames", ()))}) for o in d["owners"])
        return cls(**d)


def phase_at(phases: Sequence[Phase], x_ms: float) -> str:
    for p in phases:
        if p.start_ms <= x_ms <= p.end_ms:
            return p.name
    return "after the step" if phases and x_ms > phases[-1].end_ms else "before the step"


# ----------------------------------------------------------------------------- building a series

@dataclass
class LiveAllocation:
    """One allocation live in the replay."""
    bytes: int
    name: str
    x_ms: float
    frames: tuple[str, ...] = ()


@dataclass
class Replay:
    """A full-resolution series while it is built: one point per event."""
    x: list[float] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    peak: int = -1
    peak_i: int = 0
    at_peak: dict[int, LiveAllocation] = field(default_factory=dict)

    def add(self, x: float, live: int, alive: dict[int, LiveAllocation]):
        self.x.append(x)
        self.live.append(live)
        if live > self.peak:
            self.peak, self.peak_i, self.at_peak = live, len(self.live) - 1, dict(alive)


def finish_series(replay: Replay, *, label: str, device: str, phases: tuple[Phase, ...], phase_source: str,
            start_bytes: int, events: int, source: str, method: str, max_points: int, top: int = 5,
            reconstruction_error_bytes: int | None = None) -> MemoryTimeline:
    peak_x = replay.x[replay.peak_i]
    forward_end_bytes = None
    if phases:
        i = bisect.bisect_right(replay.x, phases[0].end_ms) - 1
        forward_end_bytes = replay.live[max(i, 0)]
    xs, ys = downsample(replay.x, replay.live, max_points)
    return MemoryTimeline(
        label=label, device=device, x_ms=tuple(xs), live_bytes=tuple(ys), phases=phases,
        phase_source=phase_source, peak_bytes=replay.peak, peak_ms=peak_x, peak_phase=phase_at(phases, peak_x),
        owners=tuple(group_owners(replay.at_peak.values(), phases, top)), start_bytes=start_bytes, events=events,
        source=source, method=method, reconstruction_error_bytes=reconstruction_error_bytes,
        forward_end_bytes=forward_end_bytes)


def group_owners(live: Iterable[LiveAllocation], phases: Sequence[Phase], top: int = 5) -> list[PeakOwner]:
    """Live allocations grouped by name, largest total first (the first `top`)."""
    groups: dict[str, list[LiveAllocation]] = {}
    for a in live:
        groups.setdefault(a.name, []).append(a)
    out = []
    for name, members in groups.items():
        big = max(members, key=lambda a: a.bytes)
        out.append(PeakOwner(name=name, bytes=sum(a.bytes for a in members), count=len(members),
                             phase=phase_at(phases, big.x_ms), frames=big.frames))
    out.sort(key=lambda o: (-o.bytes, o.name))
    return out[:top]


def downsample(x: Sequence[float], y: Sequence[int], max_points: int = MAX_POINTS) -> tuple[list[float], list[int]]:
    """At most about `max_points` points: each of max_points/2 equal runs of events keeps its lowest
    and highest point in order, so the envelope (and the peak, exactly) survives; first and last kept."""
    n = len(y)
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, got {max_points}")
    if n <= max_points:
        return list(x), list(y)
    buckets = max_points // 2 - 1
    keep = {0, n - 1}
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        if hi <= lo:
            continue
        seg = range(lo, hi)
        keep.add(min(seg, key=lambda i: y[i]))
        keep.add(max(seg, key=lambda i: y[i]))
    idx = sorted(keep)
    return [x[i] for i in idx], [y[i] for i in idx]


def step_phases(step_start: float, forward_end: float | None, backward_end: float | None,
            optimizer_end: float | None, last: float) -> tuple[Phase, ...]:
    """forward / backward / optimizer step, as far as the boundaries are known (times in ms)."""
    out = []
    if forward_end is None:
        return ()
    out.append(Phase("forward", step_start, forward_end))
    if backward_end is None:
        return (*out, Phase("backward", forward_end, last))
    out.append(Phase("backward", forward_end, backward_end))
    out.append(Phase("optimizer step", backward_end, optimizer_end if optimizer_end is not None else last))
    return tuple(out)
