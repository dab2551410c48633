"""Live memory through one training step (MemoryTimeline), from either file profile_step(snapshot_path=...)
writes: a CUDA allocator snapshot or the CPU profiler's allocation events (`load` reads either).

Phases: forward (+ loss) ends at the `foxlib::forward_end` mark; backward ends where torch.optim's
`Optimizer.step#...` range starts; the optimizer step ends with it. A series is downsampled to about MAX_POINTS
points, its envelope and peak kept.
"""
from __future__ import annotations

import bisect
import json
import pickle
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from foxlib.core.schema import Record
from foxlib.memory.timeline import CPU_EVENTS_FORMAT, MARK_FORWARD_END

MAX_POINTS = 4000  # default size of a downsampled series
OPTIMIZER_STEP_PREFIX = "Optimizer.step"
PHASES = ("forward", "backward", "optimizer step")


@dataclass(frozen=True)
class Phase(Record):
    """One part of the step on the series' x-axis (milliseconds since the step began)."""
    name: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class PeakOwner(Record):
    """Allocations live at the peak that one place in the code made, and their bytes together."""
    name: str
    """CUDA: the innermost frame of the model's code (file:line function) and the torch function below it;
    CPU: the op that allocated and the op or backward node it ran in."""
    bytes: int
    count: int
    phase: str
    """The phase the largest of them was allocated in."""
    frames: tuple[str, ...] = ()
    """The largest one's stack (CUDA, torch and the runner's frames left out) or ops (CPU), innermost first."""
    PARTS = {"frames": str}


@dataclass(frozen=True)
class MemoryTimeline(Record):
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
    PARTS = {"x_ms": float, "live_bytes": int, "phases": Phase, "owners": PeakOwner}

    def __post_init__(self):
        if len(self.x_ms) != len(self.live_bytes):
            raise ValueError(f"x_ms has {len(self.x_ms)} points, live_bytes {len(self.live_bytes)}")

    @property
    def owner(self) -> PeakOwner | None:
        return self.owners[0] if self.owners else None

    def without(self, outside_bytes: int) -> "MemoryTimeline":
        """The same step less `outside_bytes` live throughout that are not the step's (cuBLAS workspaces,
        earlier measurements' memory): its own bytes, whose peak is the model peak (foxlib.memory.profile)."""
        if not 0 <= outside_bytes <= self.start_bytes:
            raise ValueError(f"outside_bytes must be within 0..start_bytes ({self.start_bytes:,}), "
                             f"got {outside_bytes:,}")
        return replace(self, live_bytes=tuple(b - outside_bytes for b in self.live_bytes),
                       peak_bytes=self.peak_bytes - outside_bytes, start_bytes=self.start_bytes - outside_bytes,
                       forward_end_bytes=None if self.forward_end_bytes is None
                       else self.forward_end_bytes - outside_bytes)


def phase_at(phases: Sequence[Phase], x_ms: float) -> str:
    for p in phases:
        if p.start_ms <= x_ms <= p.end_ms:
            return p.name
    return "after the step" if phases and x_ms > phases[-1].end_ms else "before the step"


def load(path: str, *, label: str = "", max_points: int = MAX_POINTS) -> MemoryTimeline:
    """A CUDA snapshot (pickle) or a CPU allocation record (JSON), whichever the file is."""
    with open(path, "rb") as f:  # parsed from the file as read: a large snapshot is not held twice
        is_json = f.read(1) == b"{"
        f.seek(0)
        data = json.load(f) if is_json else pickle.load(f)
    return (from_cpu_events if is_json else from_cuda_snapshot)(data, label=label, max_points=max_points, source=path)


# ----------------------------------------------------------------------------- building a series

@dataclass
class LiveAllocation:
    """One allocation live in the replay."""
    bytes: int
    name: str
    x_ms: float
    frames: tuple[str, ...] = ()


