"""The TFT that wave 8.13 validates: wave 8.12's recommended configuration for the device, read from
8.12's results.json and cited (foxlib.core.provenance), or the configuration the tft_config parameter
gives; the plain fp32 TFT of the preset where 8.12 has no report or recommends nothing (then still cited)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from foxlib.core import config, provenance, results
from foxlib.memory.step import check_precision
from foxlib.harness.step_options import StepOptions
from foxlib.models import MODELS
from foxlib.waves.wave_8_13.records import TftRun

RECOMMENDING_WAVE = "8.12"
TFT_CONFIG_EXAMPLE = '{"precision": "bf16", "checkpointing": "blocks", "memory_efficient": true}'


@dataclasses.dataclass(frozen=True)
class ResolvedTft:
    """The TFT a run validates (resolve_tft), typed once: its config (the TFT card's dataclass), how the run takes
    it (`run`: precision, overrides, source, step options...; what measurement.json records of it) and the results
    files it was read from (foxlib.core.provenance.cite's citations)."""
    config: Any
    run: TftRun
    depends_on: tuple[provenance.Citation, ...] = ()


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
    # 8.12's recommendation (tft_overrides): its other keys (strategy, peak_bytes, reason...) describe it
    overrides = dict(nested) if "tft_overrides" in rec else {
        k: v for k, v in rec.items() if k not in ("precision", "cuda_graph", "options", "cublas_workspace")}
    precision = rec.get("precision") or overrides.get("precision") or "fp32"
    overrides.pop("precision", None)
    return precision, overrides


def resolve_tft(tft_config: str, preset: str, device_short: str,
                reports_dir: str | Path | None = None, card_class: str | None = None) -> ResolvedTft:
    """The TFT to validate (ResolvedTft: its run records a captured step's cuda_graph and options, and the
    cublas_workspace where 8.12 advises one). `tft_config` "auto": 8.12's recommendation for this device (and
    `card_class`), cited; without one the plain fp32 TFT (the report cited where there is one). Otherwise a JSON
    object, e.g. TFT_CONFIG_EXAMPLE; an unknown field, option or precision is a ValueError."""
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
            depends_on.append(provenance.cite(path, res))  # read either way: a later 8.12 makes this run stale
            if rec and rec.get("strategy", True) is not None:  # 8.12 writes {"strategy": None, "reason"} for none
                recommended = True
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
        check_precision(precision)
        cfg = MODELS["tft"].config(preset, **overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"tft_config from {source}: {exc}") from None
    try:
        options = StepOptions.from_dict(rec.get("options"))
    except ValueError as exc:
        raise ValueError(f"tft_config from {source}: options: {exc}") from None
    workspace = rec.get("cublas_workspace") or None  # 8.12 measured it with a small cuBLAS workspace, advises it
    if workspace is not None and not isinstance(workspace, str):
        raise ValueError(f"tft_config from {source}: cublas_workspace must be a string such as ':16:8', "
                         f"got {workspace!r}")
    graph = bool(rec.get("cuda_graph"))
    captured = graph or not options.is_default  # graph mode: wave 8.12 recommended a captured step
    run = TftRun(precision, overrides, source, recommended, cuda_graph=graph if captured else None,
                 options=options if captured else None, cublas_workspace=workspace)
    return ResolvedTft(cfg, run, tuple(depends_on))
