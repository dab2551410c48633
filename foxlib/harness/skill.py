"""Skill: does the TFT forecast better than climatology? Without it an accuracy gate has no power.

Climatology is the empirical quantiles of the target over every training window, the same forecast every day.
Skill score on the validation windows: 1 − QL_model / QL_climatology. Daily returns are close to a coin flip in
sign, so the skill to look for is in the quantiles' width following volatility (the "abs_return" target,
foxlib.data.market, forecasts that persistence itself). A comparison with fp32 means something only for seeds
whose fp32 run has skill (`powered_seeds`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from foxlib.data.market import MarketWindows

DEFAULT_MIN_SKILL = 0.02
"""A run has skill when its validation quantile loss is at least 2 % below climatology's."""


def climatology(windows: MarketWindows, quantiles: Sequence[float]) -> np.ndarray:
    """The empirical `quantiles` of the target over `windows` (the training split), pooled: (n_q,) float64."""
    return np.quantile(windows.targets().ravel(), np.asarray(quantiles, dtype=np.float64))


def naive_prediction(levels: np.ndarray, target: torch.Tensor) -> torch.Tensor:
    """Climatology's forecast for every window and step of `target` (B, T_d): (B, T_d, n_q)."""
    q = torch.as_tensor(levels, dtype=torch.float32, device=target.device)
    return q.expand(*target.shape, len(levels))


def coverage(pred: torch.Tensor, target: torch.Tensor, quantiles: Sequence[float],
             lo: float = 0.1, hi: float = 0.9) -> float | None:
    """Share of targets inside the predicted [lo, hi] quantile band (ideal hi − lo); None if not predicted."""
    qs = list(quantiles)
    if lo not in qs or hi not in qs:
        return None
    low, high = pred[..., qs.index(lo)], pred[..., qs.index(hi)]
    return float(((target >= low) & (target <= high)).float().mean())


def skill_score(model_loss: float, naive_loss: float) -> float:
    """1 − QL_model / QL_climatology: positive when the model beats climatology."""
    return 1.0 - model_loss / naive_loss


def has_skill(metrics: dict[str, Any], min_skill: float = DEFAULT_MIN_SKILL) -> bool:
    return metrics.get("skill_score") is not None and metrics["skill_score"] >= min_skill


def powered_seeds(runs: list[dict[str, Any]], baseline: str = "fp32",
                  min_skill: float = DEFAULT_MIN_SKILL) -> list[int]:
    """The seeds whose `baseline` run (a TrainResult.to_dict()) has skill: where a comparison has power."""
    return sorted(r["seed"] for r in runs if r["precision"] == baseline and has_skill(r["metrics"], min_skill))