class Replay:
    """A full-resolution series while it is built: one point per event, from `start` bytes live at 0 ms."""

    def __init__(self, start: int):
        self.x, self.live, self.alive = [0.0], [start], {}
        self.peak, self.peak_x, self.at_peak = start, 0.0, {}

    def add(self, x: float, delta: int, addr: int, made: LiveAllocation | None = None):
        """An event at x ms: `delta` bytes live more (fewer), `made` the allocation now at `addr` (None: freed)."""
        if made is None:
            self.alive.pop(addr, None)
        else:
            self.alive[addr] = made
        self.x.append(x)
        self.live.append(self.live[-1] + delta)
        if self.live[-1] > self.peak:
            self.peak, self.peak_x, self.at_peak = self.live[-1], x, dict(self.alive)


def finish_series(replay: Replay, *, label: str, device: str, phases: tuple[Phase, ...], phase_source: str,
                  source: str, method: str, max_points: int,
                  reconstruction_error_bytes: int | None = None) -> MemoryTimeline:
    forward_end_bytes = replay.live[max(bisect.bisect_right(replay.x, phases[0].end_ms) - 1, 0)] if phases else None
    xs, ys = downsample(replay.x, replay.live, max_points)
    return MemoryTimeline(
        label=label, device=device, x_ms=tuple(xs), live_bytes=tuple(ys), phases=phases,
        phase_source=phase_source, peak_bytes=replay.peak, peak_ms=replay.peak_x,
        peak_phase=phase_at(phases, replay.peak_x), owners=tuple(group_owners(replay.at_peak.values(), phases)),
        start_bytes=replay.live[0], events=len(replay.x) - 1, source=source, method=method,
        reconstruction_error_bytes=reconstruction_error_bytes, forward_end_bytes=forward_end_bytes)


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
    return sorted(out, key=lambda o: (-o.bytes, o.name))[:top]


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
    for b in range(buckets):  # n > max_points > buckets: every bucket holds at least one point
        seg = range(b * n // buckets, (b + 1) * n // buckets)
        keep |= {min(seg, key=y.__getitem__), max(seg, key=y.__getitem__)}
    idx = sorted(keep)
    return [x[i] for i in idx], [y[i] for i in idx]


def step_phases(forward_end: float | None, backward_end: float | None, optimizer_end: float | None,
                last: float) -> tuple[Phase, ...]:
    """forward / backward / optimizer step from 0 ms, as far as the boundaries are known (times in ms)."""
    if forward_end is None:
        return ()
    if backward_end is None:
        return (Phase("forward", 0.0, forward_end), Phase("backward", forward_end, last))
    return (Phase("forward", 0.0, forward_end), Phase("backward", forward_end, backward_end),
            Phase("optimizer step", backward_end, optimizer_end if optimizer_end is not None else last))


# ----------------------------------------------------------------------------- the CPU's allocation record

# composite forward ops that no backward formula calls: under a backward node they are a recompute
RECOMPUTE_MARKERS = {"aten::linear", "aten::dropout", "aten::feature_dropout", "aten::layer_norm", "aten::matmul",
                     "aten::lstm", "aten::glu", "aten::elu", "aten::scaled_dot_product_attention", "aten::einsum"}
FACTORY_OPS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zeros", "aten::zeros_like",
               "aten::ones", "aten::ones_like", "aten::full", "aten::full_like", "aten::resize_",
               "aten::resize_as_", "aten::new_empty", "aten::new_empty_strided", "aten::new_zeros",
               "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone"}


def cpu_owner_name(ops: Sequence[str]) -> str:
    """A short name for where a CPU allocation was made, from its ops (innermost first)."""
    if not ops:
        return "no op (freed outside any op)"
    work = [o for o in ops if o not in FACTORY_OPS] or list(ops)
    inner, outer = work[0], ops[-1]
    node = outer.split(": ", 1)[1] if outer.startswith("autograd::engine::evaluate_function: ") else ""
    if node:
        # a forward op under a backward node: checkpointing's recompute (its unpack hook runs the forward again)
        if forward := [o for o in ops[:-1] if o in RECOMPUTE_MARKERS]:
            return f"recompute: {forward[-1]} in {node}"
        return f"backward {node}" + ("" if inner in (node, outer) else f" ({inner})")
    if outer.startswith(OPTIMIZER_STEP_PREFIX):
        return f"{outer} ({inner})" if inner != outer else outer
    return inner if inner == outer else f"{inner} in {outer}"


