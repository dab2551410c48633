"""The live-memory series of a CUDA allocator snapshot: the pickle of
`torch.cuda.memory._dump_snapshot` that profile_step(..., snapshot_path=...) writes
(foxlib/memory/profile.py), the allocator's segments at the dump and a trace of every alloc and
free of the measured step with its Python stack, plus the `record_function` ranges open meanwhile
(`external_annotations`: the forward's end mark and the optimizer's `Optimizer.step#...` range).
The trace records *requested* sizes, while the allocator's `memory_allocated` counts *blocks*: a
request rounded up to 512 bytes and, in the large pool, a whole free block when what would remain
after the split is at most 1 MiB (the caching allocator's `round_size` and `shouldSplit`). The
series replays the trace on the allocator's address map, so its bytes are `memory_allocated` and
its peak `max_memory_allocated` (tests/test_memory_timelines.py checks the committed
reports/h200/wave-8.10/memory_snapshot.pickle against that step's measurement);
`MemoryTimeline.reconstruction_error_bytes` says how well a replay ends on the snapshot's
segments. A snapshot without the forward's mark gets it from the stacks: the last allocation whose
stack runs through the loss function before the first made by the autograd engine (no Python
stack) or under `backward`."""
from __future__ import annotations

import bisect
import pickle
from typing import Any, Sequence

from foxlib.memory.live_series_record import (MAX_POINTS, OPTIMIZER_STEP_PREFIX, LiveAllocation, MemoryTimeline,
                                              Replay, finish_series, phase_at, step_phases)
from foxlib.memory.timeline import MARK_FORWARD_END

MIN_BLOCK_BYTES = 512  # the allocator rounds every request up to a multiple of this
SMALL_SIZE_BYTES = 1 << 20  # requests up to this come from the small pool; a large block is split only if more remains
NO_STACKS_OWNER = "unnamed: the history was recorded without stacks"
_LIBRARY = ("/torch/", "/site-packages/", "<frozen", "/lib/python3")
_GENERIC = {"forward", "_loop", "_run", "_body", "_batched", "inner", "loss", "step", "__call__", "_call_impl",
            "_wrapped_call_impl", "profile_step", "measure", "main"}  # frames too common to name an owner


