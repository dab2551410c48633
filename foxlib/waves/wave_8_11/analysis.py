"""Wave 8.11's decisions and shared figures, on raw values: the accuracy gate with its power and limit, the
candidate's peak against budgets.toml, the TFT step's time ratio to fp32 with its interval, the named figures."""
from __future__ import annotations

from functools import partial
from typing import Any

from foxlib.core.budgets import Check
from foxlib.core.config import MB
from foxlib.core.figures import Figure, key
from foxlib.harness.timing import RatioInterval, median_interval, ratio_interval
from foxlib.harness.training import Degradation, accuracy_gate
from foxlib.waves.wave_8_11.records import Measurement


def quantile_loss_rows(m: Measurement) -> list[Degradation]:
    """The accuracy rows (foxlib.harness.training.degradation) of the gate's metric, validation quantile loss."""
    return [r for r in m.accuracy if r.metric == "quantile_loss"]


def accuracy_limit(m: Measurement, budgets: dict[str, dict[str, float]]) -> dict[str, Any]:
    """accuracy_gate's figures (fp32's mean over the seeds compared, whether the comparison has power) with the
    most the candidate's mean may be, fp32's × (1 + max_degradation_pct / 100), under "limit_quantile_loss"."""
    gate = accuracy_gate(m.accuracy_runs, m.candidate)
    limit_pct = budgets["accuracy"]["max_degradation_pct"]
    return {**gate, "limit_pct": limit_pct,
            "limit_quantile_loss": gate["baseline_quantile_loss"] * (1 + limit_pct / 100)}


def checks(m: Measurement, budgets: dict[str, dict[str, float]]) -> list[Check]:
    """The accuracy gate's power: every fp32 run beats climatology by the harness's min_skill, else the wave
    cannot say the candidate keeps the accuracy (NO-GO: results.json has no third verdict); the candidate's
    degradation over the seeds whose fp32 run has skill; the candidate's model peak against the TFT's budget."""
    c = m.candidate
    gate = accuracy_limit(m, budgets)
    base = [r for r in m.accuracy_runs if r.precision == "fp32"]
    worst = max(base, key=lambda r: r.metrics["quantile_loss"] / r.metrics["naive_quantile_loss"])
    wm = worst.metrics
    row = next(r for r in quantile_loss_rows(m) if r.precision == c)
    skill_note = ("skill scores (1 − QL / climatology's) per seed: "
                  + ", ".join(f"{s}: {100 * v:+.2f} %" for s, v in gate["baseline_skill_scores"].items())
                  + f"; worst seed {worst.seed}: QL {wm['quantile_loss']:.4f} vs climatology "
                    f"{wm['naive_quantile_loss']:.4f}")
    degradation_note = (f"mean of {len(gate['seeds_compared'])} seed(s) with skill; fp32 seed-to-seed spread "
                        f"{row.baseline_spread_pct:.2f} %" if gate["powered"] else gate["reason"])
    return [
        Check.at_most("TFT fp32 validation quantile loss / climatology's (worst seed): the accuracy gate's power",
                      wm["quantile_loss"] / wm["naive_quantile_loss"], 1 - gate["min_skill"], "ratio", note=skill_note),
        Check(f"TFT accuracy degradation in {c} (validation quantile loss)", gate["degradation_pct"], gate["limit_pct"],
              "%", bool(gate["powered"] and gate["degradation_pct"] <= gate["limit_pct"]), note=degradation_note),
        Check.at_most(f"TFT peak training memory in {c}", m.memory["tft"][c].peak,
                      budgets["tft"]["peak_training_mb"] * MB, "bytes",
                      note="model peak: the step's own tensors (workspaces and CUDA context apart)"),
    ]


def speed_ratios(m: Measurement) -> dict[str, RatioInterval]:
    """Per precision timed (fp32 at 1), the TFT step's time over fp32's: the median per-round ratio with its
    seeded bootstrap interval (foxlib.harness.timing.ratio_interval)."""
    return {p: ratio_interval(m.timing, p, "fp32") for p in m.timing}


def named_figures(m: Measurement) -> list[Figure]:
    """The figures other pages show too (foxlib.core.figures), raw: model peaks per precision, the TFT's
    step-time ratios, the accuracy harness's skill and degradation."""
    preset = m.measure_parameters.get("preset", "seed")
    tft = partial(key, "tft", preset, m.tft_config["batch_size"], m.tft_config["encoder_length"])
    out, ratios = [], speed_ratios(m)
    for name, per in m.memory.items():
        for precision, prof in per.items():
            k = tft(precision, "model_peak") if name == "tft" else f"{name}/{preset}/{precision}/model_peak"
            out.append(Figure(k, prof.peak, "bytes"))
    for precision in m.timing:
        if precision == "fp32":  # the fp32 step this run's ratios rest on (foxlib.report.baselines)
            median, low, high, confidence = median_interval(m.timing["fp32"].samples)
            out.append(Figure(tft("fp32", "step_time", variant="wave-8-11"), median, "s", low=low, high=high,
                              confidence=confidence))
        else:
            r = ratios[precision]
            out.append(Figure(tft(precision, "step_time_ratio"), r.median, "ratio", low=r.low, high=r.high,
                              confidence=r.confidence))
    acc = f"tft/{m.accuracy_preset or preset}/accuracy"
    runs = [r for r in m.accuracy_runs if "skill_score" in r.metrics]
    base = [r.metrics["skill_score"] for r in runs if r.precision == "fp32"]
    if base:
        out.append(Figure(f"{acc}/fp32/skill_margin", sum(base) / len(base), "fraction"))
        for precision in sorted({r.precision for r in runs} - {"fp32"}):  # one order, whatever the hash seed
            gate = accuracy_gate(m.accuracy_runs, precision)
            out.append(Figure(f"{acc}/{precision}/accuracy_change", gate["degradation_pct"] / 100, "fraction"))
    return out