def from_cpu_events(events: dict[str, Any], *, label: str = "", max_points: int = MAX_POINTS,
                    source: str = "") -> MemoryTimeline:
    """The series of a CPU allocation record (CpuTimeline.write's JSON, read; `source`: its file): the bytes live
    at the start, then every allocation (+) and free (-), whose running sum is profile_step's CPU peak."""
    if events.get("format") != CPU_EVENTS_FORMAT:
        raise ValueError(f"not a CPU allocation record: format {events.get('format')!r}, "
                         f"expected {CPU_EVENTS_FORMAT!r}")
    allocations = events["allocations"]
    ranges = events.get("ranges", [])
    times = [a[0] for a in allocations] + [r[1] for r in ranges] + [r[2] for r in ranges]
    if not times:
        raise ValueError("the CPU allocation record is empty")
    t0 = min(times)
    ms = lambda t: None if t is None else (t - t0) / 1e6  # noqa: E731
    fwd = next((r[1] for r in ranges if r[0] == MARK_FORWARD_END), None)
    opt = next((r for r in ranges if r[0].startswith(OPTIMIZER_STEP_PREFIX)), (None, None, None))
    phases = step_phases(ms(fwd), ms(opt[1]), ms(opt[2]), ms(max(times)))
    replay = Replay(int(events["live_at_start_bytes"]))
    for t, d, addr, ops in allocations:
        x = ms(t)
        replay.add(x, d, addr, LiveAllocation(d, cpu_owner_name(ops), x, tuple(ops[:6])) if d > 0 else None)
    return finish_series(replay, label=label, device="cpu", phases=phases,
                         phase_source="annotations" if phases else "none: no forward mark in the record", source=source,
                         method=("CPU: tensors live at the start + running sum of the CPU allocator's allocation "
                                 "events (torch.profiler, profile_memory=True)"), max_points=max_points)


# ----------------------------------------------------------------------------- the CUDA allocator's snapshot
# torch.cuda.memory._dump_snapshot's trace records requested sizes; memory_allocated counts blocks: a request
# rounded up to 512 bytes and, in the large pool, a whole free block when at most 1 MiB would remain after the
# split (the caching allocator's round_size and shouldSplit). Replayed on the allocator's address map, the
# series is memory_allocated and its peak max_memory_allocated (tests/test_memory_timelines.py checks the H200's).

MIN_BLOCK_BYTES = 512  # the allocator rounds every request up to a multiple of this
SMALL_SIZE_BYTES = 1 << 20  # requests up to this come from the small pool; a large block is split only if more remains
NO_STACKS_OWNER = "unnamed: the history was recorded without stacks"
LIBRARY_PATHS = ("/torch/", "/site-packages/", "<frozen", "/lib/python3")
GENERIC_FRAMES = {"forward", "_loop", "_run", "_body", "_batched", "inner", "loss", "step", "__call__", "_call_impl",
                  "_wrapped_call_impl", "profile_step", "measure", "main"}  # frames too common to name an owner
RUNNER_FRAMES = ("step", "profile_step")  # the runner's own frames: never an owner


