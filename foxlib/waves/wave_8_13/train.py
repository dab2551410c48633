"""Training the ensemble interleaved, one step of each model in turn: on CUDA under the cap (an
out-of-memory error recorded, never raised), on the CPU along the accounting's plan (account.py),
stopping where it stops; and each model's summary of the run's steps."""
from __future__ import annotations

import gc
import math
import time
from typing import Any

import torch

from foxlib.harness.timing import Timing, sync_device
from foxlib.memory.cuda import allocator_stats
from foxlib.waves.wave_8_13.account import NOT_ENFORCED
from foxlib.waves.wave_8_13.cap import end_view, reset_peak
from foxlib.waves.wave_8_13.members import Member, load_member, static_footprints, step_member
from foxlib.waves.wave_8_13.nvml import Sampler
from foxlib.waves.wave_8_13.oom import cuda_oom, is_oom


def summarise_steps(steps: list[dict[str, Any]], order: list[str]) -> dict[str, dict[str, Any]]:
    """Per model, from the interleaved run's step records: steps run, losses, step time, peaks."""
    out = {}
    for name in order:
        mine = [s for s in steps if s["model"] == name]
        losses = [s["loss"] for s in mine if s.get("loss") is not None]
        out[name] = {
            "steps_run": len(mine),
            "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None,
            "non_finite_losses": sum(1 for v in losses if not math.isfinite(v)),
            "median_step_s": Timing(name, tuple(s["seconds"] for s in mine)).median_s if mine else None,
            "peak_bytes": max((s["peak_bytes"] for s in mine), default=None),
            "reserved_peak_bytes": max((s["reserved_peak_bytes"] for s in mine
                                        if s.get("reserved_peak_bytes") is not None), default=None),
            "step_increment_bytes": max((s["peak_bytes"] - s["start_bytes"] for s in mine), default=None),
        }
    return out


def train_cuda(members: list[Member], steps: int, device: torch.device, seed: int, bar,
                sampler: Sampler | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": [], "oom": None}
    reset_peak(device)
    current = None
    try:
        for m in members:
            current = m.name
            bar.describe(f"loading {m.name} on {device} under the cap")
            load_member(m, device, seed)
        sync_device(device)
    except RuntimeError as exc:  # OutOfMemoryError is one
        if not is_oom(exc):
            raise
        out["oom"] = cuda_oom(exc, "setup", current, None, device)
    st = allocator_stats(device)
    out["setup"] = {"bytes": st["allocated_bytes"], "peak_bytes": st["allocated_peak_bytes"],
                    "reserved_peak_bytes": st["reserved_peak_bytes"]}
    peak_alloc, peak_res = st["allocated_peak_bytes"], st["reserved_peak_bytes"]
    by_name = {m.name: m for m in members}
    if out["oom"] is None:
        for s in range(1, steps + 1):
            for name in (m.name for m in members):
                bar.describe(f"training step {s}/{steps} of {name} (interleaved, capped)")
                reset_peak(device)
                start = torch.cuda.memory_allocated(device)
                t0 = time.perf_counter()
                try:
                    loss = step_member(by_name[name], device)
                    sync_device(device)
                except RuntimeError as exc:
                    if not is_oom(exc):
                        raise
                    out["oom"] = cuda_oom(exc, "training", name, s, device)
                    break
                seconds = time.perf_counter() - t0
                if sampler is not None:
                    sampler.sample()
                st = allocator_stats(device)
                peak_alloc, peak_res = max(peak_alloc, st["allocated_peak_bytes"]), max(peak_res, st["reserved_peak_bytes"])
                out["steps"].append({"model": name, "step": s, "loss": loss, "seconds": seconds, "start_bytes": start,
                                     "peak_bytes": st["allocated_peak_bytes"],
                                     "reserved_peak_bytes": st["reserved_peak_bytes"]})
                bar.advance()
            if out["oom"] is not None:
                break
    if out["oom"] is not None:
        gc.collect()  # the failed step's tensors were held by the exception's frames
        peak_alloc = max(peak_alloc, out["oom"]["peak_allocated_bytes"])
        peak_res = max(peak_res, out["oom"]["peak_reserved_bytes"])
    out["models"] = static_footprints(members, device)
    out["peak_allocated_bytes"], out["peak_bytes"] = peak_alloc, peak_res
    out["peak_how"] = "CUDA allocator, capped: largest reserved (the figure against the cap); allocated beside it"
    end_view(out, device)
    return out


def train_cpu(members: list[Member], plan: dict[str, Any], steps: int, device: torch.device, seed: int,
               bar) -> dict[str, Any]:
    """The real interleaved run on the CPU; memory from the accounting `plan`, the run stopping where it does."""
    out: dict[str, Any] = {"steps": [], "oom": plan["oom"],
                           "setup": {"bytes": plan["setup_bytes"], "peak_bytes": plan["setup_bytes"],
                                     "reserved_peak_bytes": None}}
    if plan["oom"] is None or plan["oom"]["phase"] != "setup":
        for m in members:
            bar.describe(f"loading {m.name} on the CPU")
            load_member(m, device, seed)
        by_name = {m.name: m for m in members}
        for ev in plan["steps"]:
            bar.describe(f"training step {ev['step']}/{steps} of {ev['model']} (interleaved)")
            t0 = time.perf_counter()
            loss = step_member(by_name[ev["model"]], device)
            out["steps"].append({**ev, "loss": loss, "seconds": time.perf_counter() - t0, "reserved_peak_bytes": None})
            bar.advance()
    out["models"] = static_footprints(members, device)
    peaks = [plan["setup_bytes"]] + [s["peak_bytes"] for s in plan["steps"]]
    out["peak_allocated_bytes"] = out["peak_bytes"] = max(peaks)
    out["peak_how"] = (f"{NOT_ENFORCED}: each model's measured step peak plus what the other models keep "
                       "between their steps (weights, device batch/buffers, Adam state once stepped)")
    return out
