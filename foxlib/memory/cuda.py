"""CUDA-only views of memory: the caching allocator's statistics and NVML's (nvidia-smi's) view.

NVML's process figure is the CUDA context (driver state, kernels, library handles) plus everything the allocator
has reserved; the allocator's `allocated` is what tensors use: NVML ≈ context + reserved, reserved ≥ allocated.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any

import torch

from foxlib.core.schema import Record


def allocator_stats(device: torch.device) -> dict[str, int]:
    """The allocator counters that matter, as of now (peaks since the last reset)."""
    s = torch.cuda.memory_stats(device)
    return {
        "allocated_bytes": s.get("allocated_bytes.all.current", 0),
        "allocated_peak_bytes": s.get("allocated_bytes.all.peak", 0),
        "reserved_bytes": s.get("reserved_bytes.all.current", 0),
        "reserved_peak_bytes": s.get("reserved_bytes.all.peak", 0),
        "requested_bytes": s.get("requested_bytes.all.current", 0),
        "inactive_split_bytes": s.get("inactive_split_bytes.all.current", 0),
        "alloc_retries": s.get("num_alloc_retries", 0),
        "ooms": s.get("num_ooms", 0),
    }


def nvml_handle(pynvml: Any, device: torch.device) -> Any:
    """NVML's handle of `device` (NVML started): the GPU of its UUID, else (a visible-device remapping we cannot
    match) the one of its index."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = str(torch.cuda.get_device_properties(index).uuid).replace("GPU-", "")
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        u = pynvml.nvmlDeviceGetUUID(h)
        if (u.decode() if isinstance(u, bytes) else u).replace("GPU-", "") == uuid:
            return h
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def nvml_view(device: torch.device) -> dict[str, Any]:
    """NVML's figures for this process and the device, with a note where the process is not found (in a container
    the PID NVML reports may not be ours)."""
    try:
        import pynvml
    except ImportError:
        return {"available": False, "note": "pynvml (nvidia-ml-py) is not installed"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError and driver-library errors
        return {"available": False, "note": f"NVML could not start: {exc}"}
    try:
        handle = nvml_handle(pynvml, device)
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        driver = pynvml.nvmlSystemGetDriverVersion()
        out: dict[str, Any] = {
            "available": True,
            "device_used_bytes": int(info.used),
            "device_total_bytes": int(info.total),
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
        }
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        mine = [p for p in procs if p.pid == os.getpid()]
        if mine and mine[0].usedGpuMemory is not None:
            out["process_used_bytes"] = int(mine[0].usedGpuMemory)
            out["note"] = "this process found in NVML's process list"
        elif len(procs) == 1 and procs[0].usedGpuMemory is not None:
            out["process_used_bytes"] = int(procs[0].usedGpuMemory)
            out["note"] = (f"NVML lists one process (pid {procs[0].pid}, ours is {os.getpid()}: "
                           "a container PID namespace); taken as this process")
        else:
            out["note"] = (f"this process (pid {os.getpid()}) is not in NVML's list of "
                           f"{len(procs)} processes; per-process usage unknown")
        return out
    except Exception as exc:
        return {"available": False, "note": f"NVML query failed: {exc}"}
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


@dataclasses.dataclass(frozen=True)
class BareContext(Record):
    """bare_context's figures (bytes): NVML's usage of this process (None: NVML gave none, `note` says why), the
    allocator's reserve, the context (the one less the other), what the first matrix product left allocated."""
    process_used_bytes: int | None
    reserved_bytes: int
    context_bytes: int | None
    note: str | None
    cublas_workspace_bytes: int


def bare_context(device: torch.device) -> BareContext | None:
    """NVML's usage of this process with almost nothing allocated (the context), and what the first matrix
    product leaves allocated (cuBLAS's workspace); None off CUDA."""
    if device.type != "cuda":
        return None
    x = torch.ones(8, 8, device=device)  # creates the context
    torch.cuda.synchronize(device)
    nvml = nvml_view(device)
    reserved = allocator_stats(device)["reserved_bytes"]
    used = nvml.get("process_used_bytes")
    before = torch.cuda.memory_allocated(device)
    (x @ x).sum().item()
    workspace = torch.cuda.memory_allocated(device) - before - 512  # the product's result: one 512 B block
    return BareContext(used, reserved, None if used is None else used - reserved, nvml.get("note"), max(workspace, 0))


CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"


def use_cublas_workspace(setting: str, device: torch.device) -> dict[str, Any]:
    """Ask for a cuBLAS workspace size (CUBLAS_WORKSPACE_CONFIG, e.g. ":16:8": 8 buffers of 16 KiB) and check that
    it holds: whether a size set after cuBLAS first read it sticks depends on the version, so a product on a new
    stream measures the workspace taken, then the workspaces are freed. {"asked", "applied", "workspace_bytes",
    "asked_bytes", "why"}."""
    pairs = re.fullmatch(r"(:\d+:\d+)+", setting or "") and re.findall(r":(\d+):(\d+)", setting)
    if not pairs:
        raise ValueError(f"a cuBLAS workspace setting looks like ':16:8' or ':4096:8' (KiB:buffers pairs), "
                         f"got {setting!r}")
    asked = sum(int(kib) * 1024 * int(n) for kib, n in pairs)
    os.environ[CUBLAS_WORKSPACE] = setting
    x = torch.ones(8, 8, device=device)
    stream = torch.cuda.Stream(device)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    with torch.cuda.stream(stream):
        y = x @ x
    torch.cuda.synchronize(device)
    got = max(torch.cuda.memory_allocated(device) - before - 512, 0)  # less the product: one 512 B block
    del x, y, stream
    torch._C._cuda_clearCublasWorkspaces()
    applied = got <= 2 * asked  # cuBLAS and cuBLASLt may each take one: never the default's MiBs
    return {"asked": setting, "applied": applied, "workspace_bytes": got, "asked_bytes": asked,
            "why": (f"a product on a new stream took a {got:,} B workspace ({asked:,} B asked)" if applied else
                    f"a product on a new stream took a {got:,} B workspace, not the {asked:,} B asked: cuBLAS had "
                    f"read its size before (set {CUBLAS_WORKSPACE} before the process starts)")}
