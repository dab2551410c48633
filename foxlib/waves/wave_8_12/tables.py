"""Wave 8.12's tables and sentences, formatting only: the strategy table beside the seed's guesses
(foxlib.core.seed_claims), the recommendation's figures as the report states them, how far it is
from the targets, the accuracy runs' skill and the same-function figures, and the live-memory timelines'
section (its chart, its lines, the snapshot files they link kept beside the report). MB = 10^6 bytes. Every
decision is analysis.py's, on the unrounded record."""
from __future__ import annotations

import dataclasses
import os
import statistics
from typing import TYPE_CHECKING, Any, Sequence

import pandas as pd

from foxlib.core import seed_claims
from foxlib.core.config import MB, to_mb
from foxlib.core.figures import mb_text
from foxlib.harness.equivalence import Equivalence
from foxlib.harness.floors import FLOOR_BYTES_PER_PARAMETER, FLOOR_BYTES_PER_PARAMETER_IN_BACKWARD
from foxlib.harness.timelines import TimelineRun, keep_beside, own_timelines
from foxlib.harness.timing import RatioInterval, shared_confidence
from foxlib.harness.training import skill_columns, skill_row
from foxlib.waves.wave_8_12.analysis import claim_verdicts, lightest_at_full_speed, recommend
from foxlib.waves.wave_8_12.records import Measurement812
from foxlib.waves.wave_8_12.workspace import MAX_SLOWDOWN, VARIABLE

if TYPE_CHECKING:
    from foxlib.memory.timeline_chart import TimelineFigure


def _median_ms(samples) -> float:
    return round(1000 * statistics.median(samples), 2)


def table(rec: Measurement812) -> pd.DataFrame:
    """One row per strategy: memory, reduction, speed with its interval, accuracy impact, the seed's guess
    beside. Display only: every decision reads the record, never these rounded columns."""
    base = rec[rec.baseline]
    losses = rec.baseline_losses
    spread_pct = 100 * (max(losses) - min(losses)) / (sum(losses) / len(losses))
    pct = f"{100 * rec.interval_confidence:g} %"
    rows = []
    for s in rec.strategies:
        guess = seed_claims.STRATEGY_GUESSES.get(s.seed_guess or "", {})
        t = s.timing
        rows.append({
            "strategy": s.name,
            "peak (MB)": to_mb(s.peak_bytes),
            "allocator peak (MB)": to_mb(s.allocator_peak_bytes),
            "peak reduction (%)": round(100 * (1 - s.peak_bytes / base.peak_bytes), 1),
            "seed's guess: reduction (%)": guess.get("memory_reduction_pct"),
            "activations (MB)": to_mb(s.activation_bytes),
            "step time (ms, median)": round(1000 * t.median_s, 1),
            "step spread (IQR % of median)": round(100 * t.iqr_s / t.median_s, 1),
            "step time ratio": round(s.step_ratio.median, 3),
            "time per window ratio": round(s.window_ratio.median, 3),
            f"time per window, {pct} interval": f"[{s.window_ratio.low:.2f}, {s.window_ratio.high:.2f}]",
            "seed's guess: speed": guess.get("speed"),
            "accuracy impact (%)": round(s.accuracy_impact_pct, 2),
            "accuracy measured by": "own runs" if s.accuracy_source == s.name else f"= {s.accuracy_source} (same function)",
            "seed's guess: accuracy": guess.get("accuracy"),
            "fp32 spread (%)": round(spread_pct, 2),
        } | ({"minor page faults per step (thousands, median)": round(t.median_minor_faults / 1000, 1)}
             if base.minor_faults_samples else {}))
    return pd.DataFrame(rows)


def faults_text(rec: Measurement812, recommended: str | None) -> str:
    """Where the steps' minor page faults were counted (the CPU), fp32's and the recommended step's (Markdown); ""
    elsewhere."""
    base = rec[rec.baseline]
    if not base.minor_faults_samples:
        return ""
    pick = rec[recommended] if recommended and recommended != rec.baseline else None
    return (f"*Minor page faults per step* (counted on the CPU, median over the rounds): mostly the first touch of "
            f"memory since it was mapped or since the kernel took its pages back, as when an allocator returns freed "
            f"memory and maps it again (one fault per base page, or per transparent huge page where the kernel "
            f"uses one). fp32's step took a median of {base.timing.median_minor_faults:,} minor faults"
            + (f", {pick.name}'s {pick.timing.median_minor_faults:,}" if pick else "")
            + ": they run inside the timed step, so its step time includes them.")


