"""results.json: the machine-readable outcome of a wave (schema in shared/reference/contract.md)."""
from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

from foxlib.budgets import Check, verdict
from foxlib.waves import WAVES

RESULTS_FILE = "results.json"
MEASUREMENT_FILE = "measurement.json"


def _clean(obj: Any) -> Any:
    """JSON-safe: NaN and infinities become null, tuples lists, numpy scalars Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def build(wave: str, parameters: dict[str, Any], measurement: dict[str, Any], checks: list[Check],
          **extra: Any) -> dict[str, Any]:
    return _clean({
        "wave": wave,
        "title": WAVES[wave].title,
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "measured_at": measurement.get("measured_at"),
        "device": measurement["device"],
        "environment": measurement.get("environment", {}),
        # measured elsewhere (the measurements parameter): the parameters of that measurement, not the defaults
        "parameters": {k: v for k, v in {**parameters, **measurement.get("measure_parameters", {})}.items()
                       if k != "output_dir"},
        "verdict": verdict(checks),
        "checks": [c.to_dict() for c in checks],
        **extra,
    })


def write_json(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_clean(data), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def read_json(path: str | Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); it may be truncated") from None
