"""The honest cap: the CUDA context measured (after the warm-up, warmup.py), the allocator cap = card −
context (`cap_arithmetic`), and the allocator's and NVML's view at the end of a phase, with the
context it implies (the context grows as CUDA loads kernels lazily)."""
from __future__ import annotations

from typing import Any

import torch

from foxlib.memory.cuda import allocator_stats, bare_context, nvml_view


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def measure_context(device: torch.device) -> dict[str, Any]:
    """The CUDA context (wave 8.10's bare_context: NVML process usage minus the allocator's reserve).
    Without NVML's per-process figure: device used minus reserved (all processes: an overestimate)."""
    ctx = bare_context(device) or {}
    if ctx.get("context_bytes") is not None:
        return {**ctx, "how": "NVML process used − allocator reserved, with one tiny tensor allocated"}
    free, total = torch.cuda.mem_get_info(device)
    reserved = torch.cuda.memory_reserved(device)
    return {**ctx, "context_bytes": int(total - free - reserved),
            "how": f"device used − allocator reserved (cudaMemGetInfo; every process on the GPU, an "
                   f"overestimate): NVML's per-process figure is unavailable ({ctx.get('note')})"}


def cap_arithmetic(card_bytes: int, context_bytes: int, device_total_bytes: int, cap_override: int = 0) -> dict[str, Any]:
    """The allocator cap for a card: cap = card − CUDA context (the context is outside the allocator), or
    `cap_override` bytes when given (then the limit is that cap + the context, not the card);
    fraction = cap / device memory, what `torch.cuda.set_per_process_memory_fraction` takes."""
    if card_bytes <= 0 or device_total_bytes <= 0 or context_bytes < 0 or cap_override < 0:
        raise ValueError(f"card and device memory must be positive, context and override not negative; got card "
                         f"{card_bytes}, device {device_total_bytes}, context {context_bytes}, override {cap_override}")
    cap = int(cap_override) if cap_override else max(int(card_bytes) - int(context_bytes), 0)
    return {"card_bytes": int(card_bytes), "context_bytes": int(context_bytes), "cap_bytes": cap,
            "fraction": min(cap / device_total_bytes, 1.0), "device_total_bytes": int(device_total_bytes),
            "limit_bytes": cap + int(context_bytes) if cap_override else int(card_bytes),
            "override": bool(cap_override)}


def end_view(out: dict[str, Any], device: torch.device) -> None:
    """NVML's process figure and the allocator's at the end of a phase, and the context they imply
    (it grows after the start: CUDA loads kernels lazily, cuDNN makes its handle at first use)."""
    out["nvml_end"] = nvml_view(device)
    out["allocator_end"] = allocator_stats(device)
    used = out["nvml_end"].get("process_used_bytes")
    out["context_end_bytes"] = None if used is None else used - out["allocator_end"]["reserved_bytes"]
