"""The front page's ledger: every claim the seed made, its figure beside ours, a verdict, the evidence.

Each row reads named figures (foxlib.core.figures) from the canonical reports' results.json, so the
index can never show another number than the report it links to. A claim whose figures no report
has yet says "not measured", never a guess. The seed's figures are its own (foxlib.core.seed_claims).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Callable

from foxlib.core import seed_claims
from foxlib.core.pooled_runs import MIN_RUNS
from foxlib.core.config import MB
from foxlib.core.figures import mb_text, slug
from foxlib.harness.timing import short_coverage

TFT = "tft/seed/b32/t60"
ENSEMBLE = "ensemble/seed"
CARD_BYTES = 4 * 2**30  # the seed's "4GB GPU"; its own percentages use 4,096 MB


@dataclass(frozen=True)
class Cell:
    text: str
    verdict: str | None = None  # "holds", "wrong", "partly", "untested" ...
    link: str | None = None


@dataclass(frozen=True)
class Claim:
    name: str
    seed: str
    wave: str
    judge: Callable[[dict[str, dict[str, Any]]], tuple[str, str] | None]
    """figures of one device -> (our figure, verdict) or None where not measured."""


def _v(figs: dict[str, dict[str, Any]], key: str) -> Any:
    """The value of figure `key` (a glob pattern may stand for a configuration part), None if absent."""
    found = [k for k in figs if fnmatch.fnmatchcase(k, key)]
    return figs[found[0]]["value"] if found else None


def _within(ours: float, theirs_mb: float) -> bool:
    return abs(ours / MB - theirs_mb) <= 0.10 * max(theirs_mb, 1)


def _category(quantity: str):
    """The fp32 TFT's `quantity` against the seed's figure of that name (seed_claims.TFT_8_10_MB)."""
    seed_mb = seed_claims.TFT_8_10_MB[quantity]

    def judge(figs):
        ours = _v(figs, f"{TFT}/fp32/{quantity}")
        return None if ours is None else (mb_text(ours), "holds" if _within(ours, seed_mb) else "wrong")
    return judge


def _peak(figs):
    model, process = _v(figs, f"{TFT}/fp32/model_peak"), _v(figs, f"{TFT}/fp32/process_peak")
    if model is None:
        return None
    text = f"model peak {mb_text(model)}" + (f"; process peak {mb_text(process)}" if process not in (None, model) else "")
    return text, "holds" if _within(model, seed_claims.TFT_8_10_MB["peak"]) else "wrong"


def _overhead(figs):
    theory, peak = _v(figs, f"{TFT}/fp32/theory_peak"), _v(figs, f"{TFT}/fp32/model_peak")
    if theory is None or peak is None:
        return None
    return f"theory {mb_text(theory)}, measured {mb_text(peak)}: {peak / theory:,.2f}x", "wrong"


def _forward(figs):
    fwd = _v(figs, f"{TFT}/fp32/forward_peak")
    if fwd is None:
        return None
    return f"forward peak {mb_text(fwd)}", "holds" if fwd < seed_claims.TFT_FORWARD_BUDGET_MB * MB else "fails"


def _reduction(key: str, guess: str):
    """guess: the seed_claims.STRATEGY_GUESSES entry whose memory reduction is judged; key: its model peak."""
    seed_pct = seed_claims.STRATEGY_GUESSES[guess]["memory_reduction_pct"]

    def judge(figs):
        base, ours = _v(figs, f"{TFT}/fp32/model_peak"), _v(figs, key)
        if base is None or ours is None:
            return None
        pct = 100 * (1 - ours / base)
        change = f"{pct:.1f} % less" if pct >= 0 else f"{-pct:.1f} % more"
        return f"{mb_text(ours)}: {change}", "holds" if abs(pct - seed_pct) <= 10 else "wrong"
    return judge


def _speed(key: str, guess: str):
    """guess: the seed_claims.STRATEGY_GUESSES entry whose speed claim ("-40% slower") is judged, read once
    (seed_claims.speed_ratio, SPEED_READING). key: the strategy's time_per_window_ratio; its independent runs,
    pooled as wave 8.12 pooled them, are the figure beside it, claim_time_per_window_ratio (its value and
    interval: judged here, not recomputed)."""
    ratio = seed_claims.speed_ratio(seed_claims.STRATEGY_GUESSES[guess]["speed"])
    band = seed_claims.speed_band(ratio)
    pooled_key = key.replace("/time_per_window_ratio", "/claim_time_per_window_ratio")
    what = "fp32's time per window"

    def judge(figs):
        fig, pooled = figs.get(key), figs.get(pooled_key)
        if fig is None and pooled is None:
            return None
        runs = (pooled or {}).get("runs") or []
        claim = f"the seed's {ratio:,.2f}x ± {100 * seed_claims.SPEED_BAND:g} % is [{band[0]:,.2f}, {band[1]:,.2f}]"
        if pooled is None or len(runs) < MIN_RUNS:
            fig = fig or pooled
            low, high = fig.get("low"), fig.get("high")
            interval = (f" [{low:,.2f}, {high:,.2f}]{short_coverage(fig.get('confidence'))}"
                        if low is not None and high is not None else "")
            return (f"{fig['value']:,.2f}x {what}{interval} in {max(len(runs), 1)} timing run; a verdict needs "
                    f"{MIN_RUNS} independent runs ({claim})", "inconclusive")
        medians = [m for m, _, _ in runs]
        each = ", ".join(f"{m:,.2f}x [{lo:,.2f}, {hi:,.2f}]" for m, lo, hi in runs)
        return (f"{len(runs)} independent runs, {what}: {each}; spread {min(medians):,.2f}-{max(medians):,.2f}x; "
                f"pooled {pooled['value']:,.2f}x [{pooled['low']:,.2f}, {pooled['high']:,.2f}]; {claim}",
                seed_claims.pooled_verdict(len(runs), pooled["low"], pooled["high"], ratio))
    return judge


def _accuracy(key: str, limit_pct: float):
    def judge(figs):
        change, margin = _v(figs, key), _v(figs, "tft/*/accuracy/fp32/skill_margin")
        if change is None:
            return None
        skill = f"; skill over the naive forecast {margin * 100:+.1f} %" if margin is not None else ""
        text = f"{change * 100:+.2f} % quantile loss{skill}"
        if margin is not None and margin <= 0:
            return text, "no power"
        return text, "holds" if change * 100 <= limit_pct else "wrong"
    return judge


def _same_function(key: str):
    def judge(figs):
        diff = _v(figs, key)
        if diff is None:
            return None
        return (f"same function: gradients differ by at most {diff:.1e} of their largest value (dropout off, "
                "same weights and batch)", "holds" if diff <= 1e-4 else "wrong")
    return judge


def _ensemble(config: str, seed_total_mb: float):
    def judge(figs):
        total, how = _v(figs, f"{ENSEMBLE}/{config}/process_peak"), ""
        if total is None:  # a CPU without the precision's kernels predicts it (foxlib.waves.wave_8_10.measuring)
            total, how = _v(figs, f"{ENSEMBLE}/{config}/predicted_process_peak"), "predicted (not run: no kernels), "
        if total is None:
            return None
        free = CARD_BYTES - total
        return (f"{how}{mb_text(total)} = {100 * total / CARD_BYTES:.1f} % of 4 GiB, {mb_text(free)} free",
                "holds" if _within(total, seed_total_mb) else "wrong")
    return judge


def _candle(figs):
    acts, peak = _v(figs, f"{TFT}/fp32/activations"), _v(figs, f"{TFT}/fp32/model_peak")
    if acts is None:
        return None
    return (f"not testable here (Candle is not PyTorch); in PyTorch the saved activations are {mb_text(acts)}, "
            f"the whole step {mb_text(peak)}: retained activations cannot explain 2,880 MB", "untested")


CLAIMS = (
    Claim("Model parameters", "72 MB", "8.10", _category("parameters")),
    Claim("Forward activations", "2,880 MB", "8.10", _category("activations")),
    Claim("Backward gradients", "0 MB", "8.10", _category("gradients")),
    Claim("Optimizer state", "144 MB", "8.10", _category("optimizer_state")),
    Claim("Peak training", "3,096 MB", "8.10", _peak),
    Claim("615x overhead vs theory", "4.8 MB theory -> 2,952 MB", "8.10", _overhead),
    Claim("Forward memory budget", f"should be < {seed_claims.TFT_FORWARD_BUDGET_MB} MB", "8.10", _forward),
    Claim("FP16: memory", "-50 % (3,096 -> 1,548 MB)", "8.11", _reduction(f"{TFT}/fp16/model_peak", "fp16")),
    Claim("FP16: speed", "+20 % faster", "8.12", _speed(f"{TFT}/fp16/time_per_window_ratio", "fp16")),
    Claim("FP16: accuracy", "< 2 % loss", "8.11", _accuracy("tft/*/accuracy/fp16/accuracy_change", 2.0)),
    # "checkpoint blocks" checkpoints every major block (the usual reading of the seed's gradient_checkpointing:
    # true); "checkpoint all", the whole body as one segment, is on wave 8.12's page with the other granularities
    *(claim for name, label in (("checkpoint blocks", "every block"),
                                ("checkpoint variables", "VSN variables, the granularity that saves memory"))
      for claim in (
          Claim(f"Checkpointing ({label}): memory", "-75 % (-> 774 MB)", "8.12",
                _reduction(f"{TFT}/fp32/{slug(name)}/model_peak", "checkpointing")),
          Claim(f"Checkpointing ({label}): speed", "-40 % slower", "8.12",
                _speed(f"{TFT}/fp32/{slug(name)}/time_per_window_ratio", "checkpointing")),
          Claim(f"Checkpointing ({label}): accuracy", "no cost", "8.12",
                _same_function(f"{TFT}/fp32/{slug(name)}/grad_rel_diff")))),
    Claim("Batch 32 -> 8: memory", "-75 %", "8.12",
          _reduction(f"{TFT}/fp32/{slug('batch ÷4')}/model_peak", "batch_8")),
    Claim("Batch 32 -> 8: speed", "-75 % slower", "8.12",
          _speed(f"{TFT}/fp32/{slug('batch ÷4')}/time_per_window_ratio", "batch_8")),
    Claim("Sequence 60 -> 30: memory", "-50 %", "8.12",
          _reduction(f"{TFT}/fp32/{slug('sequence ÷2')}/model_peak", "sequence_30")),
    Claim("Sequence 60 -> 30: speed", "no change", "8.12",
          _speed(f"{TFT}/fp32/{slug('sequence ÷2')}/time_per_window_ratio", "sequence_30")),
    Claim("Ensemble today (fp32)", "3,411 MB = 83 % of 4 GB, 685 MB free", "8.10",
          _ensemble("fp32", sum(seed_claims.ENSEMBLE_CURRENT_MB.values()))),
    Claim("Ensemble target (FP16 + checkpointing)", "932 MB = 23 %, 3,164 MB free (DQN 3, PPO 73, Mamba-2 82, TFT 774)",
          "8.10", _ensemble("fp16-checkpoint", sum(seed_claims.ENSEMBLE_TARGET_MB.values()))),
    Claim("Root cause: Candle retains activations", "hypothesis", "8.10", _candle),
)


def rows(found: dict[str, dict[str, dict[str, Any]]], devices: list[str]) -> list[dict[str, Any]]:
    """One row per seed claim: {"claim", "seed", "wave", "cells": {device: Cell}}; `found` is
    {wave: {device: results (with "_dir")}} as foxlib.report.index collects it."""
    out = []
    for claim in CLAIMS:
        cells = {}
        for d in devices:
            res = found.get(claim.wave, {}).get(d)
            judged = claim.judge((res or {}).get("figures") or {}) if res else None
            cells[d] = Cell("not measured") if judged is None else Cell(*judged, f"{res['_dir']}/report.html")
        out.append({"claim": claim.name, "seed": claim.seed, "wave": claim.wave, "cells": cells})
    return out
