"""Wave 8.11's record: `Measurement`, measuring.py's data typed (to_dict/from_dict, with a schema
version): profiles per model and precision, the TFT's step times, the accuracy runs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foxlib.core.schema import readable_version
from foxlib.harness.timing import Timing
from foxlib.memory.profile import MemoryProfile

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`. 1 (files without "schema_version"): written before typed records, when a
CUDA profile's peaks held the workspaces (MemoryProfile.from_dict takes them out)."""

_PLAIN = ("wave", "measured_at", "measure_parameters", "device", "environment", "precisions", "candidate",
          "tft_config", "accuracy_config", "accuracy_preset", "predicted", "accuracy_runs", "accuracy",
          "accuracy_harness")


@dataclass(frozen=True)
class Measurement:
    """Wave 8.11's measurement: profiles per model and precision, the TFT's step times, the accuracy runs."""
    device: dict[str, Any]
    environment: dict[str, Any]
    precisions: list[str]
    candidate: str
    memory: dict[str, dict[str, MemoryProfile]]
    """model -> precision -> the step's profile (its `peak` is the model peak)."""
    timing: dict[str, Timing]
    """precision -> the TFT step's alternating samples (seconds)."""
    accuracy_runs: list[dict[str, Any]]
    accuracy: list[dict[str, Any]]
    tft_config: dict[str, Any] = field(default_factory=dict)
    accuracy_config: dict[str, Any] = field(default_factory=dict)
    accuracy_preset: str = ""
    accuracy_harness: dict[str, Any] = field(default_factory=dict)
    """The accuracy harness's configuration as run (foxlib.harness.training.HARNESS, resolved)."""
    predicted: dict[str, dict[str, Any]] = field(default_factory=dict)
    wave: str = "8.11"
    measured_at: str | None = None
    measure_parameters: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    """Top-level keys this record does not model (e.g. provenance added by the runner), kept as they are."""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = {**self.extra, "schema_version": SCHEMA_VERSION}
        d |= {k: getattr(self, k) for k in _PLAIN}
        d["memory"] = {n: {p: prof.to_dict() for p, prof in per.items()} for n, per in self.memory.items()}
        d["timing"] = {p: t.to_dict() for p, t in self.timing.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        readable_version(d, "8.11", SCHEMA_VERSION)
        known = set(_PLAIN) | {"memory", "timing", "schema_version"}
        return cls(**{k: d[k] for k in _PLAIN if k in d},
                   memory={n: {p: MemoryProfile.from_dict(x) for p, x in per.items()} for n, per in d["memory"].items()},
                   timing={p: Timing(t.get("name", p), tuple(t["samples_s"])) for p, t in d["timing"].items()},
                   extra={k: v for k, v in d.items() if k not in known})

    @classmethod
    def coerce(cls, m: "Measurement | dict[str, Any]") -> "Measurement":
        return m if isinstance(m, cls) else cls.from_dict(m)


def plain(m: "Measurement | dict[str, Any]") -> dict[str, Any]:
    """The measurement as plain data (the accuracy tables read the runs' dicts)."""
    return m.to_dict() if isinstance(m, Measurement) else m
