"""The TFT accuracy harness: train to a budget of steps with validation-based early stopping, in a given
precision and seed, and score the best checkpoint on held-out windows (after foxlib.data.market.VALIDATION_START):
quantile_loss (mean pinball loss summed over the quantiles; the headline), p50_mae, directional_accuracy (share
where the median forecast has the realised return's sign), coverage_10_90 (share inside the 10-90 % band; ideal
0.8), the same scores of climatology and skill_score, 1 − quantile_loss / climatology's.

Climatology is the empirical quantiles of the target over every training window, the same forecast every day:
without skill over it an accuracy gate has no power. Daily returns are close to a coin flip in sign, so the skill
to look for is in the quantiles' width following volatility (the "abs_return" target, foxlib.data.market). A
comparison with fp32 means something only for seeds whose fp32 run has skill (`powered_seeds`).

`train_many` makes several runs at once, each in its own process: an eager TFT run on a GPU is bound by one CPU
thread launching kernels, and runs in separate processes overlap that work. Each run is seeded and computes the
steps it would alone; only its wall time reflects the company it had (the harness records "concurrent_runs"). On
the CPU runs stay in this process, one after another.
"""
from __future__ import annotations

import copy
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from foxlib.data.market import TARGETS, MarketWindows
from foxlib.memory.step import TrainingStep, autocast, check_precision
from foxlib.models import MODELS
from foxlib.models.tft import quantile_loss
from foxlib.core.progress import progress
from foxlib.core.schema import Record, Sparse
from foxlib.harness.recipe import StepRecipe, optimizer_for
from foxlib.harness.step_options import StepOptions, backends

DEFAULT_MIN_SKILL = 0.02
"""A run has skill when its validation quantile loss is at least 2 % below climatology's."""

LOWER_IS_BETTER = {"quantile_loss": True, "p50_mae": True, "directional_accuracy": False,
                   "coverage_error": True}


HARNESS = {"target": "return", "batch_size": 64, "lr": 3e-3, "max_steps": 400, "eval_every": 25, "patience": 10,
           "val_windows": 512, "min_skill": DEFAULT_MIN_SKILL}
"""The accuracy harness's defaults (waves 8.11 and 8.12 take them as their accuracy_* parameters). Chosen on
the CPU, small preset: with the preset's batch of 8 and lr 1e-3, runs stop at the noise (val skill 0-3 %,
best step 25-50); with batch 64 and lr 3e-3 the TFT leaves climatology after 100-200 steps and reaches a
validation skill score of 8.9-9.7 % (seeds 0-2) by step 250-350; patience 10 × 25 steps outlasts the
plateau before it. The seed preset at the same batch and lr (fp32, seed 0, 100 steps, 128 validation
windows, CPU) reached 9.3 % by step 80."""


def climatology(windows: MarketWindows, quantiles: Sequence[float]) -> np.ndarray:
    """The empirical `quantiles` of the target over `windows` (the training split), pooled: (n_q,) float64."""
    return np.quantile(windows.targets().ravel(), np.asarray(quantiles, dtype=np.float64))


def naive_prediction(levels: np.ndarray, target: torch.Tensor) -> torch.Tensor:
    """Climatology's forecast for every window and step of `target` (B, T_d): (B, T_d, n_q)."""
    q = torch.as_tensor(levels, dtype=torch.float32, device=target.device)
    return q.expand(*target.shape, len(levels))


COVERAGE_BAND = (0.1, 0.9)  # the quantiles whose band coverage_10_90 measures (ideal: their difference)


def coverage(pred: torch.Tensor, target: torch.Tensor, quantiles: Sequence[float]) -> float | None:
    """Share of targets inside the predicted COVERAGE_BAND quantile band (ideal hi − lo); None if not predicted."""
    lo, hi = COVERAGE_BAND
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


def powered_seeds(runs: Sequence[TrainResult], baseline: str = "fp32",
                  min_skill: float = DEFAULT_MIN_SKILL) -> list[int]:
    """The seeds whose `baseline` run has skill: where a comparison has power."""
    return sorted(r.seed for r in runs if r.precision == baseline and has_skill(r.metrics, min_skill))


def check_target(target: str) -> str:
    """A valid accuracy target (foxlib.data.market.TARGETS), or a ValueError naming them."""
    if target not in TARGETS:
        raise ValueError(f"unknown accuracy target {target!r}; valid targets: {', '.join(TARGETS)}")
    return target


