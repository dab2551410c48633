"""Charts for the reports. Each takes measured figures (bytes, ratios with their intervals, losses) as a wave's
analysis or record holds them, never recomputing them, and returns a matplotlib Figure (memory in MB)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import matplotlib.ticker
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from foxlib.core import seed_claims
from foxlib.core.config import MB
from foxlib.harness.timing import shared_confidence

if TYPE_CHECKING:  # types only: the charts read their fields (the accuracy harness is not needed to draw them)
    from foxlib.harness.training import Degradation
    from foxlib.memory.profile import MemoryProfile

CATEGORY_COLOURS = {
    "parameters": "#4c72b0", "gradients": "#dd8452", "optimizer state": "#55a868",
    "activations": "#c44e52", "buffers (device)": "#8172b3", "temporaries": "#937860",
    "CUDA context": "#8c8c8c", "workspaces": "#bcbd22",
}


# a step profile's categories as the stacked bars show them, bottom up: label -> MemoryProfile field
STACKED = {"parameters": "parameters", "gradients": "gradients", "optimizer state": "optimizer_state",
           "activations": "activations", "buffers (device)": "device_buffers", "temporaries": "temporaries"}


def _stack(ax, x: list, profiles: list[MemoryProfile], width: float, labels=tuple(STACKED)) -> None:
    """One bar per profile at `x`: its categories of `labels` (STACKED) in MB, stacked in order, by colour."""
    bottoms = [0.0] * len(x)
    for label in labels:
        vals = [getattr(p, STACKED[label]) / MB for p in profiles]
        ax.bar(x, vals, width, bottom=bottoms, color=CATEGORY_COLOURS[label], label=label)
        bottoms = [b + v for b, v in zip(bottoms, vals)]


def _finish(fig: plt.Figure, ax, title: str, **legend) -> plt.Figure:
    """The chart's title and its legend (matplotlib's legend() arguments), laid out tight."""
    ax.set_title(title)
    ax.legend(**legend)
    fig.tight_layout()
    return fig


def breakdown(profile: MemoryProfile, budgets_mb: dict[str, float], title: str) -> plt.Figure:
    """Measured categories (bars) with their budgets (red lines) and the seed's figures (hollow marks)."""
    seed = seed_claims.TFT_8_10_MB
    rows = [("parameters", profile.parameters, budgets_mb["parameters_mb"], seed["parameters"]),
            ("forward activations", profile.activations, budgets_mb["forward_activations_mb"], seed["activations"]),
            ("gradients", profile.gradients, budgets_mb["gradients_mb"], seed["gradients"]),
            ("optimizer state", profile.optimizer_state, budgets_mb["optimizer_state_mb"], seed["optimizer_state"]),
            ("model peak", profile.peak, budgets_mb["peak_training_mb"], seed["peak"])]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for i, (name, measured, budget, seed_mb) in enumerate(rows):
        ok = measured <= budget * MB
        ax.barh(i, measured / MB, color="#1a7f37" if ok else "#cf222e", alpha=0.85,
                label="measured (foxlib)" if i == 0 else None)
        ax.plot([budget, budget], [i - 0.4, i + 0.4], color="black", lw=2, label="budget" if i == 0 else None)
        ax.plot(seed_mb, i, marker="o", mfc="none", mec="#555", ms=9, ls="none",
                label="seed (nvidia-smi)" if i == 0 else None)
        ax.text(measured / MB, i, f" {measured / MB:,.0f}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("memory (MB = 10^6 bytes)")
    return _finish(fig, ax, title, loc="upper right", fontsize=8)


def activations_by_module(by_module: dict[str, int], title: str) -> plt.Figure:
    items = sorted(by_module.items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(items) + 1.2))
    ax.barh([k for k, _ in items], [v / MB for _, v in items], color=CATEGORY_COLOURS["activations"])
    total = sum(by_module.values()) or 1
    for i, (_, v) in enumerate(items):
        ax.text(v / MB, i, f" {v / MB:,.1f} MB ({100 * v / total:.0f} %)", va="center", fontsize=8)
    ax.set_xlabel("saved for backward (MB = 10^6 bytes)")
    ax.set_title(title)
    ax.set_xlim(0, max(v for _, v in items) / MB * 1.35 if items else 1)
    fig.tight_layout()
    return fig


