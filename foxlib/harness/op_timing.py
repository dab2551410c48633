"""Step times and peaks of a few recipes side by side, eager and (on CUDA) as one CUDA graph each.

`time_variants` is what `python -m foxlib.harness.op_count --time` runs after counting: for each
recipe, first its peak alone (profile_step for the eager step; on CUDA profile_graphed_step for the
graphed one, both the waves' measurements), then every step built at once and timed in alternating
rounds (foxlib.harness.timing.time_alternating: a round runs each variant once, in rotated order):
an eager sample is `eager_steps` steps, a graphed sample `replays` replays of the captured step
(the issue's 9 rounds x 20 replays). Medians per step with their IQR, and each variant's ratio to
the first recipe's of the same kind (eager or graph) with its bootstrap interval.
"""
from __future__ import annotations

import gc
from typing import Any

import torch

from foxlib.harness.recipe import StepRecipe, build_step, capture_step
from foxlib.harness.timing import ratio_interval, time_alternating


def _peaks(name: str, recipe: StepRecipe, device: torch.device) -> dict[str, Any]:
    out: dict[str, Any] = {}
    built = build_step(recipe, device)
    prof = built.profile()
    out[f"{name}, eager"] = {"model_peak_bytes": prof.peak}
    built.free()
    if device.type == "cuda":
        from foxlib.harness.recipe import graph_parts
        from foxlib.harness.step_options import backends
        from foxlib.memory.cuda_graph import profile_graphed_step
        built, loss = graph_parts(recipe, device)
        with backends(recipe.options):
            g = profile_graphed_step(built.model, built.batch, loss, built.optimizer, recipe.precision)
        out[f"{name}, graph"] = {"model_peak_bytes": g["peak"],
                                 "allocator_peak_bytes": g["peak"] + g["workspace_bytes"]}
        built.free()
    return out


def time_variants(recipes: dict[str, StepRecipe], device: str | torch.device = "cpu", *, rounds: int = 9,
                  replays: int = 20, eager_steps: int = 3, warmup: int = 2, peaks: bool = True) -> dict[str, Any]:
    """Peaks, then alternating step times (seconds per step) of every recipe, eager and graphed (CUDA)."""
    device = torch.device(device)
    result: dict[str, Any] = {"device": str(device), "rounds": rounds, "replays": replays,
                              "eager_steps": eager_steps, "variants": {}}
    if peaks:
        for name, recipe in recipes.items():
            result["variants"].update(_peaks(name, recipe, device))
            gc.collect()
    steps: dict[str, Any] = {}
    kept = []
    for name, recipe in recipes.items():
        built = build_step(recipe, device)
        kept.append(built)
        steps[f"{name}, eager"] = (lambda s=built.step: [s() for _ in range(eager_steps)], eager_steps)
        if device.type == "cuda":
            graph_built, graphed = capture_step(recipe, device)
            kept.append((graph_built, graphed))
            steps[f"{name}, graph"] = (lambda g=graphed: [g() for _ in range(replays)], replays)
    timings = time_alternating({n: fn for n, (fn, _) in steps.items()}, repeats=rounds, warmup=warmup,
                               device=device)
    first = {kind: next(n for n in steps if n.endswith(kind)) for kind in ("eager", "graph") if
             any(n.endswith(kind) for n in steps)}
    for n, t in timings.items():
        per = steps[n][1]
        kind = n.rsplit(", ", 1)[1]
        row = result["variants"].setdefault(n, {})
        row.update(median_ms=1e3 * t.median_s / per, iqr_ms=1e3 * t.iqr_s / per, noisy=t.noisy,
                   samples_ms=[1e3 * s / per for s in t.samples])
        if n != first[kind]:
            row["ratio_to"] = first[kind]
            row["ratio"] = ratio_interval(timings, n, first[kind]).to_dict()
    for name, row in result["variants"].items():
        line = f"{name:48s}"
        if "median_ms" in row:
            line += f" {row['median_ms']:8.2f} ms/step (IQR {row['iqr_ms']:.2f})"
        if "ratio" in row:
            r = row["ratio"]
            line += f"  {r['median']:.3f}x [{r['low']:.3f}, {r['high']:.3f}] of the first"
        for k in ("model_peak_bytes", "allocator_peak_bytes"):
            if k in row:
                line += f"  {k.split('_bytes')[0]} {row[k] / 1e6:.1f} MB"
        print(line, flush=True)
    del kept, steps
    gc.collect()
    return result
