"""The TFT accuracy harness: train to a fixed budget of steps with validation-based early
stopping, in a given precision and seed, and score the best checkpoint on held-out windows.

Scores on the validation split (windows after foxlib.data.VALIDATION_START):
- quantile_loss: mean pinball loss summed over the quantiles (lower is better; the headline);
- p50_mae: mean absolute error of the median forecast, in percent return;
- directional_accuracy: share of windows and horizons where the median forecast has the sign
  of the realised return;
- coverage_10_90: share of realised returns inside the predicted 10-90 % band (ideal 0.8).
"""
from __future__ import annotations

import copy
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable

import numpy as np
import torch

from foxlib.data import MarketWindows
from foxlib.memory.profile import NonFiniteLossError, autocast, check_precision
from foxlib.models import MODELS
from foxlib.models.tft import quantile_loss
from foxlib.progress import progress
from foxlib.recipe import StepRecipe, optimizer_for

LOWER_IS_BETTER = {"quantile_loss": True, "p50_mae": True, "directional_accuracy": False,
                   "coverage_error": True}


@dataclass(frozen=True)
class TrainResult:
    precision: str
    seed: int
    steps: int
    best_step: int
    stopped_early: bool
    seconds: float
    history: list[dict[str, float]]
    metrics: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.no_grad()
def evaluate(model, windows: MarketWindows, rows: np.ndarray, precision: str, device: torch.device,
             batch_size: int = 256) -> dict[str, float]:
    """Validation scores of `model` on the windows at `rows` (see the module docstring)."""
    model.eval()
    qs = list(model.config.quantiles)
    preds, targets = [], []
    for start in range(0, len(rows), batch_size):
        batch = windows.get(rows[start:start + batch_size], device=device)
        with autocast(device, precision):
            preds.append(model(batch).float())
        targets.append(batch["target"].float())
    model.train()
    pred, target = torch.cat(preds), torch.cat(targets)
    p50 = pred[..., qs.index(0.5)] if 0.5 in qs else pred.median(-1).values
    out = {
        "quantile_loss": float(quantile_loss(pred, target, qs)),
        "p50_mae": float((p50 - target).abs().mean()),
        "directional_accuracy": float((torch.sign(p50) == torch.sign(target)).float()[target != 0].mean()),
    }
    if 0.1 in qs and 0.9 in qs:
        lo, hi = pred[..., qs.index(0.1)], pred[..., qs.index(0.9)]
        out["coverage_10_90"] = float(((target >= lo) & (target <= hi)).float().mean())
        out["coverage_error"] = abs(out["coverage_10_90"] - 0.8)
    return out


def train_tft(cfg, *, precision: str = "fp32", seed: int = 0, max_steps: int = 200, eval_every: int = 20,
              patience: int = 3, val_windows: int = 512, device: str | torch.device = "cpu",
              grad_clip: float = 1.0, show_progress: bool = True) -> TrainResult:
    """Train the TFT of `cfg` for at most `max_steps` Adam steps; evaluate every `eval_every`
    steps on a fixed set of `val_windows` validation windows; stop after `patience` evaluations
    without improvement; score the best checkpoint."""
    check_precision(precision)
    device = torch.device(device)
    card = MODELS["tft"]
    train = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    val = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "validation")
    rng = np.random.default_rng(seed)
    val_rows = np.sort(np.random.default_rng(12345).choice(len(val), min(val_windows, len(val)), replace=False))
    torch.manual_seed(seed)
    model = card.build(cfg).to(device)
    optimizer = optimizer_for(StepRecipe("tft", cfg, precision, seed), model)  # Adam at the card's learning rate
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    best, best_state, best_step, since_best, history = float("inf"), None, 0, 0, []
    started = time.perf_counter()
    step = 0
    with progress(max_steps, f"train tft {precision} seed {seed}") if show_progress else _silent() as bar:
        while step < max_steps:
            batch = train.get(rng.integers(0, len(train), size=cfg.batch_size), device=device)
            optimizer.zero_grad(set_to_none=True)
            with autocast(device, precision):
                loss = card.loss(model, batch)
            if not torch.isfinite(loss):
                raise NonFiniteLossError(f"the TFT's loss became {float(loss.detach())} at step {step} "
                                         f"({precision}, seed {seed}); lower the learning rate or use bf16")
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            step += 1
            if step % eval_every == 0 or step == max_steps:
                scores = evaluate(model, val, val_rows, precision, device)
                history.append({"step": step, "train_loss": float(loss.detach()), "val_quantile_loss": scores["quantile_loss"]})
                if scores["quantile_loss"] < best:
                    best, best_step, since_best = scores["quantile_loss"], step, 0
                    best_state = copy.deepcopy(model.state_dict())
                else:
                    since_best += 1
                if since_best >= patience:
                    bar.advance(max_steps - step + 1)
                    break
            bar.advance(1, loss=f"{float(loss.detach()):.3f}")
    model.load_state_dict(best_state)
    metrics = evaluate(model, val, val_rows, precision, device)
    return TrainResult(precision, seed, step, best_step, step < max_steps, time.perf_counter() - started,
                       history, metrics)


class _silent:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def advance(self, *a, **k):
        pass

    def describe(self, *a):
        pass


def compare_precisions(cfg, precisions: Iterable[str] = ("fp32", "fp16", "bf16"), seeds: Iterable[int] = (0, 1, 2),
                       **kwargs) -> list[TrainResult]:
    """train_tft for every precision and seed, precisions interleaved within each seed."""
    return [train_tft(cfg, precision=p, seed=s, **kwargs) for s in seeds for p in precisions]


def degradation(results: list[TrainResult], baseline: str = "fp32") -> list[dict[str, Any]]:
    """Per precision and metric: mean over seeds, degradation in % against the baseline's mean
    (positive = worse), and the baseline's own seed-to-seed spread in % for scale."""
    by_precision: dict[str, list[TrainResult]] = {}
    for r in results:
        by_precision.setdefault(r.precision, []).append(r)
    base = by_precision[baseline]
    rows = []
    for metric, lower_better in LOWER_IS_BETTER.items():
        if metric not in base[0].metrics:
            continue
        base_values = [r.metrics[metric] for r in base]
        base_mean = statistics.fmean(base_values)
        spread = 100 * (max(base_values) - min(base_values)) / abs(base_mean) if base_mean else 0.0
        for precision, runs in by_precision.items():
            values = [r.metrics[metric] for r in runs]
            mean = statistics.fmean(values)
            worse = (mean - base_mean) if lower_better else (base_mean - mean)
            rows.append({"precision": precision, "metric": metric, "mean": mean,
                         "values": values, "degradation_pct": 100 * worse / abs(base_mean) if base_mean else 0.0,
                         "baseline_spread_pct": spread, "seeds": [r.seed for r in runs]})
    return rows


def smaller(cfg, **changes):
    """A copy of a TFT config with fields replaced (for shorter accuracy runs)."""
    return replace(cfg, **changes)
