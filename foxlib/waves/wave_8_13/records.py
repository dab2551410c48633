"""The typed record of a wave 8.13 measurement: frozen dataclasses (`Measurement` and its parts), JSON
through to_dict / from_dict, SCHEMA_VERSION (a schema-1 file loads with its missing parts marked
"not measured"). `record()` reads what measure() returns or measurement.json holds."""
from __future__ import annotations

import dataclasses
from typing import Any

from foxlib.core.schema import readable_version


SCHEMA_VERSION = 2
"""2: the warm-up before the context, NVML's per-process figure sampled through the run, depends_on.
1 (files without "schema_version"): neither; they load with an empty NVML series and no citation."""

_PHASE_FIELDS = ("peak_bytes", "peak_allocated_bytes", "oom", "context_end_bytes", "nvml_end", "allocator_end")


@dataclasses.dataclass(frozen=True)
class Citation:
    """A results file this measurement read (foxlib.core.provenance.cite): path, revision, sha256 of its bytes."""
    path: str
    revision: str | None
    sha256: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Citation":
        return cls(str(d["path"]), d.get("revision"), str(d["sha256"]))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Cap:
    """The allocator cap (bytes): cap = card − CUDA context (or cap_bytes), the limit the run is checked against."""
    card_bytes: int
    context_bytes: int
    cap_bytes: int
    limit_bytes: int
    enforced: bool
    override: bool
    how: str
    fraction: float | None = None
    device_total_bytes: int | None = None
    reserved_at_cap_bytes: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Cap":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["reserved_at_cap_bytes"] is None:  # none on the CPU
            del out["reserved_at_cap_bytes"]
        return out


