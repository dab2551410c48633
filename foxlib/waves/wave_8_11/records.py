"""Wave 8.11's measurement, typed: `Measurement` (measurement.json through to_dict / from_dict, checked on
load): profiles per model and precision, the TFT's step times, the accuracy runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from foxlib.core.schema import WaveMeasurement
from foxlib.harness.timing import Timing
from foxlib.harness.training import Degradation, HarnessSettings, TrainResult
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.tolerances import FailedPrediction, predicted_profile

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`: a CUDA profile's peak is the model peak, its workspaces apart."""


@dataclass(frozen=True)
class Measurement(WaveMeasurement, wave="8.11", version=SCHEMA_VERSION):
    """Wave 8.11's measurement: profiles per model and precision, the TFT's step times, the accuracy runs."""
    precisions: list[str]
    candidate: str
    tft_config: dict[str, Any]
    memory: dict[str, dict[str, MemoryProfile]]
    """model -> precision -> the step's profile (its `peak` is the model peak)."""
    predicted: dict[str, dict[str, MemoryProfile | FailedPrediction]]
    """model -> precision -> predict_step's profile, or why it failed (stored as {"error": ...})."""
    timing: dict[str, Timing]
    """precision -> the TFT step's alternating samples (seconds)."""
    accuracy_preset: str
    accuracy_config: dict[str, Any]
    accuracy_runs: tuple[TrainResult, ...]
    accuracy: tuple[Degradation, ...]
    """foxlib.harness.training.degradation's rows: per precision and metric, against fp32."""
    accuracy_harness: HarnessSettings
    """The accuracy harness's configuration as run (foxlib.harness.training.HARNESS, resolved)."""

    PARTS: ClassVar[dict[str, Any]] = {"accuracy_runs": TrainResult, "accuracy": Degradation,
                                       "accuracy_harness": HarnessSettings}
    MANY: ClassVar[dict[str, Any]] = {  # timing per precision; memory and predicted per model, then precision
        "timing": Timing, "memory": lambda per: {p: MemoryProfile.from_dict(x) for p, x in per.items()},
        "predicted": lambda per: {p: predicted_profile(x) for p, x in per.items()}}

    def prediction_pairs(self) -> dict[str, tuple[MemoryProfile | FailedPrediction | None, MemoryProfile]]:
        """One per model and precision ("tft fp16")."""
        return {f"{name} {precision}": (self.predicted.get(name, {}).get(precision), prof)
                for name, per in self.memory.items() for precision, prof in per.items()}
