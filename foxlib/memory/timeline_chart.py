"""Charts of live memory through a training step (foxlib.memory.live_series.MemoryTimeline), one
panel per configuration side by side on one y-axis: phases shaded, the peak marked and its owner
named under the panel, the bytes the forward leaves for backward marked. Linear axes, MB = 10^6 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from foxlib.core.config import MB
from foxlib.core.figures import mb_text
from foxlib.memory.live_series import PHASES, MemoryTimeline

PHASE_COLOURS = {"forward": "#dbe9f6", "backward": "#fbe3d6", "optimizer step": "#e2f0d9"}
LINE = "#1f4e79"
PEAK = "#cf222e"
FORWARD_END = "#7a5195"
START = "#8c8c8c"
OWNER_CHARS = 46  # an owner's name is cut to this many characters under its panel
LABEL_CHAR_WIDTH = 0.065  # inches per character of a 7.5 pt phase name (for placing them apart)


@dataclass(frozen=True)
class TimelineFigure:
    """A chart with the words that go with it: alt text (what it shows, for a reader who cannot see
    it) and a caption (how to read it, and how it was measured)."""
    figure: plt.Figure
    alt_text: str
    caption: str


def _short(text: str, n: int = OWNER_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def timeline_chart(series: Sequence[MemoryTimeline], title: str, *, budget_bytes: int | None = None
                   ) -> TimelineFigure:
    """One panel per series, side by side, sharing the y-axis (MB), each with its own time axis (ms)."""
    if not series:
        raise ValueError("timeline_chart needs at least one MemoryTimeline")
    n = len(series)
    fig, (axes,) = plt.subplots(1, n, figsize=(max(5.5, 4.6 * n), 6.4), sharey=True, squeeze=False)
    panel_width_in = fig.get_figwidth() / n * 0.85
    top = max(max(s.peak_bytes for s in series), budget_bytes or 0) / MB * 1.08
    for ax, s in zip(axes, series):
        span = max(s.x_ms[-1], s.phases[-1].end_ms if s.phases else 0) or 1.0
        ends: list[float] = []  # per row of names: where the last name put there ends (axes fraction)
        for ph in s.phases:
            ax.axvspan(ph.start_ms, ph.end_ms, color=PHASE_COLOURS.get(ph.name, "#eeeeee"), lw=0, zorder=0)
            # the phase's name above the plot area, where no data is; one row up if it would run into
            # the name before it
            centre = (ph.start_ms + ph.end_ms) / 2 / span
            half = len(ph.name) * LABEL_CHAR_WIDTH / panel_width_in / 2
            row = next((r for r, end in enumerate(ends) if centre - half > end), len(ends))
            ends[row:row + 1] = [centre + half]
            ax.text(centre, 1.01 + 0.05 * row, ph.name, transform=ax.transAxes,
                    ha="center", va="bottom", fontsize=7.5, color="#333", clip_on=False)
        ax.plot(s.x_ms, [b / MB for b in s.live_bytes], drawstyle="steps-post", color=LINE, lw=1.2, zorder=3)
        ax.axhline(s.start_bytes / MB, color=START, ls=":", lw=1, zorder=2)
        if s.forward_end_bytes is not None and s.phases:
            ax.plot([s.phases[0].end_ms], [s.forward_end_bytes / MB], "D", color=FORWARD_END, ms=6, zorder=4)
        ax.plot([s.peak_ms], [s.peak_bytes / MB], "v", color=PEAK, ms=9, zorder=5)
        if budget_bytes is not None:
            ax.axhline(budget_bytes / MB, color="black", ls="--", lw=1.1, zorder=2)
        ax.set_title(f"{s.label}\npeak {mb_text(s.peak_bytes)} in {s.peak_phase}", fontsize=9.5, pad=30)
        ax.set(xlabel="time since the step began (ms)", xlim=(0, span), ylim=(0, top))
        lines = [f"▼ peak {mb_text(s.peak_bytes)}; largest owners live at it:",
                 *(f"  {mb_text(o.bytes)} ×{o.count}: {_short(o.name)}" for o in s.owners[:2])]
        if s.forward_end_bytes is not None:
            lines.append(f"◆ left for backward at forward end: {mb_text(s.forward_end_bytes - s.start_bytes)}")
        ax.text(0.0, -0.2, "\n".join(lines), transform=ax.transAxes, ha="left", va="top", fontsize=7.2,
                family="monospace")
    axes[0].set_ylabel("live tensor memory (MB = 10^6 bytes)")
    handles = [Line2D([], [], color=LINE, lw=1.2, label="live tensor bytes (allocator)"),
               Line2D([], [], color=START, ls=":", label="live when the step began (weights, Adam state, batch)"),
               Line2D([], [], marker="D", ls="none", color=FORWARD_END, label="live at the forward's end"),
               Line2D([], [], marker="v", ls="none", color=PEAK, ms=9, label="peak (owners under each panel)")]
    shown = [p for p in PHASES if any(ph.name == p for s in series for ph in s.phases)]
    handles += [Patch(color=PHASE_COLOURS[p], label=f"{p} phase") for p in shown]
    if budget_bytes is not None:
        handles.append(Line2D([], [], color="black", ls="--", label=f"peak budget {mb_text(budget_bytes)}"))
    fig.suptitle(title, y=0.995, fontsize=11)
    fig.legend(handles=handles, loc="upper center", ncol=min(4, len(handles)), fontsize=8,
               bbox_to_anchor=(0.5, 0.955), frameon=False)
    fig.subplots_adjust(left=0.9 / fig.get_figwidth(), right=0.98, top=0.70, bottom=0.28, wspace=0.14)
    return TimelineFigure(fig, alt_text(series, title, budget_bytes), caption(series, budget_bytes))


def alt_text(series: Sequence[MemoryTimeline], title: str, budget_bytes: int | None = None) -> str:
    parts = [f"{title}. {len(series)} line chart{'s' if len(series) > 1 else ''} side by side of live tensor "
             "memory in MB against time in ms through one training step, phases shaded."]
    for s in series:
        owner = f", largest owner {s.owner.name} ({mb_text(s.owner.bytes)})" if s.owner else ""
        fwd = (f"; the forward leaves {mb_text(s.forward_end_bytes - s.start_bytes)} for backward"
               if s.forward_end_bytes is not None else "")
        parts.append(f"{s.label}: starts at {mb_text(s.start_bytes)}, peaks at {mb_text(s.peak_bytes)} at "
                     f"{s.peak_ms:,.1f} ms in {s.peak_phase}{owner}{fwd}.")
    if budget_bytes is not None:
        over = [s.label for s in series if s.peak_bytes > budget_bytes]
        parts.append(f"Budget line at {mb_text(budget_bytes)}; over it: {', '.join(over) if over else 'none'}.")
    return " ".join(parts)


def caption(series: Sequence[MemoryTimeline], budget_bytes: int | None = None) -> str:
    devices = sorted({s.device for s in series})
    text = ("Live tensor memory through one measured training step (forward + loss, backward, optimizer "
            "step), one panel per configuration on one y-axis (MB = 10^6 bytes; linear axes; each panel's time "
            "in its own ms, since the steps differ in length). Dotted: bytes live when the step began; "
            "diamond: bytes live when the forward ended (what it keeps for backward); triangle: the step's peak, "
            "with the largest groups of allocations live at it named under the panel (grouped by the code "
            "that made them). ")
    if len({s.peak_bytes for s in series}) > 1 and max(s.peak_bytes for s in series) > 0:
        lo, hi = (extreme(series, key=lambda s: s.peak_bytes) for extreme in (min, max))
        text += (f"Peaks range from {mb_text(lo.peak_bytes)} ({lo.label}) to {mb_text(hi.peak_bytes)} ({hi.label}). ")
    text += comparison(series)
    if "cpu" in devices:
        text += ("On the CPU the profiler records every op, which slows the step: the times are the profiled "
                 "step's, for order only, not its speed. ")
    text += f"Device: {', '.join(devices)}. Method: {' / '.join(sorted({s.method for s in series}))}."
    return text


def comparison(series: Sequence[MemoryTimeline]) -> str:
    """Each series against the first: what its forward leaves for backward and its peak, in words."""
    ref = series[0]
    if len(series) < 2 or ref.forward_end_bytes is None:
        return ""
    held = lambda s: s.forward_end_bytes - s.start_bytes  # noqa: E731
    change = lambda s: (s.peak_bytes - ref.peak_bytes) / ref.peak_bytes if ref.peak_bytes else 0.0  # noqa: E731
    parts = [f"{s.label} leaves {mb_text(held(s))} for backward and peaks at {mb_text(s.peak_bytes)} "
             f"({100 * change(s):+.1f} %) in {s.peak_phase}" for s in series[1:] if s.forward_end_bytes is not None]
    return (f"Against {ref.label} (forward leaves {mb_text(held(ref))} for backward; peak {mb_text(ref.peak_bytes)} in "
            f"{ref.peak_phase}): " + "; ".join(parts) + ". ") if parts else ""
