"""The TFT that wave 8.13 validates: wave 8.12's recommended configuration for the device, read from
8.12's results.json and cited (foxlib.core.provenance), or the configuration the tft_config parameter
gives; the plain fp32 TFT of the preset where 8.12 has no report."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from foxlib.core import config, provenance, results
from foxlib.memory.step import check_precision
from foxlib.harness.step_options import StepOptions
from foxlib.models import MODELS

RECOMMENDING_WAVE = "8.12"
TFT_CONFIG_EXAMPLE = '{"precision": "bf16", "checkpointing": "blocks", "memory_efficient": true}'


def recommendation_file(device_short: str, reports_dir: str | Path | None = None) -> Path:
    """Where wave 8.12 writes its results (with its "recommended" configuration) for a device."""
    return Path(reports_dir or config.REPORTS_DIR) / device_short / f"wave-{RECOMMENDING_WAVE}" / results.RESULTS_FILE


def _precision_and_overrides(rec: Any, source: str) -> tuple[str, dict[str, Any]]:
    """8.12's {"precision", "tft_overrides": {...}} or the parameter's flat {"precision", field: value}."""
    if not isinstance(rec, dict):
        raise ValueError(f"tft_config from {source} must be a JSON object such as {TFT_CONFIG_EXAMPLE}, got {rec!r}")
    nested = rec.get("tft_overrides") or {}
    if not isinstance(nested, dict):
        raise ValueError(f"tft_config from {source}: tft_overrides must be an object of TFT fields, got {nested!r}")
    if "tft_overrides" in rec:  # 8.12's recommendation: its other keys (strategy, peak_bytes, reason...) describe it
        overrides = dict(nested)
    else:
        overrides = {k: v for k, v in rec.items()
                     if k not in ("precision", "cuda_graph", "options", "cublas_workspace")}
    precision = rec.get("precision") or overrides.get("precision") or "fp32"
    overrides.pop("precision", None)
    try:
        check_precision(precision)
    except ValueError as exc:
        raise ValueError(f"tft_config from {source}: {exc}") from None
    return precision, overrides


def resolve_tft(tft_config: str, preset: str, device_short: str,
                reports_dir: str | Path | None = None, card_class: str | None = None) -> dict[str, Any]:
    """The TFT to validate: {"config", "precision", "overrides", "source", "recommended", "depends_on" (Citations)},
    with "cuda_graph" and "options" for a captured step, "cublas_workspace" where 8.12 advises one. `tft_config`
    "auto": 8.12's recommendation for this device (and `card_class`), cited; without one the plain fp32 TFT.
    Otherwise a JSON object, e.g. TFT_CONFIG_EXAMPLE; an unknown field or precision is a ValueError."""
    text = (tft_config or "").strip()
    recommended = False
    depends_on: list[provenance.Citation] = []
    if text in ("", "auto"):
        path = recommendation_file(device_short, reports_dir)
        shown, plain = provenance.display_path(path), f"the plain fp32 TFT of preset {preset!r}"
        rec: Any = {}
        if not path.is_file():
            source = f"fallback: no wave {RECOMMENDING_WAVE} report for device {device_short!r} ({shown}); {plain}"
        else:
            res = results.read_json(path)  # ValueError when truncated: a broken file is an error, not a fallback
            per_class = res.get("recommended_per_class") or {}
            if card_class and card_class in per_class:
                rec = per_class[card_class]
            elif card_class and per_class:
                raise ValueError(f"wave {RECOMMENDING_WAVE}'s report ({shown}) recommends for "
                                 f"the card classes {', '.join(per_class)}, not {card_class!r}")
            else:
                rec = res.get("recommended")
            if rec:
                recommended = True
                depends_on.append(provenance.cite(path, res))
                which = f" for the {card_class} class" if card_class and card_class in per_class else ""
                source = (f"wave {RECOMMENDING_WAVE}'s recommendation{which} ({shown}, generated "
                          f"{res.get('generated_at', '?')}, verdict {res.get('verdict', '?')})")
            else:
                rec = {}
                source = (f"fallback: wave {RECOMMENDING_WAVE}'s report ({shown}) holds no \"recommended\" "
                          f"configuration (verdict {res.get('verdict', '?')}); {plain}")
    else:
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tft_config must be 'auto' or a JSON object such as {TFT_CONFIG_EXAMPLE}; "
                             f"got {text!r} ({exc})") from None
        source = "the tft_config parameter"
    precision, overrides = _precision_and_overrides(rec, source)
    try:
        cfg = MODELS["tft"].config(preset, **overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"tft_config from {source}: {exc}") from None
    try:
        options = StepOptions.from_dict(rec.get("options"))
    except ValueError as exc:
        raise ValueError(f"tft_config from {source}: options: {exc}") from None
    out = {"config": cfg, "precision": precision, "overrides": overrides, "source": source,
           "recommended": recommended, "depends_on": depends_on}
    if rec.get("cuda_graph") or not options.is_default:  # graph mode: wave 8.12 recommended a captured step
        out.update(cuda_graph=bool(rec.get("cuda_graph")), options=options.to_dict())
    if rec.get("cublas_workspace"):  # 8.12 measured it with a small cuBLAS workspace and advises it
        if not isinstance(rec["cublas_workspace"], str):
            raise ValueError(f"tft_config from {source}: cublas_workspace must be a string such as ':16:8', "
                             f"got {rec['cublas_workspace']!r}")
        out["cublas_workspace"] = rec["cublas_workspace"]
    return out
