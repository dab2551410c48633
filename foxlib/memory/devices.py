"""Which device to measure on, and the short name its reports are filed under."""
from __future__ import annotations

import contextlib
import platform
import re

import torch

from foxlib.core.schema import Device, Environment


class DeviceError(RuntimeError):
    """The requested device is not available here."""


def resolve_device(requested: str = "auto") -> torch.device:
    """"auto" -> CUDA if present, else CPU; "cuda" where there is none is a DeviceError."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(f"device {requested!r} was asked for, but this machine has no CUDA GPU "
                              f"(torch {torch.__version__}); use device=cpu or device=auto")
        dev = torch.device(requested)
        # with its index: some torch.cuda calls (set_per_process_memory_fraction) refuse a bare "cuda"
        return dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
    if requested == "cpu":
        return torch.device("cpu")
    raise DeviceError(f"unknown device {requested!r}; valid devices: auto, cpu, cuda, cuda:N")


def short_name(device: torch.device) -> str:
    """"cpu", or the GPU's model in lower case ("NVIDIA H200" -> "h200")."""
    if device.type != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name(device)
    for token in re.split(r"[\s\-_]+", name):
        if re.search(r"\d", token) and token.upper() not in ("NVIDIA",):
            return re.sub(r"[^a-z0-9]", "", token.lower())
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def cpu_name() -> str:
    """The processor's model name (/proc/cpuinfo), else what the platform says."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "CPU"


def describe(device: torch.device) -> Device:
    """What a report records about where it was measured."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return Device("cuda", torch.cuda.get_device_name(device), short_name(device),
                      total_memory_bytes=int(props.total_memory), capability=f"{props.major}.{props.minor}")
    return Device("cpu", cpu_name(), "cpu", threads=torch.get_num_threads())


def environment() -> Environment:
    """Versions and revision a report was made with."""
    driver = None
    if torch.cuda.is_available():
        from foxlib.memory.cuda import nvml_view
        driver = nvml_view(torch.device("cuda")).get("driver") or None  # None where NVML does not say: not written
    from foxlib.core.provenance import git_revision
    return Environment(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
                       platform=platform.platform(), driver=driver,
                       git_revision=git_revision())  # FOXLIB_GIT_REVISION on a copy of the tree without .git
