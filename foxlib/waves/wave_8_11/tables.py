"""Wave 8.11's tables, formatting only (MB = 10^6 bytes), and the speed and accuracy charts' captions and
alt text, written from the figures those charts draw."""
from __future__ import annotations

from typing import Any

import pandas as pd

from foxlib.core import seed_claims
from foxlib.core.config import to_mb
from foxlib.harness.timing import shared_confidence
from foxlib.harness.training import Degradation, skill_columns, skill_summary
from foxlib.waves.wave_8_11.analysis import speed_ratios
from foxlib.waves.wave_8_11.records import Measurement


def memory_table(m: Measurement) -> pd.DataFrame:
    """The TFT's categories in each precision, the change against fp32, the seed's expectation."""
    base = m.memory["tft"]["fp32"]
    return pd.DataFrame([{
        "precision": p, "parameters (MB)": to_mb(prof.parameters), "gradients (MB)": to_mb(prof.gradients),
        "optimizer (MB)": to_mb(prof.optimizer_state), "activations (MB)": to_mb(prof.activations),
        "forward peak (MB)": to_mb(prof.forward_peak), "model peak (MB)": to_mb(prof.peak),
        "model peak vs fp32 (%)": round(100 * (prof.peak / base.peak - 1), 1),
        "activations vs fp32 (%)": round(100 * (prof.activations / base.activations - 1), 1),
        "process peak (MB)": to_mb(prof.process_peak),
        "seed's expectation (MB)": seed_claims.FP16_EXPECTED_PEAK_MB if p == "fp16" else None,
    } for p, prof in m.memory["tft"].items()])  # measured in m.precisions' order


def models_table(m: Measurement) -> pd.DataFrame:
    """Every model's model peak per precision (the figure wave 8.10 shows under the same name)."""
    return pd.DataFrame([{"model": name, **{f"{p} model peak (MB)": to_mb(prof.peak) for p, prof in per.items()},
                          **{f"{p} vs fp32 (%)": round(100 * (per[p].peak / per["fp32"].peak - 1), 1)
                             for p in m.precisions if p != "fp32"}} for name, per in m.memory.items()])


def why_not_half(m: Measurement) -> pd.DataFrame:
    """Why "fp16 halves memory" does not hold: what stays fp32, and the 16-bit extras."""
    halved_ideal = m.memory["tft"]["fp32"].activations / 2
    return pd.DataFrame([{
        "precision": p,
        "stays fp32: weights + gradients + Adam (MB)": to_mb(prof.parameters + prof.gradients + prof.optimizer_state),
        "activations if all halved (MB)": to_mb(halved_ideal),
        "activations measured (MB)": to_mb(prof.activations),
        "not halved (MB)": to_mb(prof.activations - halved_ideal),
        "why": "autocast runs only matmul-like ops in 16 bits: layer norms, softmax, ELU, the loss and "
               "the LSTM state stay fp32; each cast makes a 16-bit copy (weights included: the "
               "cast-weight cache) that backward keeps; parameters, gradients and Adam state stay fp32",
    } for p, prof in m.memory["tft"].items() if p != "fp32"])


def speed_table(m: Measurement) -> pd.DataFrame:
    """The TFT step per precision: median and IQR in ms, the ratio to fp32 with its interval, whether the
    samples are noisy, and the seed's guess. The ratio is the median of the per-round ratios (the rounds alternate
    the precisions), not the ratio of the medians beside it, and its column says so: the two can order two
    precisions differently where they tie (the H200's fp16 and bf16, reports/h200/wave-8.11/)."""
    ratios = speed_ratios(m)
    return pd.DataFrame([{
        "precision": p, "median step (ms)": round(1e3 * t.median_s, 2), "IQR (ms)": round(1e3 * t.iqr_s, 2),
        "median of per-round ratios to fp32": round(ratios[p].median, 3),
        "ratio interval (low, high)": f"{ratios[p].low:.2f} – {ratios[p].high:.2f}",
        "noisy (IQR > 10 %)": t.noisy,
        "seed's guess": seed_claims.STRATEGY_GUESSES["fp16"]["speed"] if p == "fp16" else "",
    } for p, t in m.timing.items()])


def speed_line(m: Measurement) -> str:
    """The first screen's line on speed, which no check of this wave gates: each precision's step time against
    fp32's as the speed table holds it (speed_ratios), read as faster or slower only where the interval is wholly
    on one side of 1, fp32's median step, and the seed's guess."""
    ratios = speed_ratios(m)

    def reads(iv) -> str:
        return "faster" if iv.high < 1 else "slower" if iv.low > 1 else "a tie with fp32"
    each = "; ".join(f"{p} {ratios[p]} of fp32's step time ({reads(ratios[p])})" for p in m.timing if p != "fp32")
    return (f"**Speed** (no check of this wave gates it; the seed guessed fp16 "
            f"\"{seed_claims.STRATEGY_GUESSES['fp16']['speed']}\"): {each}; fp32's step "
            f"{1e3 * m.timing['fp32'].median_s:,.1f} ms (median of per-round ratios [interval], the speed table's).")


