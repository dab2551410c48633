"""results.json, the machine-readable outcome of a wave (build), and measurement.json beside it (a wave's measure():
measures)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from foxlib.core.budgets import Check, verdict
from foxlib.core.critical_path import WAVES
from foxlib.core.schema import WaveMeasurement

RESULTS_FILE = "results.json"
MEASUREMENT_FILE = "measurement.json"
SCHEMA_VERSION = 2  # 2: measured_at_revision, rendered_at_revision, depends_on
M = TypeVar("M", bound=WaveMeasurement)


def json_safe(obj: Any) -> Any:
    """JSON-safe, as a file holds it: NaN and infinities become null, tuples lists, numpy scalars Python numbers, a
    record (foxlib.core.schema) its to_dict()."""
    if dataclasses.is_dataclass(obj) and hasattr(obj, "to_dict"):
        return json_safe(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def measured_revision(measurement: Mapping[str, Any] | WaveMeasurement) -> str | None:
    """The revision a measurement was made at: a results or benchmark file's measured_at_revision, else its
    environment's git_revision (a measurement.json, as data or typed: WaveMeasurement, which holds only that)."""
    if isinstance(measurement, WaveMeasurement):
        return measurement.environment.git_revision
    return measurement.get("measured_at_revision") or (measurement.get("environment") or {}).get("git_revision")


def measures(record: type[M]) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., M]]:
    """Makes a wave's data-producing function (its parameters by keyword, returning measurement.json's data but the
    header) the wave's measure(**parameters, keep=None): `record` (its records.Measurement) of the header (wave,
    measured_at, measure_parameters: the parameters as given) and that data, checked as its file is read (json_safe:
    NaN null), so that measured now and loaded read alike. keep: where the data is written as measured if the check
    refuses it (`python -m foxlib measure`: a long GPU run is not lost, and the error names the file)."""
    def decorate(produce: Callable[..., dict[str, Any]]) -> Callable[..., M]:
        @functools.wraps(produce)
        def measure(*, keep: Path | None = None, **parameters: Any) -> M:
            started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            data = json_safe({"wave": record.WAVE, "measured_at": started, "measure_parameters": parameters,
                              **produce(**parameters)})
            try:
                return record.from_dict(data, str(keep or "the measurement"))
            except ValueError:
                if keep:
                    write_json(keep, data)
                raise
        return measure
    return decorate


def build(wave: str, parameters: dict[str, Any], measurement: dict[str, Any], checks: list[Check],
          **extra: Any) -> dict[str, Any]:
    from foxlib.core import provenance
    return json_safe({
        "wave": wave,
        "title": WAVES[wave].title,
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "measured_at": measurement.get("measured_at"),
        "device": measurement["device"],
        "environment": measurement.get("environment", {}),
        # measured elsewhere (the measurements parameter): the parameters of that measurement, not the defaults; the
        # file it was rendered from is named as the report keeps it (MEASUREMENT_FILE, beside results.json), not by
        # the path it had on the machine that rendered it
        "parameters": {k: (MEASUREMENT_FILE if k == "measurements" and v else v)
                       for k, v in {**parameters, **measurement.get("measure_parameters", {})}.items()
                       if k != "output_dir"},
        "schema_version": SCHEMA_VERSION,
        "measured_at_revision": measured_revision(measurement),
        "rendered_at_revision": provenance.git_revision(),
        # the published results this measurement read (wave 8.13: 8.12's recommendation), by path, revision, sha256
        "depends_on": list(measurement.get("depends_on") or []),
        "verdict": verdict(checks),
        "checks": [c.to_dict() for c in checks],
        **extra,
    })


def write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` atomically (a temporary file beside it, then renamed; removed on failure): two runs
    finishing together each write a whole file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write `data` to `path` as JSON, atomically (write_text)."""
    return write_text(path, json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")


def read_json(path: str | Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); it may be truncated") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, not a JSON file") from None
