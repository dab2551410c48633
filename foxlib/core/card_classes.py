"""The classes of device a user may train on, by what their kernels can do (CLASSES): a recommendation or a fit
holds for a class, not for the GPU it was measured on. On the fp16 class bf16 is emulated or refused and TF32
does not exist. The H200 can stand in for the fp16 class in memory (the same tensors, shapes and allocator), not
in speed (SM count, clocks) nor in the CUDA context (another card's driver and kernels): reports say so.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CardClass:
    name: str
    title: str
    device_type: str  # "cuda" or "cpu"
    precisions: tuple[str, ...]
    tf32: bool
    min_capability: tuple[int, int] | None  # compute capability from which a GPU is in the class

    def allows(self, precision: str, tf32: bool = False) -> bool:
        """Whether a step in `precision` (with TF32 matmuls: foxlib.harness.step_options) runs on the class."""
        return precision in self.precisions and (self.tf32 or not tf32)


CLASSES = (
    CardClass("bf16", "GPU with bf16 (compute capability 8.0+: A100, H100/H200, RTX 30xx/40xx)", "cuda",
              ("fp32", "fp16", "bf16"), True, (8, 0)),
    CardClass("fp16", "GPU without bf16 or TF32 (compute capability 7.x: V100, T4, RTX 20xx, GTX 1650 4 GB)", "cuda",
              ("fp32", "fp16"), False, (7, 0)),
    CardClass("cpu", "CPU (no GPU)", "cpu", ("fp32", "fp16", "bf16"), False, None),
)
BY_NAME = {c.name: c for c in CLASSES}


def get_class(name: str) -> CardClass:
    if name not in BY_NAME:
        raise ValueError(f"unknown card class {name!r}; valid: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def classes_for(device_type: str) -> tuple[CardClass, ...]:
    """The classes a measurement on this device type answers for: a GPU's every GPU class, a CPU's the CPU."""
    return tuple(c for c in CLASSES if c.device_type == device_type)


def class_of(capability: str | None, device_type: str = "cuda") -> CardClass:
    """The class of a device: "cpu", or a GPU's by its compute capability ("7.5" -> fp16, "9.0" -> bf16)."""
    if device_type == "cpu":
        return BY_NAME["cpu"]
    major, minor = (int(x) for x in (capability or "0.0").split(".")[:2])
    for c in CLASSES:
        if c.min_capability is not None and (major, minor) >= c.min_capability:
            return c
    raise ValueError(f"compute capability {capability} is older than every class foxlib knows (7.0+)")