def accuracy_config(preset: str, *, batch_size: int = HARNESS["batch_size"], lr: float = HARNESS["lr"], **overrides):
    """The TFT config of the accuracy runs: `preset` on the memory-efficient path (the same function,
    faster) with the harness's batch size and learning rate; other fields via `overrides`."""
    return MODELS["tft"].config(preset, **{"memory_efficient": True, "batch_size": batch_size, "lr": lr, **overrides})


@dataclass(frozen=True)
class HarnessSettings(Sparse):
    """Every setting an accuracy run depends on (harness_config), as each run and a wave's accuracy_harness store
    them: the step options where not the defaults (harness_config), the runs sharing the device
    (train_many; absent in a measurement made before it recorded them)."""
    target: str
    tft_config: dict[str, Any]
    max_steps: int
    eval_every: int
    patience: int
    val_windows: int
    grad_clip: float
    min_skill: float
    selection: str
    naive_forecast: str
    step_options: StepOptions | None = None
    concurrent_runs: int | None = None
    PARTS = {"step_options": StepOptions}


def harness_config(cfg, *, target: str = "return", max_steps: int, eval_every: int, patience: int,
                   val_windows: int, grad_clip: float = 1.0, min_skill: float = DEFAULT_MIN_SKILL,
                   options: StepOptions = StepOptions(), concurrent_runs: int | None = None) -> HarnessSettings:
    """Every setting an accuracy run depends on (the report states it)."""
    return HarnessSettings(target, asdict(cfg), max_steps, eval_every, patience, val_windows, grad_clip, min_skill,
                           "best validation quantile loss among the evaluations (early stopping)",
                           "climatology: the training windows' empirical quantiles of the target",
                           None if options.is_default else options, concurrent_runs)


@dataclass(frozen=True)
class TrainResult(Record):
    """One accuracy run (train_tft): as measurement.json holds it with has_skill, derived, beside (to_dict), which
    from_dict leaves out."""
    precision: str
    seed: int
    steps: int
    best_step: int
    stopped_early: bool
    seconds: float
    history: list[dict[str, float]]
    metrics: dict[str, float]
    harness: HarnessSettings
    PARTS = {"harness": HarnessSettings}

    @property
    def has_skill(self) -> bool:
        return has_skill(self.metrics, self.harness.min_skill)

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"has_skill": self.has_skill}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainResult":
        return super().from_dict({k: v for k, v in d.items() if k != "has_skill"})


@torch.no_grad()
def evaluate(model, windows: MarketWindows, rows: np.ndarray, precision: str, device: torch.device,
             batch_size: int = 256, levels: np.ndarray | None = None) -> dict[str, float]:
    """Validation scores of `model` on the windows at `rows`; with `levels` (climatology's), the naive
    forecast's scores and the skill score too."""
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
    if (band := coverage(pred, target, qs)) is not None:
        out["coverage_10_90"] = band
        out["coverage_error"] = abs(band - (COVERAGE_BAND[1] - COVERAGE_BAND[0]))
    if levels is not None:
        naive = naive_prediction(levels, target)
        out["naive_quantile_loss"] = float(quantile_loss(naive, target, qs))
        out["naive_coverage_10_90"] = coverage(naive, target, qs)
        out["skill_score"] = skill_score(out["quantile_loss"], out["naive_quantile_loss"])
    return out


