"""The cap and running out of it. On CUDA: the context, the allocator cap = card − context (`cap_arithmetic`),
the views at a phase's end, an out-of-memory error as data (`cuda_oom`). On the CPU, where nothing can be capped:
the interleaved run accounted on paper (`account_training`), stopping where the cap would be exceeded; every
such figure is labelled NOT_ENFORCED."""
from __future__ import annotations

import re
from typing import Any

import torch

from foxlib.core.config import MB
from foxlib.memory.cuda import allocator_stats, bare_context, nvml_view
from foxlib.waves.wave_8_13.records import Context

NOT_ENFORCED = "not enforced (accounting)"
GIB = 2**30  # a card of card_gb "GB" holds card_gb × 2^30 bytes


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def measure_context(device: torch.device) -> Context:
    """The CUDA context (wave 8.10's bare_context: NVML process usage minus the allocator's reserve).
    Without NVML's per-process figure: device used minus reserved (all processes: an overestimate)."""
    ctx = bare_context(device)
    if ctx.context_bytes is not None:
        return Context(**ctx.to_dict(), how="NVML process used − allocator reserved, with one tiny tensor allocated")
    free, total = torch.cuda.mem_get_info(device)
    return Context(**ctx.to_dict() | {"context_bytes": int(total - free - torch.cuda.memory_reserved(device))},
                   how=f"device used − allocator reserved (cudaMemGetInfo; every process on the GPU, an "
                       f"overestimate): NVML's per-process figure is unavailable ({ctx.note})")


def cap_arithmetic(card_bytes: int, context_bytes: int, device_total_bytes: int,
                   cap_override: int = 0) -> dict[str, Any]:
    """cap = card − CUDA context, or `cap_override` (then the limit is that cap + the context, not the card);
    fraction = cap / device memory, what `torch.cuda.set_per_process_memory_fraction` takes. A card larger than the
    device is the device: a "4 GB" card shows CUDA less than 4 GiB, and checking its run against 4 GiB would pass a
    step that cannot fit it."""
    if card_bytes <= 0 or device_total_bytes <= 0 or context_bytes < 0 or cap_override < 0:
        raise ValueError(f"card and device memory must be positive, context and override not negative; got card "
                         f"{card_bytes}, device {device_total_bytes}, context {context_bytes}, override {cap_override}")
    card_bytes = min(card_bytes, device_total_bytes)
    cap = int(cap_override) if cap_override else max(int(card_bytes) - int(context_bytes), 0)
    return {"card_bytes": int(card_bytes), "context_bytes": int(context_bytes), "cap_bytes": cap,
            "fraction": min(cap / device_total_bytes, 1.0), "device_total_bytes": int(device_total_bytes),
            "limit_bytes": cap + int(context_bytes) if cap_override else int(card_bytes),
            "override": bool(cap_override)}


def end_view(out: dict[str, Any], device: torch.device) -> None:
    """NVML's process figure and the allocator's at the end of a phase, and the context they imply."""
    out["nvml_end"] = nvml_view(device)
    out["allocator_end"] = allocator_stats(device)
    used = out["nvml_end"].get("process_used_bytes")
    if used is not None:  # absent without NVML's process figure (records.Training reads absent as None)
        out["context_end_bytes"] = used - out["allocator_end"]["reserved_bytes"]


# ----------------------------------------------------------------------------- out of memory

_REQUEST = re.compile(r"Tried to allocate ([\d.]+) ?(bytes|B|KiB|MiB|GiB|TiB)")
_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def one_line(exc: BaseException, limit: int) -> str:
    return " ".join(str(exc).split())[:limit]


def requested_bytes(message: str) -> int | None:
    """The size of the allocation that failed, from PyTorch's out-of-memory message (rounded as printed)."""
    m = _REQUEST.search(message)
    return None if m is None else int(float(m.group(1)) * _UNITS[m.group(2)])


def is_oom(exc: BaseException) -> bool:
    """The caching allocator's OutOfMemoryError, or a library's failed allocation (cuBLAS/cuDNN
    ALLOC_FAILED, a driver-level "out of memory") surfacing as a RuntimeError."""
    text = str(exc)
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "ALLOC_FAILED" in text


def cuda_oom(exc: BaseException, phase: str, model: str | None, step: int | None,
             device: torch.device) -> dict[str, Any]:
    st = allocator_stats(device)
    req = requested_bytes(str(exc))
    return {"phase": phase, "model": model, "step": step, "error": one_line(exc, 400),
            "requested_bytes": req, "allocated_bytes": st["allocated_bytes"], "reserved_bytes": st["reserved_bytes"],
            "peak_allocated_bytes": st["allocated_peak_bytes"], "peak_reserved_bytes": st["reserved_peak_bytes"],
            "needed_bytes": st["reserved_bytes"] + (req or 0), "enforced": True}


# ----------------------------------------------------------------------------- the CPU: accounting

def resident_bytes(profile: dict[str, Any], stepped: bool) -> int:
    """What a model keeps between its steps: weights, its batch/buffers on the device and, once it
    has stepped, Adam's state (gradients are freed after each step)."""
    return profile["live_before_step"] - (0 if stepped else profile["optimizer_state"])


def account_training(profiles: dict[str, dict[str, Any]], order: list[str], steps: int, cap: int) -> dict[str, Any]:
    """The interleaved run on paper, from each model's measured step: loading the models one by one, then each
    step's peak plus what the others keep; stops at the first point over `cap` ("oom")."""
    out: dict[str, Any] = {"setup_bytes": 0, "steps": [], "oom": None}
    for name in order:
        out["setup_bytes"] += resident_bytes(profiles[name], False)
        if out["setup_bytes"] > cap:
            out["oom"] = accounting_oom("setup", name, None, out["setup_bytes"], cap)
            return out
    stepped: set[str] = set()
    for s in range(1, steps + 1):
        for name in order:
            others = sum(resident_bytes(profiles[j], j in stepped) for j in order if j != name)
            start = others + resident_bytes(profiles[name], name in stepped)
            live = others + profiles[name]["peak"]
            if live > cap:
                out["oom"] = accounting_oom("training", name, s, live, cap)
                return out
            out["steps"].append({"model": name, "step": s, "start_bytes": start, "peak_bytes": live})
            stepped.add(name)
    return out


def accounting_oom(phase: str, model: str | None, step: int | None, needed: int, cap: int) -> dict[str, Any]:
    where = f"loading {model}" if phase == "setup" else (f"step {step} of {model}" if step else phase)
    return {"phase": phase, "model": model, "step": step,  # in records.Oom's order, as its to_dict writes it
            "error": f"{NOT_ENFORCED}: {needed / MB:,.2f} MB would be live at {where}, over the cap of "
                     f"{cap / MB:,.2f} MB", "requested_bytes": None, "needed_bytes": int(needed), "enforced": False}
