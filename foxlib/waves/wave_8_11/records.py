"""Wave 8.11's measurement, typed: `Measurement` (measurement.json through to_dict / from_dict, checked on
load): profiles per model and precision, the TFT's step times, the accuracy runs."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from foxlib.core.schema import check_fields, typing_parts
from foxlib.harness.timing import Timing
from foxlib.memory.profile import MemoryProfile

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`: a CUDA profile's peak is the model peak, its workspaces apart."""


@dataclass(frozen=True)
class Measurement:
    """Wave 8.11's measurement: profiles per model and precision, the TFT's step times, the accuracy runs."""
    wave: str
    measured_at: str
    measure_parameters: dict[str, Any]
    device: dict[str, Any]
    environment: dict[str, Any]
    precisions: list[str]
    candidate: str
    tft_config: dict[str, Any]
    memory: dict[str, dict[str, MemoryProfile]]
    """model -> precision -> the step's profile (its `peak` is the model peak)."""
    predicted: dict[str, dict[str, Any]]
    """model -> precision -> predict_step's profile as a dict (or {"error": ...})."""
    timing: dict[str, Timing]
    """precision -> the TFT step's alternating samples (seconds)."""
    accuracy_preset: str
    accuracy_config: dict[str, Any]
    accuracy_runs: list[dict[str, Any]]
    accuracy: list[dict[str, Any]]
    accuracy_harness: dict[str, Any]
    """The accuracy harness's configuration as run (foxlib.harness.training.HARNESS, resolved)."""
    schema_version: int

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["memory"] = {n: {p: prof.to_dict() for p, prof in per.items()} for n, per in self.memory.items()}
        d["timing"] = {p: t.to_dict() for p, t in self.timing.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "the measurement") -> "Measurement":
        """The measurement in `d` (measurement.json's data); a ValueError naming what is wrong (check_fields)."""
        check_fields(d, "8.11", SCHEMA_VERSION, cls, source)
        with typing_parts("8.11", source):
            return cls(**{**d, "memory": {n: {p: MemoryProfile.from_dict(x) for p, x in per.items()}
                                          for n, per in d["memory"].items()},
                          "timing": {p: Timing.from_dict(t) for p, t in d["timing"].items()}})