def accuracy_table(m: Measurement) -> pd.DataFrame:
    """Per precision and metric: the mean over seeds, each seed's value, the degradation against fp32 and
    fp32's own seed-to-seed spread (a degradation inside it is noise)."""
    return pd.DataFrame([{
        "precision": r.precision, "metric": r.metric, "mean over seeds": round(r.mean, 4),
        "per seed": ", ".join(f"{v:.4f}" for v in r.values),
        "degradation vs fp32 (%)": round(r.degradation_pct, 2),
        "fp32 seed spread (%)": round(r.baseline_spread_pct, 2),
        "beyond noise": abs(r.degradation_pct) > r.baseline_spread_pct if r.precision != "fp32" else "",
    } for r in m.accuracy])


def skill_table(m: Measurement) -> pd.DataFrame:
    """Per precision: the naive forecast's (climatology's) and the model's validation quantile loss, the
    skill score (1 − QL_model / QL_climatology) per seed, the 10-90 coverage of both, and the seeds with skill."""
    return pd.DataFrame([{"precision": r["precision"], **skill_columns(r)} for r in skill_summary(m.accuracy_runs)])


def harness_table(m: Measurement) -> pd.DataFrame:
    """The accuracy harness's configuration as run: what the skill and the degradation were measured with."""
    h = m.accuracy_harness
    cfg = h.tft_config
    rows = {"target": h.target, "TFT preset": m.accuracy_preset,
            "TFT config": ", ".join(f"{k}={cfg[k]}" for k in ("hidden_size", "num_heads", "n_observed",
                                                              "encoder_length", "decoder_length", "batch_size",
                                                              "dropout", "lr", "memory_efficient")),
            "step budget": h.max_steps, "validation every (steps)": h.eval_every,
            "early-stopping patience (evaluations)": h.patience, "validation windows": h.val_windows,
            "gradient clip (norm)": h.grad_clip, "checkpoint kept": h.selection,
            "naive forecast": h.naive_forecast, "skill needed (%)": 100 * h.min_skill}
    return pd.DataFrame([{"setting": k, "value": str(v)} for k, v in rows.items()])


def training_table(m: Measurement) -> pd.DataFrame:
    """One row per accuracy run: its precision and seed, steps run, the step kept, its skill score and seconds."""
    return pd.DataFrame([{"precision": r.precision, "seed": r.seed, "steps run": r.steps,
                          "best step": r.best_step, "stopped early": r.stopped_early,
                          "skill score (%)": round(100 * r.metrics["skill_score"], 2),
                          "seconds": round(r.seconds, 1)} for r in m.accuracy_runs])


def speed_figure_text(ratios: dict[str, Any]) -> tuple[str, str]:
    """(caption, alt text) of the speed chart drawn from `ratios` (analysis.speed_ratios)."""
    pct = f"{100 * shared_confidence(ratios.values()):g} %"
    caption = ("The TFT's training step time in each precision relative to fp32's, the precisions alternating in "
               f"one run: point, the median of the per-round ratios; bar, its {pct} bootstrap interval over the "
               "rounds; above 1 is slower. The figures of the speed table above.")
    alt = ("Interval chart, one row per precision, of the step time as a ratio to fp32's, with a dotted line at "
           "1 (fp32): " + "; ".join(f"{p} {iv}" for p, iv in ratios.items()) + ".")
    return caption, alt


def accuracy_figure_text(rows: list[Degradation], limit: dict[str, Any]) -> tuple[str, str]:
    """(caption, alt text) of the accuracy chart drawn from `rows` (analysis.quantile_loss_rows) and `limit`
    (analysis.accuracy_limit)."""
    power = ("" if limit["powered"] else " No fp32 run beats climatology by the harness's threshold: the "
             "comparison has no power and the gate fails whatever the line says.")
    caption = ("The TFT's validation quantile loss per precision (lower is better): diamond, the mean over seeds; "
               "dots, each seed; whisker, their range (min–max). Dotted line: fp32's mean over the "
               f"{len(limit['seeds_compared'])} seed(s) the gate compares; dashed line: the gate, the most "
               f"{limit['candidate']}'s mean may be ({limit['limit_pct']:g} % above fp32's). The axis is zoomed "
               f"on the values and does not start at 0.{power}")
    alt = ("Chart of validation quantile loss per precision: "
           + "; ".join(f"{r.precision} mean {r.mean:.4f}, seeds {min(r.values):.4f} to {max(r.values):.4f}"
                       for r in rows)
           + f". fp32's mean over the seeds compared {limit['baseline_quantile_loss']:.4f}; the gate line at "
             f"{limit['limit_quantile_loss']:.4f}.")
    return caption, alt


def accuracy_lines(limit: dict[str, Any]) -> tuple[tuple[float, str], tuple[float, str]]:
    """The accuracy chart's two lines, (value, legend label) each: fp32's mean over the seeds the gate
    compares, and the gate."""
    return ((limit["baseline_quantile_loss"], f"fp32 mean over the {len(limit['seeds_compared'])} seed(s) compared "
             f"{limit['baseline_quantile_loss']:.4f}"),
            (limit["limit_quantile_loss"], f"gate: {limit['candidate']} mean ≤ fp32's × (1 + {limit['limit_pct']:g} %) "
             f"= {limit['limit_quantile_loss']:.4f}"))
