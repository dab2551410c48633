"""One TFT training step measured in a fresh Python process, with environment variables that only
act before CUDA starts, e.g. the cuBLAS workspace size (CUBLAS_WORKSPACE_CONFIG=":16:8": 8 buffers
of 16 KiB instead of the default's MiBs per stream).

`measure_in_fresh_process(spec, env)` runs `python -m foxlib.harness.fresh_process` with the spec
(JSON on stdin: preset, overrides, precision, options, cuda_graph, steps) and returns what the child
printed: its allocator peak over one step after three warm-up steps (max_memory_allocated: the step's tensors
and the workspaces of the streams it used), what was allocated before that step, and the median of
`steps` step times (timed in that process alone: not alternated with other variants). A spec of
{"variants": {name: spec}} measures several steps in the child instead: each one's profile as the waves
record it ("profile": true; foxlib.harness.measure_step), then all timed alternating in it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import torch

from foxlib.harness.measure_step import profile_graphed
from foxlib.harness.recipe import StepRecipe, build_step, capture_step, graph_parts
from foxlib.harness.step_options import StepOptions, backends
from foxlib.harness.timing import time_alternating
from foxlib.models import MODELS

WARMUP_STEPS = 3
TIMEOUT_S = 600


def measure_in_fresh_process(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The child's result as a dict; {"error": ...} when it failed (its last output lines said why)."""
    run = subprocess.run([sys.executable, "-m", "foxlib.harness.fresh_process"], input=json.dumps(spec),
                         capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, **(env or {})})
    if run.returncode != 0:
        return {"error": f"exit {run.returncode}: " + " | ".join((run.stderr or run.stdout).strip().splitlines()[-3:]),
                "env": env or {}}
    return {**json.loads(run.stdout.strip().splitlines()[-1]), "env": env or {}}


def _measure(spec: dict[str, Any]) -> dict[str, Any]:
    device = torch.device(spec.get("device", "cuda"))
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    recipe = _recipe(spec)
    options = recipe.options
    if spec.get("cuda_graph"):
        from foxlib.memory.cuda_graph import GraphedStep
        built, loss = graph_parts(recipe, device)
        with backends(options):
            graphed = GraphedStep(built.model, built.batch, loss, built.optimizer, recipe.precision,
                                  warmup=WARMUP_STEPS)
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            step = graphed.capture()
            step()
    else:
        step = build_step(recipe, device).step
        for _ in range(WARMUP_STEPS):
            step()
        sync()
        before = torch.cuda.memory_allocated(device) if cuda else None
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        step()
    sync()
    peak = torch.cuda.max_memory_allocated(device) if cuda else None  # the CPU has no allocator peak to read
    times = []
    for _ in range(spec.get("steps", 20)):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return {"allocator_peak_bytes": peak, "allocated_before_step_bytes": before,
            "step_s_median": statistics.median(times), "step_s_samples": times,
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}


def _recipe(spec: dict[str, Any]) -> StepRecipe:
    cfg = dataclasses.replace(MODELS["tft"].preset(spec.get("preset", "seed")), **spec.get("overrides", {}))
    return StepRecipe("tft", cfg, spec.get("precision", "fp32"), spec.get("seed", 0),
                      StepOptions.from_dict(spec.get("options")))


def _measure_variants(spec: dict[str, Any]) -> dict[str, Any]:
    """Several steps in one process ({"variants": {name: spec}}): each profiled first on a model of its
    own ("profile": true), then all built and timed alternating (foxlib.harness.timing), `steps`
    rounds after WARMUP_STEPS untimed ones."""
    device = torch.device(spec.get("device", "cuda"))
    variants = {n: (_recipe(v), bool(v.get("cuda_graph"))) for n, v in spec["variants"].items()}
    profiles = {n: _profile(r, device, g) for n, (r, g) in variants.items()} if spec.get("profile") else {}
    built = {n: capture_step(r, device) if g else build_step(r, device) for n, (r, g) in variants.items()}
    steps = {n: b[1] if variants[n][1] else b.step for n, b in built.items()}
    timings = time_alternating(steps, repeats=spec.get("steps", 20), warmup=WARMUP_STEPS, device=device)
    return {"variants": {n: {"profile": profiles.get(n), "step_s_samples": list(t.samples), "step_s_median": t.median_s}
                         for n, t in timings.items()},
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}


def _profile(recipe: StepRecipe, device: torch.device, cuda_graph: bool) -> dict[str, Any]:
    """The step's profile as the waves measure it in-process (foxlib.harness.measure_step), its model
    and optimizer freed before the timed step is built."""
    if cuda_graph:
        return profile_graphed(recipe, device)
    step = build_step(recipe, device)
    out = step.profile().to_dict()
    step.free()
    return out


if __name__ == "__main__":
    asked = json.loads(sys.stdin.read())
    print(json.dumps(_measure_variants(asked) if "variants" in asked else _measure(asked)))
