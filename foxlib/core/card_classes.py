"""The classes of device a user may train on, by what their kernels can do (CLASSES): a recommendation or a fit
holds for a class, not for the GPU it was measured on. On the fp16 class bf16 is emulated or refused and TF32
does not exist. The H200 can stand in for the fp16 class in memory (the same tensors, shapes and allocator), not
in speed (SM count, clocks) nor in the CUDA context (another card's driver and kernels): reports say so. A CPU runs
every precision, but only fp32 is recommended for the class: a 16-bit step is fast or many times slower depending
on the CPU's instruction set, so a 16-bit pick measured on one CPU does not hold for the class (`recommends`).
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
    recommends: tuple[str, ...] | None = None
    """The precisions a recommendation for the class may ship, where fewer than it runs; None: all it runs."""
    why_not: str = ""
    """Why the others are not recommended (the recommendation's reason says it)."""

    def allows(self, precision: str, tf32: bool = False) -> bool:
        """Whether a step in `precision` (with TF32 matmuls: foxlib.harness.step_options) runs on the class."""
        return precision in self.precisions and (self.tf32 or not tf32)

    def may_recommend(self, precision: str, tf32: bool = False) -> bool:
        """Whether a strategy in `precision` holds for every device of the class: it runs there (allows) and its
        speed does not depend on which device of the class it is (recommends)."""
        return self.allows(precision, tf32) and precision in (self.recommends or self.precisions)


CLASSES = (
    CardClass("bf16", "GPU with bf16 (compute capability 8.0+: A100, H100/H200, RTX 30xx/40xx)", "cuda",
              ("fp32", "fp16", "bf16"), True, (8, 0)),
    CardClass("fp16", "GPU without bf16 or TF32 (compute capability 7.x: V100, T4, RTX 20xx, GTX 1650 4 GB)", "cuda",
              ("fp32", "fp16"), False, (7, 0)),
    CardClass("cpu", "CPU (no GPU)", "cpu", ("fp32", "fp16", "bf16"), False, None, ("fp32",),
              "16-bit strategies are not recommended for CPUs: an AVX2-only CPU has no 16-bit matrix-product kernels "
              "and runs them through a conversion path many times slower than fp32 (foxlib.memory.cpu_support's probe "
              "tells the two apart), whatever the CPU measured here did"),
)
BY_NAME = {c.name: c for c in CLASSES}


def get_class(name: str) -> CardClass:
    if name not in BY_NAME:
        raise ValueError(f"unknown card class {name!r}; valid: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def classes_for(device_type: str) -> tuple[CardClass, ...]:
    """The classes a measurement on this device type answers for: a GPU's every GPU class, a CPU's the CPU."""
    return tuple(c for c in CLASSES if c.device_type == device_type)


def _gpu_class(capability: str | None) -> CardClass | None:
    """The GPU class whose compute capability a GPU reaches; None below every class or where it is unknown."""
    major, minor = (int(x) for x in (capability or "0.0").split(".")[:2])
    return next((c for c in CLASSES if c.min_capability is not None and (major, minor) >= c.min_capability), None)


def below_class(capability: str | None, device_type: str = "cuda") -> bool:
    """Whether a GPU is older than every class, or of unknown capability (nearest_class judges it)."""
    return device_type != "cpu" and _gpu_class(capability) is None


def nearest_class(capability: str | None, device_type: str = "cuda") -> CardClass:
    """The class of a device: "cpu", or a GPU's by its compute capability ("7.5" -> fp16, "9.0" -> bf16), where a GPU
    older than every class (a Pascal, 6.x) or of unknown capability counts as the fp16 class, whose limits it shares
    (no bf16, no TF32): what it measured is judged among what it runs."""
    return BY_NAME["cpu"] if device_type == "cpu" else _gpu_class(capability) or BY_NAME["fp16"]
