"""Step times and peaks of a few recipes side by side, eager and (on CUDA) as one CUDA graph each, for
`python -m foxlib.harness.op_count --time`. A fresh process (foxlib.harness.fresh_process) profiles each variant
on a model of its own, then times them all in alternating rounds, so nothing this process made is in its peaks.
The allocator peak is the model peak + the step's own cuBLAS workspaces (foxlib.memory.cuda_graph.own_workspace),
as wave 8.12 reports it.
Each variant's ratio to the first recipe's of the same kind (eager or graph) comes with its bootstrap interval.
"""
from __future__ import annotations

from typing import Any

import torch

from foxlib.harness.fresh_process import measure_in_fresh_process, variant_spec
from foxlib.harness.recipe import StepRecipe
from foxlib.harness.timing import Timing, interval_of_samples
from foxlib.memory.cuda_graph import own_workspace, profile_from_dict


def time_variants(recipes: dict[str, StepRecipe], device: str | torch.device = "cpu", *,
                  rounds: int = 180) -> dict[str, Any]:
    """Peaks, then alternating step times of every recipe, eager and graphed (CUDA), in one fresh process:
    `rounds` rounds, each running every variant's step once. {"device", "rounds", "variants": {name: {...}}}."""
    device = torch.device(device)
    kinds = ("eager", "graph") if device.type == "cuda" else ("eager",)
    # each config as overrides of the seed preset: the child rebuilds it exactly (variant_spec)
    variants = {f"{name}, {kind}": variant_spec(r.cfg, "seed", r.precision, r.seed, device, kind == "graph", r.options)
                for name, r in recipes.items() for kind in kinds}
    child = measure_in_fresh_process({"device": device.type, "profile": True, "steps": rounds, "variants": variants})
    if "error" in child:
        raise RuntimeError(f"the timing process failed: {child['error']}")
    result: dict[str, Any] = {"device": str(device), "rounds": rounds, "variants": {}}
    first = {kind: next(n for n in variants if n.endswith(kind)) for kind in kinds}
    for n, v in child["variants"].items():
        prof, kind = v["profile"], n.rsplit(", ", 1)[1]
        t = Timing(n, tuple(v["step_s_samples"]))
        own = own_workspace(profile_from_dict(prof))
        row = {"model_peak_bytes": prof["peak"], "allocator_peak_bytes": None if own is None else prof["peak"] + own,
               "median_ms": 1e3 * t.median_s, "iqr_ms": 1e3 * t.iqr_s,
               "noisy": t.noisy, "samples_ms": [1e3 * s for s in t.samples]}
        if n != first[kind]:
            base = child["variants"][first[kind]]["step_s_samples"]
            row["ratio_to"] = first[kind]
            row["ratio"] = interval_of_samples(v["step_s_samples"], base).to_dict()
        result["variants"][n] = row
    for name, row in result["variants"].items():
        line = f"{name:48s} {row['median_ms']:8.2f} ms/step (IQR {row['iqr_ms']:.2f})"
        if "ratio" in row:
            r = row["ratio"]
            line += f"  {r['median']:.3f}x [{r['low']:.3f}, {r['high']:.3f}] of the first"
        line += f"  model peak {row['model_peak_bytes'] / 1e6:.1f} MB"
        if row["allocator_peak_bytes"] is not None:
            line += f", allocator peak {row['allocator_peak_bytes'] / 1e6:.1f} MB"
        print(line, flush=True)
    return result