def figures(r: dict[str, Any]) -> str:
    """A recommend() or lightest_at_full_speed() result's numbers, as the report states them."""
    return (f"peak {r['peak_bytes'] / MB:,.1f} MB ({r['peak_over_floor']:.2f} × floor), time "
            f"{r['interval']}, accuracy impact {r['accuracy_impact_pct']:+.2f} %")


def recommendation_text(r: dict[str, Any]) -> str:
    """A recommend() result as the report states it (Markdown): the figures with the interval, and why,
    saying when the decision was a tie settled by memory."""
    if not r["strategy"]:
        return f"**No recommendation:** {r['reason']}."
    step = RatioInterval.from_dict(r["step_time_interval"])
    why = r["reason"][0].upper() + r["reason"][1:]
    return (f"**{r['strategy']}** — precision `{r['precision']}`, TFT overrides `{r['tft_overrides']}`"
            + (", the whole step captured as one CUDA graph" if r.get("cuda_graph") else "")
            + (f", step options `{r['options']}`" if r.get("options") else "") + ": peak "
            f"**{r['peak_bytes'] / MB:,.1f} MB** ({r['peak_over_floor']:.2f} × the 16 B/param floor of "
            f"{r['floor_bytes'] / MB:,.1f} MB), time **{r['interval']}** (step time {step} of "
            f"fp32's), accuracy impact **{r['accuracy_impact_pct']:+.2f} %**. {why}."
            + (f" **Run it with `{VARIABLE}={r['cublas_workspace']}`** (set before the process starts): "
               f"{r['cublas_workspace_note']}."
               if r.get("cublas_workspace") else
               f" cuBLAS workspace: {r['cublas_workspace_note']}." if r.get("cublas_workspace_note") else ""))


def other_kind_text(rec: Measurement812, budgets: dict[str, dict[str, float]], recommended: dict[str, Any]) -> str:
    """The best of the other kind beside the recommendation (Markdown): the eager fallback where a CUDA
    graph cannot run when the recommendation is graphed; the fastest graphed otherwise. "" if none."""
    if not recommended["strategy"]:
        return ""
    graphed = bool(recommended.get("cuda_graph"))
    other = recommend(rec, budgets, cuda_graph=not graphed)
    if not other["strategy"]:
        return ""
    lead = ("Where a CUDA graph cannot run (a CPU, another GPU stack), the eager strategy to ship" if graphed else
            "Fastest with the whole step as one CUDA graph")
    return (f"{lead}: **{other['strategy']}** — {figures(other)}"
            + (" (a tie settled by memory)." if other["settled_by_memory"] else "."))


def lightest_text(rec: Measurement812, budgets: dict[str, dict[str, float]]) -> str:
    """The lightest strategy shown no slower than plain fp32 per training window (Markdown; analysis.
    lightest_at_full_speed), "" if none."""
    light = lightest_at_full_speed(rec, budgets)
    return "" if not light else (f"Lightest strategy shown no slower than plain fp32 per training window (interval's "
                                 f"upper end ≤ 1): **{light['strategy']}** — {figures(light)}.")