def ensemble(profiles: dict[str, MemoryProfile], totals, card_mb: float, title: str) -> plt.Figure:
    """Per model its categories stacked, its model peak marked (from `totals`, the table's figures); the
    process's cuBLAS workspaces and CUDA context once each; the card's size as a line; the seed's per-model
    figures as hollow bars beside. The title's process peak and share are `totals`' (never recomputed)."""
    names = list(profiles)
    fig, ax = plt.subplots(figsize=(8, 4))
    x = list(range(len(names)))
    _stack(ax, [i - 0.2 for i in x], [profiles[n] for n in names], 0.4)
    for i, n in enumerate(names):
        peak = totals.model_peaks[n] / MB
        ax.plot([i - 0.4, i], [peak, peak], color="black", lw=1.5, label="model peak" if i == 0 else None)
        ax.text(i - 0.2, peak, f"{peak:,.0f}", ha="center", va="bottom", fontsize=7)
    seed_vals = [seed_claims.ENSEMBLE_CURRENT_MB.get(n, 0) for n in names]
    ax.bar([i + 0.2 for i in x], seed_vals, 0.4, fill=False, edgecolor="#555", hatch="//", label="seed (nvidia-smi)")
    for label, value, colour in (("cuBLAS workspaces (once)", totals.workspace_bytes, CATEGORY_COLOURS["workspaces"]),
                                 ("CUDA context (once)", totals.context_bytes, CATEGORY_COLOURS["CUDA context"])):
        if value:
            ax.bar(len(names) - 0.2, value / MB, 0.4, color=colour, label=label)
            names = names + [label.split(" (")[0].replace("cuBLAS ", "")]
    ax.axhline(card_mb, color="black", lw=1.5, ls="--")
    ax.text(-0.4, card_mb, f"4 GB card: {card_mb:,.0f} MB", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("training memory (MB = 10^6 bytes)")
    what = "model peaks + workspaces + context" if totals.on_cuda else "model peaks' sum (CPU)"
    return _finish(fig, ax, f"{title}\nprocess peak ({what}) {totals.process_peak / MB:,.0f} MB = "
                   f"{100 * totals.share_of(card_mb * MB):.1f} % of the card", fontsize=7, ncol=2)


def precision_memory(profiles: dict[str, MemoryProfile], budget_mb: float, seed_expectation_mb: dict[str, float],
                     title: str) -> plt.Figure:
    """Per precision: the step's categories stacked, the model peak marked, the seed's expectation beside."""
    names = list(profiles)
    fig, ax = plt.subplots(figsize=(8, 4))
    _stack(ax, names, [profiles[n] for n in names], 0.5, [k for k in STACKED if k != "buffers (device)"])
    for i, n in enumerate(names):
        peak = profiles[n].peak / MB
        ax.text(i, peak, f"model peak {peak:,.0f}", ha="center", va="bottom", fontsize=8)
        if n in seed_expectation_mb:
            ax.plot([i - 0.3, i + 0.3], [seed_expectation_mb[n]] * 2, color="#555", ls=":", lw=2,
                    label="seed's expectation")
    ax.axhline(budget_mb, color="black", lw=1.5, ls="--", label=f"budget {budget_mb:,.0f} MB")
    ax.set_ylabel("memory of one training step (MB = 10^6 bytes)")
    return _finish(fig, ax, title, fontsize=7, ncol=2)


LOG_AXIS_SPREAD = 30  # ratios spanning more than this factor get a log axis (the axis label says so)


def pareto(record, front: list[str], budget_mb: float, max_slowdown: float, recommended: str | None,
           title: str) -> plt.Figure:
    """Peak memory against time per training window (ratio to fp32, bar: its confidence interval) per
    strategy, from a wave 8.12 record (its StrategyResults' peak_bytes and window_ratio, read as they
    are); eager steps as circles, CUDA-graph steps as squares; the Pareto front joined, the peak budget
    and the slowdown limit as lines, the recommended point ringed."""
    strategies = list(record.strategies)
    fig, ax = plt.subplots(figsize=(14, 6.5))
    key = []  # every point is numbered; the names are listed beside the plot (22 labels would overlap)
    for i, s in enumerate(strategies, start=1):
        iv, y = s.window_ratio, s.peak_bytes / MB
        on_front = s.name in front
        colour = "#cf222e" if s.name == recommended else ("#1a7f37" if on_front else "#8c8c8c")
        ax.errorbar(iv.median, y, xerr=[[iv.median - iv.low], [iv.high - iv.median]], fmt="s" if s.cuda_graph else "o",
                    ms=8 if on_front else 6, color=colour, ecolor=colour, elinewidth=1.2, capsize=3)
        if s.name == recommended:
            ax.plot(iv.median, y, "o", ms=18, mfc="none", mec="#cf222e", mew=2)
        ax.annotate(str(i), (iv.median, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
        mark = " (recommended)" if s.name == recommended else (" (Pareto front)" if on_front else "")
        key.append(f"{i:>2}  {s.name}{mark}  {iv}")
    ax.text(1.02, 1.0, "\n".join(key), transform=ax.transAxes, fontsize=7, va="top", family="monospace")
    f = sorted((s for s in strategies if s.name in front), key=lambda s: s.window_ratio.median)
    ax.plot([s.window_ratio.median for s in f], [s.peak_bytes / MB for s in f], "-", color="#1a7f37", lw=1)
    ax.axhline(budget_mb, color="black", ls="--", lw=1.2)
    ax.axvline(max_slowdown, color="#cf222e", ls="--", lw=1.2)
    ax.annotate(f"slowdown limit {max_slowdown:g}x", (max_slowdown, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -12), textcoords="offset points", fontsize=8, color="#cf222e")
    ax.axvline(1.0, color="#555", ls=":", lw=1)
    lows = [s.window_ratio.low for s in strategies]
    highs = [s.window_ratio.high for s in strategies] + [max_slowdown]
    log = max(highs) / min(lows) > LOG_AXIS_SPREAD
    if log:
        ax.set_xscale("log")
        ticks = [t for t in (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50) if min(lows) / 1.5 <= t <= max(highs) * 1.5]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        ax.set_xlim(0, max(highs) * 1.05)
    ax.set_ylim(bottom=0)
    pct = f"{100 * record.interval_confidence:g} %"
    ax.set_xlabel("time per training window / fp32 baseline's (ratio, linear scale)" if not log else
                  f"time per training window / fp32 baseline's (ratio, log scale: the ratios span more than "
                  f"{LOG_AXIS_SPREAD}x)")
    ax.text(0.0, -0.13, f"point: median of the per-round ratios to fp32 (alternating rounds); bar: {pct} bootstrap "
            "interval", transform=ax.transAxes, fontsize=7.5, va="top", color="#555")
    ax.set_ylabel("peak training memory (MB = 10^6 bytes)")
    ax.set_title(title)
    grey = "#8c8c8c"
    handles = [Line2D([], [], marker="o", ls="none", color=grey, label="eager step")]
    if any(s.cuda_graph for s in strategies):
        handles.append(Line2D([], [], marker="s", ls="none", color=grey, label="CUDA-graph step"))
    handles += [Line2D([], [], marker="o", color="#1a7f37", lw=1, label="Pareto front"),
               Line2D([], [], marker="o", ls="none", ms=12, mfc="none", mec="#cf222e", mew=2,
                      label=f"recommended: {recommended}" if recommended else "recommended: none"),
               Line2D([], [], color="black", ls="--", label=f"peak budget {budget_mb:,.0f} MB"),
               Line2D([], [], color="#cf222e", ls="--", label=f"slowdown limit {max_slowdown:g}x (interval's upper "
                                                              "end must be under it)"),
               Line2D([], [], color="#555", ls=":", label="fp32 baseline (1x)")]
    ax.legend(handles=handles, fontsize=7, loc="best")
    fig.subplots_adjust(left=0.06, right=0.55, bottom=0.15, top=0.93)
    return fig


def step_time_ratios(ratios: dict[str, Any], title: str) -> plt.Figure:
    """Per precision its step time as a ratio to the baseline's (point: the median of the per-round ratios)
    with its bootstrap interval (bar), from `ratios` (precision -> RatioInterval, foxlib.harness.timing: the
    figures the speed table shows, read as they are); the baseline's 1x as a line, each ratio written beside."""
    names = list(ratios)
    fig, ax = plt.subplots(figsize=(6.5, 0.55 * len(names) + 1.6))
    for i, iv in enumerate(ratios.values()):
        ax.errorbar(iv.median, i, xerr=[[iv.median - iv.low], [iv.high - iv.median]], fmt="o", color="#4c72b0",
                    ecolor="#4c72b0", elinewidth=2, capsize=4, ms=7)
        ax.annotate(f"{iv}", (iv.high, i), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    ax.axvline(1.0, color="#555", ls=":", lw=1.2, label="baseline (1x)")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    lows, highs = [r.low for r in ratios.values()], [r.high for r in ratios.values()]
    span = max(max(highs) - 1.0, 1.0 - min(lows), 0.05)
    ax.set_xlim(max(0.0, min(min(lows), 1.0) - 0.3 * span), max(max(highs), 1.0) + 0.9 * span)  # a ratio is > 0
    ax.set_xlabel(f"step time / fp32's (ratio; above 1 = slower; bar: {100 * shared_confidence(ratios.values()):g} % "
                  "bootstrap interval)")
    return _finish(fig, ax, title, fontsize=7, loc="lower right")


def accuracy_spread(rows: list[Degradation], baseline: tuple[float, str], gate: tuple[float, str], ylabel: str,
                    title: str) -> plt.Figure:
    """Per precision its mean over seeds (a diamond, written beside) and each seed's value (dots) with their range
    (min–max whisker), from `rows` (the accuracy table's rows, foxlib.harness.training.Degradation: precision,
    mean, values, read as they are); `baseline` and `gate` (value, legend label) as a dotted and a dashed line. The
    axis is zoomed on the values and the lines, not from 0: say so in the caption."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for i, r in enumerate(rows):
        vals = r.values
        ax.errorbar(i, r.mean, yerr=[[r.mean - min(vals)], [max(vals) - r.mean]], fmt="D", ms=7,
                    color="#4c72b0", ecolor="#8c8c8c", elinewidth=1.5, capsize=4, label="mean over seeds (range: whisker)"
                    if i == 0 else None)
        ax.plot([i + 0.12] * len(vals), vals, "o", color="#1f2d4d", ms=4, alpha=0.8, label="each seed" if i == 0 else None)
        ax.annotate(f"{r.mean:.4f}", (i, r.mean), xytext=(-10, 0), textcoords="offset points", ha="right",
                    va="center", fontsize=8)
    ax.axhline(baseline[0], color="#555", ls=":", lw=1.2, label=baseline[1])
    ax.axhline(gate[0], color="#cf222e", ls="--", lw=1.5, label=gate[1])
    ax.set_xticks(range(len(rows)), [r.precision for r in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    lo = min(min(min(r.values) for r in rows), baseline[0], gate[0])
    hi = max(max(max(r.values) for r in rows), baseline[0], gate[0])
    ax.set_ylim(lo - 0.15 * (hi - lo), hi + 0.5 * (hi - lo))  # room for the legend above the lines
    ax.set_ylabel(ylabel)
    return _finish(fig, ax, title, fontsize=7, loc="upper left")