def round_size(size: int) -> int:
    """The allocator's block size for a request (no roundup_power2_divisions configured)."""
    return MIN_BLOCK_BYTES if size < MIN_BLOCK_BYTES else MIN_BLOCK_BYTES * -(-size // MIN_BLOCK_BYTES)


def _frame_text(f: dict[str, Any]) -> str:
    return f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']} {f['name']}"


def _is_library(f: dict[str, Any]) -> bool:
    return any(s in f["filename"] for s in _LIBRARY)


def cuda_owner_name(frames: Sequence[dict[str, Any]], in_backward: bool, runner: Sequence[str] = ()) -> str:
    """A short name for where an allocation was made, from its Python stack (innermost first)."""
    if not frames:
        return ("backward: the autograd engine (no Python stack on its thread)" if in_backward
                else "no Python stack (made by C++ code)")
    user = [f for f in frames if not _is_library(f) and f["name"] not in runner]
    recompute = in_backward and any("torch/utils/checkpoint.py" in f["filename"] for f in frames)
    torch_fn = frames[0]["name"] if _is_library(frames[0]) else ""
    if not user:
        where = _frame_text(frames[0])
    else:
        where = _frame_text(user[0]) + (f" ({torch_fn})" if torch_fn and torch_fn != user[0]["name"] else "")
        # the nearest enclosing function of the same file with a name of its own (a block's method)
        outer = next((f["name"] for f in user[1:] if f["filename"] == user[0]["filename"]
                      and f["name"] not in _GENERIC and f["name"] != user[0]["name"] and not f["name"].startswith("<")),
                     None)
        if outer:
            where += f" in {outer}"
    return ("recompute in backward: " if recompute else "") + where


def _user_frames(frames: Sequence[dict[str, Any]], n: int = 6) -> tuple[str, ...]:
    kept = [_frame_text(f) for f in frames if not _is_library(f)]
    return tuple(kept[:n]) if kept else tuple(_frame_text(f) for f in frames[:n])


def from_cuda_snapshot(snapshot: dict[str, Any] | str, *, label: str = "", device_index: int | None = None,
                       max_points: int = MAX_POINTS, loss_frame: str = "loss") -> MemoryTimeline:
    """The series of a CUDA allocator snapshot (a dict or the path of its pickle); see the module's text."""
    source = ""
    if isinstance(snapshot, str):
        source = snapshot
        with open(snapshot, "rb") as f:
            snapshot = pickle.load(f)
    traces = snapshot.get("device_traces")
    if not traces or not any(traces):
        raise ValueError("the snapshot has no allocation trace: record it with "
                         "torch.cuda.memory._record_memory_history() before the step")
    if device_index is None:
        device_index = max(range(len(traces)), key=lambda i: len(traces[i]))
    trace = traces[device_index]
    settings = snapshot.get("allocator_settings", {})
    exact = not settings.get("expandable_segments") and not any(
        settings.get("roundup_power2_divisions", {}).values())

    # the allocator at the dump, then undone event by event back to the trace's start
    segments: dict[int, int] = {}
    allocated: dict[int, int] = {}
    for seg in snapshot["segments"]:
        if seg.get("device", device_index) != device_index:
            continue
        segments[seg["address"]] = seg["total_size"]
        addr = seg["address"]
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
    ms = lambda t: (t - t0) / 1000.0  # noqa: E731

    fwd = next((x["time_us"] for x in annotations if x["name"] == MARK_FORWARD_END and x["stage"] == "START"), None)
    opt = [x for x in annotations if x["name"].startswith(OPTIMIZER_STEP_PREFIX)]
    opt_start = next((x["time_us"] for x in opt if x["stage"] == "START"), None)
    opt_end = next((x["time_us"] for x in opt if x["stage"] == "END"), None)
    phase_source = "annotations"
    if fwd is None:
        fwd = _inferred_forward_end(trace, loss_frame, opt_start)
        phase_source = ("forward end inferred from stacks (last allocation under the loss before the first "
                        "made by the autograd engine); backward end and optimizer step from the optimizer's "
                        "record_function range")
    if fwd is not None and opt_start is not None and fwd > opt_start:
        fwd = None
    last_ms = ms(max(times))
    phases = step_phases(0.0, None if fwd is None else ms(fwd), None if opt_start is None else ms(opt_start),
                     None if opt_end is None else ms(opt_end), last_ms)
    if not phases:
        phase_source = "none: the snapshot has no forward mark and its stacks do not show where backward began"
    runner = ("step", "profile_step")
    # a history recorded without stacks (record_cuda_history("none")) names no owner
    has_stacks = any(e.get("frames") for e in trace if e["action"] == "alloc")

    # replay
    seg_starts = sorted(segments)
    alloc_starts = sorted(allocated)
    live = sum(allocated.values())
    start_bytes = live
    alive: dict[int, LiveAllocation] = {}
    sizes = dict(allocated)
    replay = Replay()
    replay.add(0.0, live, alive)
    n_events = 0
    for e in trace:
        a, addr = e["action"], e["addr"]
        if a == "segment_alloc":
            segments[addr] = e["size"]
            bisect.insort(seg_starts, addr)
            continue
        if a == "segment_free":
            segments.pop(addr, None)
            i = bisect.bisect_left(seg_starts, addr)
            if i < len(seg_starts) and seg_starts[i] == addr:
                seg_starts.pop(i)
            continue
        if a not in ("alloc", "free_completed"):
            continue
        n_events += 1
        x = ms(e["time_us"])
        if a == "alloc":
            size = _block_size(addr, e["size"], seg_starts, segments, alloc_starts) if exact else round_size(e["size"])
            sizes[addr] = size
            bisect.insort(alloc_starts, addr)
            live += size
            frames = e.get("frames", [])
            in_backward = phase_at(phases, x) == "backward"
            owner = cuda_owner_name(frames, in_backward, runner) if has_stacks else NO_STACKS_OWNER
            alive[addr] = LiveAllocation(size, owner, x, _user_frames(frames))
        else:
            live -= sizes.pop(addr, round_size(e["size"]))
            alive.pop(addr, None)
            i = bisect.bisect_left(alloc_starts, addr)
            if i < len(alloc_starts) and alloc_starts[i] == addr:
                alloc_starts.pop(i)
        replay.add(x, live, alive)
    method = ("CUDA allocator snapshot: its trace replayed on the allocator's address map (blocks: requests "
              "rounded to 512 B; a large block left whole when at most 1 MiB would remain), from the "
              "blocks allocated at the trace's start" + ("" if exact else
              "; approximate: expandable segments or roundup_power2_divisions are set, blocks taken as "
              "rounded requests"))
    return finish_series(replay, label=label, device="cuda", phases=phases, phase_source=phase_source,
                   start_bytes=start_bytes, events=n_events, source=source, method=method, max_points=max_points,
                   reconstruction_error_bytes=live - end_allocated)


def _block_size(addr: int, requested: int, seg_starts: list[int], segments: dict[int, int],
                alloc_starts: list[int]) -> int:
    """The block a request at `addr` got: its rounded size, or in the large pool the whole free block
    when splitting it would leave at most SMALL_SIZE_BYTES (the free block runs to the next allocated
    block or the segment's end: the allocator merges neighbouring free blocks)."""
    r = round_size(requested)
    if r <= SMALL_SIZE_BYTES:
        return r
    i = bisect.bisect_right(seg_starts, addr) - 1
    if i < 0:
        return r
    seg_end = seg_starts[i] + segments[seg_starts[i]]
    if addr >= seg_end:
        return r
    j = bisect.bisect_right(alloc_starts, addr)
    free_end = min(seg_end, alloc_starts[j]) if j < len(alloc_starts) else seg_end
    free = free_end - addr
    return free if r <= free <= r + SMALL_SIZE_BYTES else r


def _inferred_forward_end(trace: list[dict[str, Any]], loss_frame: str, before_us: int | None) -> int | None:
    """The time of the last allocation whose stack runs through `loss_frame` before the first allocation
    of backward (no Python stack, or a stack through torch's backward)."""
    last = None
    for e in trace:
        if e["action"] != "alloc":
            continue
        if before_us is not None and e["time_us"] >= before_us:
            break
        frames = e.get("frames", [])
        names = {f["name"] for f in frames}
        if not frames or "backward" in names and any("torch/_tensor.py" in f["filename"] for f in frames):
            return last
        if loss_frame in names:
            last = e["time_us"]
    return None
