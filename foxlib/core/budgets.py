"""Budgets (a TOML file users edit) and the checks and verdicts that follow from them."""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from foxlib.core import config
from foxlib.core.schema import Record

# section -> key -> description; every key must be present and a positive finite number, and
# no other section or key may appear (a misspelt budget would otherwise be ignored silently)
SCHEMA: dict[str, dict[str, str]] = {
    "tft": {
        "parameters_mb": "model parameters",
        "forward_activations_mb": "bytes saved for backward by the forward pass",
        "gradients_mb": "gradients",
        "optimizer_state_mb": "optimizer state",
        "peak_training_mb": "peak of one training step",
    },
    "ensemble": {
        "card_mb": "memory of the target card",
        "min_headroom_mb": "free memory the ensemble must leave on the card",
    },
    "accuracy": {"max_degradation_pct": "allowed accuracy degradation against fp32, percent"},
    "speed": {"max_slowdown": "allowed step-time ratio against fp32"},
}


class BudgetsError(ValueError):
    """The budgets file is missing, malformed or incomplete."""


def load_budgets(path: str | Path | None = None) -> dict[str, dict[str, float]]:
    """Read and validate the budgets file; BudgetsError says what is wrong and where."""
    path = Path(path or config.BUDGETS_FILE)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        fix = ("restore it with `git checkout budgets.toml`" if path.resolve() == Path(config.BUDGETS_FILE).resolve()
               else f"check the path, or leave budgets_file empty for the project's {config.BUDGETS_FILE.name}")
        raise BudgetsError(f"budgets file {path} not found; {fix}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BudgetsError(f"budgets file {path} is not valid TOML: {exc}") from None
    problems = [f"section [{section}] is not a known section (known: {', '.join(SCHEMA)})"
                for section in raw if section not in SCHEMA]
    for section, keys in SCHEMA.items():
        table = raw.get(section)
        if not isinstance(table, dict):
            problems.append(f"section [{section}] is missing")
            continue
        for key, what in keys.items():
            value = table.get(key)
            if value is None:
                problems.append(f"[{section}] {key} ({what}) is missing")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                problems.append(f"[{section}] {key} must be a positive number (finite), got {value!r}")
        for key in sorted(set(table) - set(keys)):
            problems.append(f"[{section}] {key} is not a known budget (known: {', '.join(keys)})")
    if problems:
        raise BudgetsError(f"budgets file {path} is incomplete or malformed: " + "; ".join(problems))
    return {section: {k: float(raw[section][k]) for k in keys} for section, keys in SCHEMA.items()}


@dataclass(frozen=True)
class Check(Record):
    """One pass/fail comparison of a measured value with its limit (measured <= limit passes)."""
    name: str
    measured: float
    limit: float
    unit: str
    passed: bool
    note: str = ""

    @classmethod
    def at_most(cls, name: str, measured: float, limit: float, unit: str, note: str = "") -> "Check":
        return cls(name, measured, limit, unit, bool(measured <= limit), note)


def verdict(checks: list[Check]) -> str:
    """GO only when there is at least one check and every check passed."""
    return "GO" if checks and all(c.passed for c in checks) else "NO-GO"
