"""Checks of a wave's parameter values that can fail before anything runs or is written.

The parameters cell fixes names and types; this checks values whose valid set lives in the
code: presets, precisions, models, strategies, the budgets file and a measurement file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from foxlib import results
from foxlib.budgets import load_budgets
from foxlib.memory.profile import check_precision
from foxlib.models import MODELS


# counts that must be at least 1, and those that may be 0 (0: "none" or "the default")
POSITIVE = ("batch_size", "encoder_length", "steps", "timing_repeats", "inference_repeats", "accuracy_seeds",
            "accuracy_steps", "accuracy_eval_every", "accuracy_val_windows", "accuracy_batch_size")
NON_NEGATIVE = ("timing_warmup", "accuracy_patience", "cap_bytes", "inference_batch", "seed")


def _counts(params: dict[str, Any]) -> None:
    for key in POSITIVE + NON_NEGATIVE:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            low = 1 if key in POSITIVE else 0
            if value < low:
                raise ValueError(f"parameter {key!r} must be at least {low}, got {value}")


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def check(wave_id: str, params: dict[str, Any]) -> None:
    """Raise a ValueError (or BudgetsError) naming the valid choices for the first bad value."""
    load_budgets(params.get("budgets_file") or None)
    _counts(params)
    for key in ("preset", "ensemble_preset"):
        if key in params:
            for card in MODELS.values():
                card.preset(params[key])
    if params.get("accuracy_preset", "auto") != "auto":
        MODELS["tft"].preset(params["accuracy_preset"])
    if "accuracy_target" in params:
        from foxlib.training import check_target
        check_target(params["accuracy_target"])
    for key in ("precision", "candidate"):
        if key in params:
            check_precision(params[key])
    for p in _names(params.get("precisions", "")):
        check_precision(p)
    if wave_id == "8.11":
        from foxlib.waves.wave_8_11 import check_precisions
        check_precisions(_names(params["precisions"]), params["candidate"])
    for name in _names(params.get("models", "")):
        MODELS[name]  # noqa: B018 — the registry raises a ValueError naming the valid models
    if "strategies" in params:
        from foxlib.waves.wave_8_12 import select
        select(params["strategies"])
    if wave_id == "8.13":
        from foxlib.waves.wave_8_13 import check_parameters
        check_parameters(params)
    if params.get("measurements"):
        path = Path(params["measurements"])
        if not path.is_file():
            raise ValueError(f"measurement file {path} not found (make one with `python -m foxlib measure "
                             f"--wave {wave_id} --out FILE`)")
        data = results.read_json(path)
        if data.get("wave") != wave_id or "device" not in data:
            raise ValueError(f"{path} is not a wave {wave_id} measurement (it holds wave {data.get('wave')!r})")
