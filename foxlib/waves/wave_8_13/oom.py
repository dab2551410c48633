"""Out-of-memory errors as plain data: a CUDA out-of-memory error (or a library's failed allocation)
recognised and recorded with what the allocator held, the size the failed allocation asked for, and
where a run ran out, in words."""
from __future__ import annotations

import re
from typing import Any

import torch

from foxlib.memory.cuda import allocator_stats


_REQUEST = re.compile(r"Tried to allocate ([\d.]+) ?(bytes|B|KiB|MiB|GiB|TiB)")
_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def requested_bytes(message: str) -> int | None:
    """The size of the allocation that failed, from PyTorch's out-of-memory message (rounded as printed)."""
    m = _REQUEST.search(message)
    return None if m is None else int(float(m.group(1)) * _UNITS[m.group(2)])


def cuda_oom(exc: BaseException, phase: str, model: str | None, step: int | None,
              device: torch.device) -> dict[str, Any]:
    msg = str(exc)
    st = allocator_stats(device)
    req = requested_bytes(msg)
    return {"phase": phase, "model": model, "step": step, "error": " ".join(msg.split())[:400],
            "requested_bytes": req, "allocated_bytes": st["allocated_bytes"], "reserved_bytes": st["reserved_bytes"],
            "peak_allocated_bytes": st["allocated_peak_bytes"], "peak_reserved_bytes": st["reserved_peak_bytes"],
            "needed_bytes": st["reserved_bytes"] + (req or 0), "enforced": True}


def is_oom(exc: BaseException) -> bool:
    """The caching allocator's OutOfMemoryError, or a library's failed allocation (cuBLAS/cuDNN
    ALLOC_FAILED, a driver-level "out of memory") surfacing as a RuntimeError."""
    text = str(exc)
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "ALLOC_FAILED" in text


def oom_where(oom: dict[str, Any] | None) -> str:
    if not oom:
        return ""
    if oom["phase"] == "setup":
        return f"while loading {oom['model']}"
    if oom["phase"] == "training":
        return f"at step {oom['step']} of {oom['model']}"
    model = oom.get("model")
    return f"during inference ({model})" if model else "during inference"