def train_tft(cfg, *, precision: str = "fp32", seed: int = 0, max_steps: int = 200, eval_every: int = 20,
              patience: int = 3, val_windows: int = 512, device: str | torch.device = "cpu",
              grad_clip: float = 1.0, show_progress: bool = True, target: str = "return",
              min_skill: float = DEFAULT_MIN_SKILL, options: StepOptions | None = None,
              concurrent_runs: int | None = None) -> TrainResult:
    """Train the TFT of `cfg` on `target` for at most `max_steps` steps; evaluate every `eval_every` steps on
    `val_windows` fixed validation windows; stop after `patience` evaluations without improvement; score the best
    checkpoint, and climatology on the same windows. With Adam in backward each gradient is clipped by its own
    norm to `grad_clip`; the options' backends hold for the whole run. `concurrent_runs`: how many runs shared the
    device at once, this one included (train_many), recorded in its harness settings."""
    options = options or StepOptions()
    check_precision(precision)
    device = torch.device(device)
    card = MODELS["tft"]
    harness = harness_config(cfg, target=target, max_steps=max_steps, eval_every=eval_every, patience=patience,
                             val_windows=val_windows, grad_clip=grad_clip, min_skill=min_skill, options=options,
                             concurrent_runs=concurrent_runs)
    train, val = (MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, split, target=target)
                  for split in ("train", "validation"))
    levels = climatology(train, cfg.quantiles)
    rng = np.random.default_rng(seed)
    val_rows = np.sort(np.random.default_rng(12345).choice(len(val), min(val_windows, len(val)), replace=False))
    torch.manual_seed(seed)
    model = card.build(cfg).to(device)
    optimizer = optimizer_for(StepRecipe("tft", cfg, precision, seed, options), model,
                              clip_each=grad_clip if options.optimizer_in_backward else None)
    # the one training step (foxlib.memory.step); Adam in backward clips each parameter itself
    run = TrainingStep(model, None, card.loss, optimizer, precision, device,
                       clip=None if options.optimizer_in_backward else grad_clip)
    best, best_state, best_step, since_best, history, step = float("inf"), None, 0, 0, [], 0
    started = time.perf_counter()
    with backends(options), progress(max_steps, f"train tft {precision} seed {seed}", show_progress) as bar:
        while step < max_steps:
            batch = train.get(rng.integers(0, len(train), size=cfg.batch_size), device=device)
            loss = run(batch, check=f"training step {step} (TFT, {precision}, seed {seed})")
            step += 1
            if step % eval_every == 0 or step == max_steps:
                scores = evaluate(model, val, val_rows, precision, device, levels=levels)
                history.append({"step": step, "train_loss": float(loss.detach()),
                                "val_quantile_loss": scores["quantile_loss"], "val_skill_score": scores["skill_score"]})
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
    metrics = evaluate(model, val, val_rows, precision, device, levels=levels)
    return TrainResult(precision, seed, step, best_step, step < max_steps, time.perf_counter() - started,
                       history, metrics, harness)


MAX_GPU_WORKERS = 8
WORKER_THREADS = 2  # intra-op threads per worker process (the runs are launch-bound, not CPU-bound)