def round_size(size: int) -> int:
    """The allocator's block size for a request (no roundup_power2_divisions configured)."""
    return MIN_BLOCK_BYTES if size < MIN_BLOCK_BYTES else MIN_BLOCK_BYTES * -(-size // MIN_BLOCK_BYTES)


def frame_text(f: dict[str, Any]) -> str:
    return f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']} {f['name']}"


def is_library(f: dict[str, Any]) -> bool:
    return any(s in f["filename"] for s in LIBRARY_PATHS)


def cuda_owner_name(frames: Sequence[dict[str, Any]], in_backward: bool) -> str:
    """A short name for where an allocation was made, from its Python stack (innermost first)."""
    if not frames:
        return ("backward: the autograd engine (no Python stack on its thread)" if in_backward
                else "no Python stack (made by C++ code)")
    user = [f for f in frames if not is_library(f) and f["name"] not in RUNNER_FRAMES]
    recompute = in_backward and any("torch/utils/checkpoint.py" in f["filename"] for f in frames)
    torch_fn = frames[0]["name"] if is_library(frames[0]) else ""
    if not user:
        where = frame_text(frames[0])
    else:
        where = frame_text(user[0]) + (f" ({torch_fn})" if torch_fn and torch_fn != user[0]["name"] else "")
        # the nearest enclosing function of the same file with a name of its own (a block's method)
        if outer := next((f["name"] for f in user[1:] if f["filename"] == user[0]["filename"]
                          and f["name"] not in GENERIC_FRAMES and f["name"] != user[0]["name"]
                          and not f["name"].startswith("<")), None):
            where += f" in {outer}"
    return ("recompute in backward: " if recompute else "") + where


def user_frames(frames: Sequence[dict[str, Any]], n: int = 6) -> tuple[str, ...]:
    kept = [frame_text(f) for f in frames if not is_library(f)]
    return tuple(kept[:n]) if kept else tuple(frame_text(f) for f in frames[:n])


def from_cuda_snapshot(snapshot: dict[str, Any], *, label: str = "", max_points: int = MAX_POINTS,
                       source: str = "") -> MemoryTimeline:
    """The series of a CUDA allocator snapshot (its pickle, read; `source`: its file), of the device with the
    longest trace; without the forward's mark, its end is inferred (inferred_forward_end)."""
    traces = snapshot.get("device_traces")
    if not traces or not any(traces):
        raise ValueError("the snapshot has no allocation trace: record it with "
                         "torch.cuda.memory._record_memory_history() before the step")
    device_index = max(range(len(traces)), key=lambda i: len(traces[i]))
    trace = traces[device_index]
    settings = snapshot.get("allocator_settings", {})
    exact = not settings.get("expandable_segments") and not any(
        settings.get("roundup_power2_divisions", {}).values())

    # the allocator at the dump, then undone event by event back to the trace's start
    segments: dict[int, int] = {}
    allocated: dict[int, int] = {}
    for seg in (s for s in snapshot["segments"] if s.get("device", device_index) == device_index):
        addr = seg["address"]
        segments[addr] = seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                allocated[addr] = b["size"]
            addr += b["size"]
    end_allocated = sum(allocated.values())
    for e in reversed(trace):
        a = e["action"]
        if a == "alloc":
            allocated.pop(e["addr"], None)
        elif a == "free_completed":
            allocated[e["addr"]] = round_size(e["size"])  # made before the trace: its request, rounded
        elif a == "segment_alloc":
            segments.pop(e["addr"], None)
        elif a == "segment_free":
            segments[e["addr"]] = e["size"]

    annotations = [x for x in snapshot.get("external_annotations", []) if x.get("device", device_index) == device_index]
    times = [e["time_us"] for e in trace] + [x["time_us"] for x in annotations]
    t0 = min(times)
    ms = lambda t: None if t is None else (t - t0) / 1000.0  # noqa: E731

    fwd = next((x["time_us"] for x in annotations if x["name"] == MARK_FORWARD_END and x["stage"] == "START"), None)
    opt = [x for x in annotations if x["name"].startswith(OPTIMIZER_STEP_PREFIX)]
    opt_start, opt_end = (next((x["time_us"] for x in opt if x["stage"] == s), None) for s in ("START", "END"))
    phase_source = "annotations"
    if fwd is None:
        fwd = inferred_forward_end(trace, "loss", opt_start)
        phase_source = ("forward end inferred from stacks (last allocation under the loss before the first "
                        "made by the autograd engine); backward end and optimizer step from the optimizer's "
                        "record_function range")
    if fwd is not None and opt_start is not None and fwd > opt_start:
        fwd = None
    phases = step_phases(ms(fwd), ms(opt_start), ms(opt_end), ms(max(times)))
    if not phases:
        phase_source = "none: the snapshot has no forward mark and its stacks do not show where backward began"
    # a history recorded without stacks (record_cuda_history("none")) names no owner
    has_stacks = any(e.get("frames") for e in trace if e["action"] == "alloc")

    # replay
    seg_starts = sorted(segments)
    alloc_starts = sorted(allocated)
    sizes = dict(allocated)
    replay = Replay(sum(allocated.values()))
    for e in trace:
        a, addr = e["action"], e["addr"]
        if a == "segment_alloc":
            segments[addr] = e["size"]
            bisect.insort(seg_starts, addr)
        elif a == "segment_free":
            segments.pop(addr, None)
            remove_sorted(seg_starts, addr)
        elif a == "alloc":
            x = ms(e["time_us"])
            size = block_size(addr, e["size"], seg_starts, segments, alloc_starts) if exact else round_size(e["size"])
            sizes[addr] = size
            bisect.insort(alloc_starts, addr)
            frames = e.get("frames", [])
            owner = cuda_owner_name(frames, phase_at(phases, x) == "backward") if has_stacks else NO_STACKS_OWNER
            replay.add(x, size, addr, LiveAllocation(size, owner, x, user_frames(frames)))
        elif a == "free_completed":
            remove_sorted(alloc_starts, addr)
            replay.add(ms(e["time_us"]), -sizes.pop(addr, round_size(e["size"])), addr)
    method = ("CUDA allocator snapshot: its trace replayed on the allocator's address map (blocks: requests "
              "rounded to 512 B; a large block left whole when at most 1 MiB would remain), from the "
              "blocks allocated at the trace's start" + ("" if exact else
              "; approximate: expandable segments or roundup_power2_divisions are set, blocks taken as "
              "rounded requests"))
    return finish_series(replay, label=label, device="cuda", phases=phases, phase_source=phase_source,
                         source=source, method=method, max_points=max_points,
                         reconstruction_error_bytes=replay.live[-1] - end_allocated)


def remove_sorted(starts: list[int], addr: int) -> None:
    i = bisect.bisect_left(starts, addr)
    if i < len(starts) and starts[i] == addr:
        starts.pop(i)


def block_size(addr: int, requested: int, seg_starts: list[int], segments: dict[int, int],
               alloc_starts: list[int]) -> int:
    """The block a request at `addr` got: its rounded size, or in the large pool the whole free block (to the
    next allocated block or the segment's end) when splitting it would leave at most SMALL_SIZE_BYTES."""
    r = round_size(requested)
    i = bisect.bisect_right(seg_starts, addr) - 1  # the segment starting at or before addr (none: -1)
    if r <= SMALL_SIZE_BYTES or i < 0 or addr >= (seg_end := seg_starts[i] + segments[seg_starts[i]]):
        return r
    j = bisect.bisect_right(alloc_starts, addr)
    free = (min(seg_end, alloc_starts[j]) if j < len(alloc_starts) else seg_end) - addr
    return free if r <= free <= r + SMALL_SIZE_BYTES else r


def inferred_forward_end(trace: list[dict[str, Any]], loss_frame: str, before_us: int | None) -> int | None:
    """The time of the last allocation whose stack runs through `loss_frame` before the first allocation
    of backward (no Python stack, or a stack through torch's backward)."""
    last = None
    for e in (e for e in trace if e["action"] == "alloc"):
        if before_us is not None and e["time_us"] >= before_us:
            break
        frames = e.get("frames", [])
        names = {f["name"] for f in frames}
        if not frames or "backward" in names and any("torch/_tensor.py" in f["filename"] for f in frames):
            return last
        if loss_frame in names:
            last = e["time_us"]
    return None
