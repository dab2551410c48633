"""Skill: does the TFT forecast better than a naive forecast? Without it an accuracy gate has no power.

The naive forecast is climatology: the empirical quantiles of the target over every training
window, the same forecast for every day. A model's quantile-loss skill score on the validation
windows is 1 − QL_model / QL_climatology (0: no better than climatology; 0.05: 5 % lower loss).
Daily returns are close to a coin flip in sign, so the skill to look for is in the quantiles'
width, which can follow volatility (volatility clusters); on the "abs_return" target (foxlib.data.market)
that persistence is the forecast itself.

A run has skill when its skill score is at least `min_skill` (DEFAULT_MIN_SKILL). Comparing a
candidate precision or strategy with fp32 means something only for runs that have it
(`powered_seeds`); with none, the comparison has no power and the gate says so (wave 8.11).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from foxlib.data.market import MarketWindows

DEFAULT_MIN_SKILL = 0.02
"""A run has skill when its validation quantile loss is at least 2 % below climatology's."""


def climatology(windows: MarketWindows, quantiles: Sequence[float]) -> np.ndarray:
    """The naive forecast: the empirical `quantiles` of the target over all of `windows` (the
    training split), pooled over series and horizon steps: (n_q,) float64, constant over time."""
    return np.quantile(windows.targets().ravel(), np.asarray(quantiles, dtype=np.float64))


def naive_prediction(levels: np.ndarray, target: torch.Tensor) -> torch.Tensor:
    """Climatology's forecast for every window and horizon step of `target` (B, T_d): (B, T_d, n_q)."""
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
    """A run's metrics (training.evaluate's, with climatology) show skill of at least `min_skill`."""
    return metrics.get("skill_score") is not None and metrics["skill_score"] >= min_skill


def powered_seeds(runs: list[dict[str, Any]], baseline: str = "fp32", min_skill: float = DEFAULT_MIN_SKILL) -> list[int]:
    """The seeds whose `baseline` run (a TrainResult.to_dict()) has skill: where a comparison has power."""
    return sorted(r["seed"] for r in runs if r["precision"] == baseline and has_skill(r["metrics"], min_skill))