def workspace_table(rec: Measurement812) -> pd.DataFrame:
    """The cuBLAS workspace knob (workspace.py): each strategy at the default size and the small one,
    measured in fresh processes; empty where it was not measured."""
    pct = f"{100 * shared_confidence(k.ratio for k in rec.workspace_knob):g} %"
    return pd.DataFrame([{"strategy": k.name, "model peak (MB), default": to_mb(k.model_peak_bytes),
                          f"model peak (MB), {k.setting}": to_mb(k.small_model_peak_bytes),
                          "allocator peak (MB), default": to_mb(k.allocator_peak_bytes),
                          f"allocator peak (MB), {k.setting}": to_mb(k.small_allocator_peak_bytes),
                          "saved (MB)": to_mb(k.saved_bytes),
                          "step (ms, median of rounds), default": _median_ms(k.step_s),
                          f"step (ms, median of rounds), {k.setting}": _median_ms(k.small_step_s),
                          f"step ratio {k.setting} / default [{pct}]": k.ratio.range_text(),
                          "reads as": ("slower" if k.costs_time else f"within {100 * MAX_SLOWDOWN:g} %"
                                       if k.shown_slower else "faster" if k.ratio.high < 1 else "a tie")}
                         for k in rec.workspace_knob])


def targets(record: Measurement812, budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """How far the recommendation is from the targets (benchmarks, not checks): a peak at most
    TARGET_PEAK_OVER_FLOOR × the fp32 Adam floor, accuracy within TARGET_ACCURACY_PCT of fp32, a step no slower
    than plain fp32."""
    r = recommend(record, budgets)
    if r["strategy"] is None:
        return pd.DataFrame()
    return pd.DataFrame([
        {"target": f"peak ≤ {TARGET_PEAK_OVER_FLOOR:g} × the {FLOOR_BYTES_PER_PARAMETER} B/param floor",
         "floor (MB)": to_mb(r["floor_bytes"]), "target (MB)": to_mb(TARGET_PEAK_OVER_FLOOR * r["floor_bytes"]),
         "measured": f"{r['peak_bytes'] / MB:,.1f} MB ({r['peak_over_floor']:.2f} × floor)",
         "met": r["peak_over_floor"] <= TARGET_PEAK_OVER_FLOOR},
        {"target": f"accuracy within {TARGET_ACCURACY_PCT:g} % of fp32", "floor (MB)": None, "target (MB)": None,
         "measured": f"{r['accuracy_impact_pct']:+.2f} %", "met": r["accuracy_impact_pct"] <= TARGET_ACCURACY_PCT},
        {"target": "step no slower than plain fp32 (interval's upper end ≤ 1)", "floor (MB)": None, "target (MB)": None,
         "measured": r["interval"], "met": record[r["strategy"]].window_ratio.high <= 1.0},
    ])


def accuracy_skill(rec: Measurement812) -> pd.DataFrame:
    """Per set of accuracy runs (one per distinct function): climatology's and the model's validation
    quantile loss, the skill score per seed, 10-90 coverage, seeds with skill. An accuracy impact means
    something only where the fp32 baseline's runs have skill."""
    return pd.DataFrame([{"accuracy runs of": name, **skill_columns(skill_row(
        [dataclasses.asdict(x) for x in rs], [x.seed for x in rs], rs[0].min_skill))}
        for name, rs in rec.accuracy_runs.items()])


def same_function_table(same: dict[str, Equivalence], errors: dict[str, str]) -> pd.DataFrame:
    """A record's same-function figures (records.same_function_figures), one row per strategy claimed equal:
    those checked, then those that could not be, with why."""
    rows = [{"strategy": name, "precision": e.precision, "device": e.device,
             "outputs max |Δ|": f"{e.output_max_abs_diff:.2e}", "outputs max |Δ| / max |ref|": f"{e.output_rel_diff:.2e}",
             "gradients max |Δ|": f"{e.grad_max_abs_diff:.2e}", "gradients max |Δ| / max |ref|": f"{e.grad_rel_diff:.2e}",
             "worst gradient": e.worst_parameter, "tolerance (relative)": f"{e.tolerance_rel:.0e}", "same function": e.same}
            for name, e in same.items()]
    return pd.DataFrame(rows + [{"strategy": name, "error": why} for name, why in errors.items()])


# the fast path's targets for the seed TFT on a large GPU (benchmarks, not checks: foxlib/waves/wave_8_12)
TARGET_ALLOCATOR_PEAK_BYTES = 330 * MB
TARGET_STEP_S = 0.006
TARGET_PEAK_OVER_FLOOR = 1.6  # the recommendation's peak over the fp32 Adam floor
TARGET_ACCURACY_PCT = 1.0  # the recommendation's accuracy impact against fp32


def floors_table(rec: Measurement812, budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The recommendation, the best of each kind (eager, CUDA graph) and the lightest at full speed beside the
    floors (foxlib.harness.floors: bytes per parameter; time from the step's FLOPs and the optimizer's traffic at
    the device's published peaks) and the fast path's targets, with how far each is."""
    fl, rows = rec.floors, []
    picks = (recommend(rec, budgets), *(recommend(rec, budgets, cuda_graph=kind) for kind in (False, True)),
             lightest_at_full_speed(rec, budgets) or {"strategy": None})
    for name in dict.fromkeys(r["strategy"] for r in picks if r["strategy"]):  # each once, in that order
        s, k = rec[name], rec.knob(name)
        step_s = s.timing.median_s
        peak_kind = "bf16" if s.precision != "fp32" else ("tf32" if s.options.tf32 else "fp32")
        arithmetic = (fl.time_floor_s or {}).get(peak_kind)
        floor_s = None if arithmetic is None else max(arithmetic, fl.traffic_floor_s or 0)
        rows += [
            {"strategy": name, "quantity": "model peak (MB)", "measured": to_mb(s.peak_bytes),
             "floor": f"{to_mb(fl.bytes_floor)} ({FLOOR_BYTES_PER_PARAMETER} B/param); {to_mb(fl.bytes_floor_in_backward)} "
                      f"({FLOOR_BYTES_PER_PARAMETER_IN_BACKWARD} B/param, Adam in backward)", "target": None,
             "× floor": round(s.peak_bytes / fl.bytes_floor, 2)},
            {"strategy": name, "quantity": "allocator peak (MB: + its cuBLAS workspaces)",
             "measured": to_mb(s.allocator_peak_bytes), "floor": to_mb(fl.bytes_floor),
             "target": to_mb(TARGET_ALLOCATOR_PEAK_BYTES),
             "× floor": None if s.allocator_peak_bytes is None else round(s.allocator_peak_bytes / fl.bytes_floor, 2)},
            *([{"strategy": name, "quantity": f"allocator peak (MB) with {VARIABLE}={k.setting} (fresh processes)",
                 "measured": to_mb(k.small_allocator_peak_bytes), "floor": to_mb(fl.bytes_floor),
                 "target": to_mb(TARGET_ALLOCATOR_PEAK_BYTES),
                 "× floor": round(k.small_allocator_peak_bytes / fl.bytes_floor, 2)}] if k else []),
            {"strategy": name, "quantity": "step time (ms, median)", "measured": round(1000 * step_s, 2),
             "floor": None if floor_s is None else f"{1000 * floor_s:.2f} ({fl.flops / 1e9:,.0f} GFLOP at the "
                                                   f"published peak; optimizer traffic {1000 * fl.traffic_floor_s:.2f})",
             "target": 1000 * TARGET_STEP_S, "× floor": None if floor_s is None else round(step_s / floor_s, 1)},
        ]
    return pd.DataFrame(rows)


def timeline_lines(runs: dict[str, Any], own: dict[str, Any], links: dict[str, dict[str, str | None]]) -> list[str]:
    """One Markdown line per timeline (foxlib.harness.timelines: the runs, their own series from
    own_timelines, their files from keep_beside): its model peak and what the process held besides
    (where it held anything), or why it was not recorded, with links to its snapshot and PyTorch's viewer."""
    lines = []
    for n, r in ((n, r) for n, r in runs.items() if r.series is not None):
        s = own[n]
        text = (f"model peak {mb_text(s.peak_bytes)} in {s.peak_phase} (its own tensors; {mb_text(s.start_bytes)} of "
                "them live when the step began)"
                + (f"; the process held {mb_text(r.outside_bytes)} besides (workspaces, earlier measurements)"
                   if r.outside_bytes else ""))
        files = "".join(f" · [{label}]({links[n][key]})" for key, label in (("snapshot", "snapshot"),
                                                                            ("viewer_html", "PyTorch's viewer"))
                        if links[n][key])
        lines.append(f"- {n}: {text}{files}")
    return lines + [f"- {n}: not recorded ({r.skipped})" for n, r in runs.items() if r.series is None]


NO_TIMELINES = "No timelines in this measurement (`timelines=False`)."
VIEWER_NOTE = "A snapshot (.pickle) also opens in PyTorch's viewer at https://pytorch.org/memory_viz."


def timeline_section(runs: dict[str, TimelineRun] | None, title: str, budget_bytes: int, out_dir: str,
                     search_dirs: Sequence[str | os.PathLike] = ()) -> tuple[TimelineFigure | None, str]:
    """The page's live-memory section from a measurement's timelines (None: not recorded): the chart of each
    recorded step's own memory (own_timelines) beside the peak budget, with its alt text and caption, for the
    notebook to show as it shows every chart (None where no step was recorded), and the Markdown under it:
    timeline_lines, linking the snapshots that keep_beside copies into out_dir (the report's folder;
    search_dirs: where a measurement made elsewhere keeps them)."""
    from foxlib.memory.timeline_chart import timeline_chart  # matplotlib: imported where a chart is drawn
    runs = runs or {}
    own = own_timelines(runs)
    shown = [s for s in own.values() if s is not None]
    if not shown:  # asked for, none recorded: each run's reason; not asked: NO_TIMELINES
        return None, "\n".join(timeline_lines(runs, own, {})) if runs else NO_TIMELINES
    links = keep_beside(runs, out_dir, search_dirs=search_dirs)
    return (timeline_chart(shown, title, budget_bytes=budget_bytes),
            "\n".join(timeline_lines(runs, own, links)) + "\n\n" + VIEWER_NOTE)


def claim_runs_table(rec: Measurement812) -> pd.DataFrame | None:
    """The seed's speed claims against the independent runs (claim_runs.py), as analysis.claim_verdicts judged
    them (the index's ledger reads the same figures): per strategy, the seed's claim as a time ratio
    (foxlib.core.seed_claims.SPEED_READING) and its band, each run's time per window against fp32 with its
    interval, the spread, the pooled interval and the verdict. None where the runs were not made."""
    judged = claim_verdicts(rec)
    if not judged:
        return None
    rows = []
    for name, c in judged.items():
        medians = [x[0] for x in c["runs"]]
        row = {"strategy": name, "seed's claim": c["claim"], "as time per window (x fp32)": round(c["ratio"], 2),
               f"within ±{100 * seed_claims.SPEED_BAND:g} %": f"[{c['band'][0]:.2f}, {c['band'][1]:.2f}]"}
        row |= {f"run {i + 1} (x fp32)": str(r) for i, r in enumerate(rec.claim_runs[name])}
        row |= {"spread of medians": f"{min(medians):.2f}-{max(medians):.2f}",
                "pooled (x fp32, 95 %)": f"{c['centre']:.2f} [{c['low']:.2f}, {c['high']:.2f}]",
                "verdict": c["verdict"]}
        rows.append(row)
    return pd.DataFrame(rows)


def per_class_table(per_class: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """analysis.recommend_per_class as a table: per card class, the strategy to ship and its figures (or why none)."""
    rows = []
    for name, r in per_class.items():
        row = {"card class": r["card_class_title"], "configuration to ship": r["strategy"] or "none"}
        if r["strategy"]:
            row |= {"precision": r["precision"], "model peak (MB)": to_mb(r["peak_bytes"]),
                    "allocator peak (MB)": to_mb(r.get("allocator_peak_bytes")),
                    "time per window (x fp32 [interval])": r["interval"].removesuffix(" of fp32 per window"),
                    "accuracy impact (%)": round(r["accuracy_impact_pct"], 2)}
        else:
            row["why"] = r["reason"]
        rows.append(row)
    return pd.DataFrame(rows)


def claim_runs_text(absent_reason: str | None) -> str:
    """The reading of the seed's speed claims and, where the independent runs give no interval, why (the
    measurement's claim runs' absent_reason: claim_runs.py), as Markdown."""
    text = f"Reading: {seed_claims.SPEED_READING}."
    return text if absent_reason is None else f"{text}\n\nNot measured in this run: {absent_reason}."
