"""One TFT training step measured in a fresh Python process, with environment variables that only
act before CUDA starts, e.g. the cuBLAS workspace size (CUBLAS_WORKSPACE_CONFIG=":16:8": 8 buffers
of 16 KiB instead of the default's MiBs per stream).

`measure_in_fresh_process(spec, env)` runs `python -m foxlib.harness.fresh_process` with the spec
(JSON on stdin: config, precision, options, cuda_graph, steps) and returns what the child printed:
its allocator peak over one step after three warm-up steps (max_memory_allocated: the step's tensors
and the workspaces of the streams it used), what was allocated before that step, and the median of
`steps` step times (timed in that process alone: not alternated with other variants).
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

from foxlib.harness.recipe import StepRecipe, build_step, graph_parts
from foxlib.harness.step_options import StepOptions, matmul_tf32
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
    cfg = dataclasses.replace(MODELS["tft"].preset(spec.get("preset", "seed")), **spec.get("overrides", {}))
    options = StepOptions.from_dict(spec.get("options"))
    recipe = StepRecipe("tft", cfg, spec.get("precision", "fp32"), spec.get("seed", 0), options)
    if spec.get("cuda_graph"):
        from foxlib.memory.cuda_graph import GraphedStep
        built, loss = graph_parts(recipe, device)
        with matmul_tf32(options.tf32):
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


if __name__ == "__main__":
    print(json.dumps(_measure(json.loads(sys.stdin.read()))))