def auto_workers(n_jobs: int, device: torch.device | str) -> int:
    """Processes for n_jobs runs: up to MAX_GPU_WORKERS on CUDA (and the host's cores allow), one on the CPU."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(n_jobs, MAX_GPU_WORKERS, (os.cpu_count() or 2) // WORKER_THREADS))


def _run(job: dict[str, Any]) -> dict[str, Any]:
    return train_tft(**job, show_progress=False).to_dict()


def train_many(jobs: Sequence[dict[str, Any]], device: torch.device | str, workers: int = 0,
               what: str = "accuracy runs") -> list[dict[str, Any]]:
    """train_tft(**job, device=device, concurrent_runs=workers) for every (picklable) job; TrainResult.to_dict()s
    in the jobs' order. workers: processes (0: auto_workers); with one, the runs go one after another here."""
    if workers < 0:
        raise ValueError(f"workers must be 0 (auto) or more, not {workers}")
    device = torch.device(device)
    workers = min(workers or auto_workers(len(jobs), device), max(1, len(jobs)))
    jobs = [{**job, "device": str(device), "concurrent_runs": workers} for job in jobs]
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    with progress(len(jobs), what) as bar:
        if workers == 1:
            for i, job in enumerate(jobs):
                bar.describe(f"{what}: {job.get('precision', 'fp32')} seed {job.get('seed', 0)}")
                results[i] = _run(job)
                bar.advance()
        else:
            bar.describe(f"{what}: {len(jobs)} runs in {workers} processes")
            # spawn: a forked child cannot use CUDA once the parent has
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=torch.set_num_threads,
                                     initargs=(WORKER_THREADS,)) as pool:
                futures = {pool.submit(_run, job): i for i, job in enumerate(jobs)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.advance()
    return results  # type: ignore[return-value]


def compare_precisions(cfg, precisions: Iterable[str] = ("fp32", "fp16", "bf16"), seeds: Iterable[int] = (0, 1, 2),
                       **kwargs) -> list[TrainResult]:
    """train_tft for every precision and seed, precisions interleaved within each seed."""
    return [train_tft(cfg, precision=p, seed=s, **kwargs) for s in seeds for p in precisions]


def _min_skill(runs: Sequence[TrainResult]) -> float:
    return runs[0].harness.min_skill if runs else DEFAULT_MIN_SKILL


def skill_row(metrics: Sequence[Mapping[str, Any]], seeds: Sequence[int], min_skill: float) -> dict[str, Any]:
    """One set of runs (each run's validation metrics, in seed order): climatology's and the model's quantile loss,
    the skill score (mean, per seed, lowest), both 10-90 coverages, how many seeds have skill."""
    return {"seeds": list(seeds),
            "naive_quantile_loss": statistics.fmean(x["naive_quantile_loss"] for x in metrics),
            "quantile_loss": statistics.fmean(x["quantile_loss"] for x in metrics),
            "skill_scores": [x["skill_score"] for x in metrics],
            "skill_score": statistics.fmean(x["skill_score"] for x in metrics),
            "min_skill_score": min(x["skill_score"] for x in metrics),
            "coverage_10_90": statistics.fmean(x["coverage_10_90"] for x in metrics),
            "naive_coverage_10_90": statistics.fmean(x["naive_coverage_10_90"] for x in metrics),
            "with_skill": sum(has_skill(x, min_skill) for x in metrics), "min_skill": min_skill}


def skill_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """A skill_row as the reports' skill tables show it (rounded; scores in %)."""
    return {"climatology QL": round(row["naive_quantile_loss"], 4), "model QL (mean)": round(row["quantile_loss"], 4),
            "skill score (%, mean)": round(100 * row["skill_score"], 2),
            "skill score per seed (%)": ", ".join(f"{100 * v:+.2f}" for v in row["skill_scores"]),
            "10-90 coverage (model)": round(row["coverage_10_90"], 3),
            "10-90 coverage (climatology)": round(row["naive_coverage_10_90"], 3),
            f"seeds with skill ≥ {100 * row['min_skill']:g} %": f"{row['with_skill']} of {len(row['seeds'])}"}


def skill_summary(runs: Sequence[TrainResult], group: str = "precision") -> list[dict[str, Any]]:
    """skill_row per precision (or another field of the runs)."""
    threshold = _min_skill(runs)
    by: dict[Any, list[TrainResult]] = {}
    for r in runs:
        by.setdefault(getattr(r, group), []).append(r)
    return [{group: key, **skill_row([r.metrics for r in rs], [r.seed for r in rs], threshold)}
            for key, rs in by.items()]


def accuracy_gate(runs: Sequence[TrainResult], candidate: str, baseline: str = "fp32") -> dict[str, Any]:
    """The candidate's validation quantile loss against the baseline's over the seeds whose baseline run has
    skill (powered_seeds). `powered` False: no baseline run has skill, and the degradation (over every
    seed, for the record) says nothing."""
    threshold = _min_skill(runs)
    seeds = powered_seeds(runs, baseline, threshold)
    base_runs = [r for r in runs if r.precision == baseline]
    used = seeds or sorted({r.seed for r in base_runs})
    base, cand = (statistics.fmean(r.metrics["quantile_loss"] for r in runs if r.precision == p and r.seed in used)
                  for p in (baseline, candidate))
    return {"candidate": candidate, "baseline": baseline, "min_skill": threshold, "powered": bool(seeds),
            "powered_seeds": seeds, "seeds_compared": used, "baseline_quantile_loss": base,
            "candidate_quantile_loss": cand, "degradation_pct": 100 * (cand - base) / base,
            "baseline_skill_scores": {r.seed: r.metrics["skill_score"] for r in base_runs},
            "reason": (f"compared on the {len(seeds)} seed(s) whose {baseline} run beats climatology by "
                       f"≥ {100 * threshold:g} %" if seeds else
                       f"no power: no {baseline} run beats climatology by ≥ {100 * threshold:g} % "
                       "(validation quantile loss), so an unskilled model's degradation says nothing")}


@dataclass(frozen=True)
class Degradation(Record):
    """One row of degradation(): a precision's mean of a metric over seeds against the baseline's."""
    precision: str
    metric: str
    mean: float
    values: list[float]
    degradation_pct: float
    baseline_spread_pct: float
    seeds: list[int]


def degradation(results: list[TrainResult], baseline: str = "fp32") -> list[Degradation]:
    """Per precision and metric: mean over seeds, degradation in % of the baseline's mean (positive = worse),
    and the baseline's own seed-to-seed spread in %."""
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
            rows.append(Degradation(precision, metric, mean, values, 100 * worse / abs(base_mean) if base_mean else 0.0,
                                    spread, [r.seed for r in runs]))
    return rows
