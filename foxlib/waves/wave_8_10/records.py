"""Wave 8.10's measurement, typed: `Measurement` (measurement.json through to_dict / from_dict, checked
on load), read by every check, table and figure of the wave."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from foxlib.core.schema import check_fields, typing_parts
from foxlib.harness.measure_step import ModelMeasurement
from foxlib.models import ENSEMBLE

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`: a CUDA profile's peak is the model peak, its workspaces apart."""

_MODELS = ("tft", "ensemble", "target_state")


@dataclass(frozen=True)
class Measurement:
    """Wave 8.10's measurement (measure()'s data, with the runner's wave, measured_at and measure_parameters)."""
    wave: str
    measured_at: str
    measure_parameters: dict[str, Any]
    device: dict[str, Any]
    environment: dict[str, Any]
    tft: ModelMeasurement
    theory: dict[str, Any]
    ensemble: dict[str, ModelMeasurement]
    target_state: dict[str, ModelMeasurement]
    """The seed's target configuration (TARGET_PRECISION, the TFT checkpointed), each model; empty if not measured."""
    snapshot: str
    depends_on: list[dict[str, Any]]
    second_opinion: dict[str, Any] | None
    """torch.profiler's categories of the TFT's step (None: not measured)."""
    bare_context: dict[str, Any] | None
    """CUDA: the context and the first cuBLAS workspace measured at the start (bare_context()); None on the CPU."""
    target_state_kernels: dict[str, Any] | None
    """Where the target state was predicted, not run: the fp16 kernel probe (measuring.slow_target); else None."""
    schema_version: int

    @property
    def models(self) -> dict[str, ModelMeasurement]:
        """Every measured model, in the ensemble's order (the TFT included)."""
        every = {**self.ensemble, "tft": self.tft}
        return {k: every[k] for k in ENSEMBLE if k in every} | {k: v for k, v in every.items() if k not in ENSEMBLE}

    @property
    def target_state_predicted(self) -> bool:
        """True where any model of the target state was predicted, not run (target_state_kernels says why)."""
        return any(v.predicted_only for v in self.target_state.values())

    @property
    def on_cuda(self) -> bool:
        return self.tft.profile.cuda is not None

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _MODELS}
        d["tft"] = self.tft.to_dict()
        d["ensemble"] = {k: v.to_dict() for k, v in self.ensemble.items()}
        d["target_state"] = {k: v.to_dict() for k, v in self.target_state.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "the measurement") -> "Measurement":
        """The measurement in `d` (measurement.json's data); a ValueError naming what is wrong (check_fields)."""
        check_fields(d, "8.10", SCHEMA_VERSION, cls, source)
        with typing_parts("8.10", source):
            return cls(**{**d, "tft": ModelMeasurement.from_dict(d["tft"]),
                          "ensemble": {k: ModelMeasurement.from_dict(v) for k, v in d["ensemble"].items()},
                          "target_state": {k: ModelMeasurement.from_dict(v) for k, v in d["target_state"].items()}})
