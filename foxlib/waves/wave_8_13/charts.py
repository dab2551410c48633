"""The report's charts (matplotlib, imported when one is drawn): every step of the interleaved
training run against the card, and each model's inference latency alone and all at once."""
from __future__ import annotations

import numpy as np

from foxlib.core.config import MB
from foxlib.waves.wave_8_13.analysis import figure, how
from foxlib.waves.wave_8_13.records import Measurement


COLOURS = {"dqn": "#4c72b0", "ppo": "#55a868", "mamba2": "#c44e52", "tft": "#8172b2"}


def training_chart(r: Measurement):
    """Every step of the interleaved run: allocated during it (all models) + context, against the card;
    NVML's process samples of the training phase beside it where there are any."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps, cap = r.training.steps, r.cap
    ctx = cap.context_bytes
    fig, ax = plt.subplots(figsize=(9, 4))
    for name in r.order:
        xs = [k for k, s in enumerate(steps, 1) if s.model == name]
        ys = [(s.peak_bytes + ctx) / MB for s in steps if s.model == name]
        ax.scatter(xs, ys, s=18, color=COLOURS.get(name),
                   label=f"{name} step: allocated, all models" + (" + context" if ctx else ""))
        res = [(s.reserved_peak_bytes + ctx) / MB for s in steps
               if s.model == name and s.reserved_peak_bytes is not None]
        if res:
            ax.scatter(xs, res, s=18, marker="_", color=COLOURS.get(name))
    nv = [v for v in r.nvml.values("training") if v is not None]
    if nv:
        ax.axhline(max(nv) / MB, color="#d62728", ls="-.", lw=1)
        ax.text(0.5, max(nv) / MB, f" largest NVML process figure {max(nv) / MB:,.0f} MB", va="bottom", fontsize=8)
    ax.axhline(cap.limit_bytes / MB, color="black", ls="--", lw=1.2)
    ax.text(0.5, cap.limit_bytes / MB, f" card {cap.limit_bytes / MB:,.0f} MB", va="bottom", fontsize=8)
    if ctx:
        ax.axhline(ctx / MB, color="#999", ls=":", lw=1)
        ax.text(0.5, ctx / MB, f" CUDA context {ctx / MB:,.0f} MB (outside the cap)", va="bottom", fontsize=8)
    if r.training.oom:
        x = len(steps) + 1
        y = min(figure(r, "training"), 1.05 * cap.limit_bytes) / MB
        ax.scatter([x], [y], marker="X", s=90, color="red", label=f"out of memory {r.training.oom.where}")
    ax.set_xlabel("step of the interleaved run (round-robin: " + " → ".join(r.order) + ")")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")  # a small model's step and the card on one chart
    ax.set_ylabel("MB (10^6 bytes), log scale")
    ax.set_title(f"Ensemble training under the cap — {r.device.name} — {how(r)}", fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    return fig


def latency_chart(r: Measurement):
    import matplotlib.pyplot as plt

    i = r.inference
    names = [n for n in r.order if n in i.models and i.models[n].together]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if not names:
        ax.text(0.5, 0.5, "no concurrent inference ran (out of memory)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    x = np.arange(len(names))
    alone = [1e3 * i.models[n].alone.p50_s for n in names]
    p50 = [1e3 * i.models[n].together.p50_s for n in names]
    p99 = [1e3 * i.models[n].together.p99_s for n in names]
    ax.bar(x - 0.2, alone, 0.4, color="#bbb", label="alone, p50")
    ax.bar(x + 0.2, p50, 0.4, color=[COLOURS.get(n) for n in names], label="together, p50 (model colours)")
    ax.errorbar(x + 0.2, p50, yerr=[[0] * len(names), [b - a for a, b in zip(p50, p99)]], fmt="none",
                ecolor="black", capsize=4, label="together, p99")
    ax.set_xticks(x, names)
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Inference latency, {len(names)} models at once ({i.mode}), {i.repeats} rounds", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