@dataclasses.dataclass(frozen=True)
class NvmlSeries:
    """NVML's per-process figure sampled through training and inference: (seconds, phase, bytes or None)."""
    applicable: bool
    note: str
    interval_s: float | None = None
    samples: tuple[tuple[float, str, int | None], ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "NvmlSeries":
        if d is None:
            return cls(False, "not sampled: measured before NVML's per-process figure was sampled through the run "
                              "(schema 1); re-measure for this check")
        return cls(bool(d["applicable"]), d.get("note", ""), d.get("interval_s"),
                   tuple((float(t), str(p), None if v is None else int(v)) for t, p, v in d.get("samples") or ()))

    def to_dict(self) -> dict[str, Any]:
        return {"applicable": self.applicable, "note": self.note, "interval_s": self.interval_s,
                "samples": [list(s) for s in self.samples]}

    def values(self, phase: str | None = None) -> list[int | None]:
        return [v for _, p, v in self.samples if phase is None or p == phase]


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the interleaved training run (bytes, seconds). CUDA: allocated at its start and at its
    peak (all models), reserved peak; CPU: the accounting walk's figures, reserved None."""
    model: str
    step: int
    loss: float | None
    seconds: float
    start_bytes: int
    peak_bytes: int
    reserved_peak_bytes: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Step":
        return cls(d["model"], int(d["step"]), d.get("loss"), float(d["seconds"]), int(d["start_bytes"]),
                   int(d["peak_bytes"]), d.get("reserved_peak_bytes"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def rise_bytes(self) -> int:
        """What the step added at its peak over what was allocated at its start."""
        return self.peak_bytes - self.start_bytes


@dataclasses.dataclass(frozen=True)
class Phase:
    """Training or inference: the figures the checks use (bytes), the training steps, the rest as
    measured (`detail`: per-model summaries, inference latencies, how each figure was taken)."""
    peak_bytes: int | None
    peak_allocated_bytes: int | None
    oom: dict[str, Any] | None
    context_end_bytes: int | None
    nvml_end: dict[str, Any] | None
    allocator_end: dict[str, Any] | None
    detail: dict[str, Any]
    steps: tuple[Step, ...] | None = None
    """Training: every step run, in order; inference: None."""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Phase":
        steps = None if "steps" not in d else tuple(Step.from_dict(s) for s in d["steps"])
        return cls(*(d.get(k) for k in _PHASE_FIELDS),
                   {k: v for k, v in d.items() if k not in _PHASE_FIELDS and k != "steps"}, steps)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.detail)
        if self.steps is not None:
            out["steps"] = [s.to_dict() for s in self.steps]
        for k in _PHASE_FIELDS:
            value = getattr(self, k)
            if value is not None or k in ("oom", "peak_bytes"):
                out[k] = value
        return out

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in _PHASE_FIELDS else self.detail.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key) if key in _PHASE_FIELDS else self.detail[key]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Wave 8.13's measurement: what `measure` returns (with the notebook's wave, measured_at and
    measure_parameters), typed. JSON through to_dict / from_dict; unknown keys are kept in `extra`;
    `schema_version` stays the one it was measured with (a schema-1 file keeps 1, its missing parts
    filled as "not measured")."""
    wave: str
    device: dict[str, Any]
    environment: dict[str, Any]
    order: tuple[str, ...]
    steps: int
    tft: dict[str, Any]
    models: dict[str, dict[str, Any]]
    cap: Cap
    training: Phase
    inference: Phase
    nvml: NvmlSeries
    depends_on: tuple[Citation, ...] = ()
    measured_at: str | None = None
    measure_parameters: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    context_before_warmup: dict[str, Any] | None = None
    warmup: dict[str, Any] | None = None
    step_profiles: dict[str, dict[str, Any]] | None = None
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        version = readable_version(d, "8.13", SCHEMA_VERSION)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(wave=str(d.get("wave", "8.13")), device=d["device"], environment=d.get("environment") or {},
                   order=tuple(d["order"]), steps=int(d["steps"]), tft=d["tft"], models=d["models"],
                   cap=Cap.from_dict(d["cap"]), training=Phase.from_dict(d["training"]),
                   inference=Phase.from_dict(d["inference"]),
                   nvml=NvmlSeries.from_dict(d.get("nvml")),
                   depends_on=tuple(Citation.from_dict(c) for c in d.get("depends_on") or ()),
                   measured_at=d.get("measured_at"), measure_parameters=d.get("measure_parameters"),
                   context=d.get("context"), context_before_warmup=d.get("context_before_warmup"),
                   warmup=d.get("warmup"), step_profiles=d.get("step_profiles"), schema_version=version,
                   extra={k: v for k, v in d.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": self.schema_version, "wave": self.wave}
        for k in ("measured_at", "measure_parameters"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        out.update({"device": self.device, "environment": self.environment, "order": list(self.order),
                    "steps": self.steps, "tft": self.tft, "models": self.models,
                    "depends_on": [c.to_dict() for c in self.depends_on], "context": self.context})
        for k in ("context_before_warmup", "warmup"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        out["cap"] = self.cap.to_dict()
        if self.step_profiles is not None:
            out["step_profiles"] = self.step_profiles
        out.update({"training": self.training.to_dict(), "inference": self.inference.to_dict(),
                    "nvml": self.nvml.to_dict(), **self.extra})
        return out

    @property
    def enforced(self) -> bool:
        return self.cap.enforced

    def phase(self, name: str) -> Phase:
        if name not in ("training", "inference"):
            raise ValueError(f"unknown phase {name!r}; valid: training, inference")
        return getattr(self, name)


def record(m: "Measurement | dict[str, Any]") -> Measurement:
    """The typed record of a measurement (a dict as `measure` returns it or measurement.json holds it)."""
    return m if isinstance(m, Measurement) else Measurement.from_dict(m)


def citations(m: "Measurement | dict[str, Any]") -> list[dict[str, Any]]:
    """The measurement's depends_on, as foxlib.core.provenance.verify takes it."""
    return [c.to_dict() for c in record(m).depends_on]
