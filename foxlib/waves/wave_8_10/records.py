"""Wave 8.10's record: `Measurement`, measuring.py's data typed (to_dict/from_dict, with a schema
version), read by every check, table and figure of the wave."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foxlib.core.schema import readable_version
from foxlib.harness.measure_step import ModelMeasurement
from foxlib.models import ENSEMBLE

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`. 1 (files without "schema_version"): written before typed records, when a
CUDA profile's peaks held the workspaces (MemoryProfile.from_dict takes them out)."""

_TOP = ("wave", "measured_at", "measure_parameters", "device", "environment", "bare_context", "snapshot",
        "theory", "second_opinion", "depends_on", "target_state_kernels")


@dataclass(frozen=True)
class Measurement:
    """Wave 8.10's measurement (measure()'s data, plus the runner's wave/measured_at/measure_parameters)."""
    device: dict[str, Any]
    environment: dict[str, Any]
    tft: ModelMeasurement
    theory: dict[str, Any]
    ensemble: dict[str, ModelMeasurement] = field(default_factory=dict)
    target_state: dict[str, ModelMeasurement] = field(default_factory=dict)
    """The seed's target configuration (TARGET_PRECISION, TARGET_TFT), each model; empty if not measured."""
    second_opinion: dict[str, Any] | None = None
    bare_context: dict[str, Any] | None = None
    """CUDA: the context and the first cuBLAS workspace measured at the start (bare_context())."""
    snapshot: str = ""
    target_state_kernels: dict[str, Any] | None = None
    """Where the target state was predicted, not run: the fp16 kernel probe (measuring.slow_target); else None."""
    wave: str = "8.10"
    measured_at: str | None = None
    measure_parameters: dict[str, Any] = field(default_factory=dict)
    depends_on: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Top-level keys this record does not model (e.g. provenance added by the runner), kept as they are."""
    schema_version: int = SCHEMA_VERSION

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
        d = {**self.extra, "schema_version": SCHEMA_VERSION}
        d |= {k: getattr(self, k) for k in _TOP if k != "target_state_kernels" or self.target_state_kernels}
        d["tft"] = self.tft.to_dict()
        d["ensemble"] = {k: v.to_dict() for k, v in self.ensemble.items()}
        d["target_state"] = {k: v.to_dict() for k, v in self.target_state.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        readable_version(d, "8.10", SCHEMA_VERSION)
        known = set(_TOP) | {"tft", "ensemble", "target_state", "schema_version"}
        return cls(**{k: d[k] for k in _TOP if k in d},
                   tft=ModelMeasurement.from_dict(d["tft"]),
                   ensemble={k: ModelMeasurement.from_dict(v) for k, v in (d.get("ensemble") or {}).items()},
                   target_state={k: ModelMeasurement.from_dict(v) for k, v in (d.get("target_state") or {}).items()},
                   extra={k: v for k, v in d.items() if k not in known})

    @classmethod
    def coerce(cls, m: "Measurement | dict[str, Any]") -> "Measurement":
        return m if isinstance(m, cls) else cls.from_dict(m)
