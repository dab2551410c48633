"""Training steps measured in a fresh Python process, with environment variables that only act before
a library sizes its buffers, e.g. the cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG=":16:8": 8 buffers of
16 KiB per stream instead of the default's MiBs).

`measure_in_fresh_process(spec, env)` runs `python -m foxlib.harness.fresh_process` with the spec as
JSON on stdin: {"device", "profile", "steps", "variants": {name: {"preset", "overrides", "precision",
"seed", "options", "cuda_graph"}}}. The child profiles each variant first, on a model of its own, as
the waves do in-process ("profile": true; foxlib.harness.measure_step.profile_recipe; eager ones first),
then builds them all and times them alternating (foxlib.harness.timing), `steps` rounds after WARMUP_STEPS
untimed ones. It returns {"variants": {name: {"profile", "step_s_samples", "step_s_median"}},
"cublas_workspace_config"}; with the environment it was given, that is a ProcessRun on load (a FailedRun
where the child failed).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import torch

from foxlib.core.schema import Record
from foxlib.harness.measure_step import profile_recipe
from foxlib.harness.recipe import StepRecipe, build_step, capture_step
from foxlib.harness.step_options import StepOptions
from foxlib.harness.timing import time_alternating
from foxlib.memory.cuda import CUBLAS_WORKSPACE
from foxlib.models import MODELS

WARMUP_STEPS = 3
TIMEOUT_S = 600


def run_child(argv: list[str], stdin: str = "", env: dict[str, str] | None = None,
              timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Run a child process that prints its result as JSON on its last line of stdout (progress off, `env` added):
    that dict, or {"error": why} where it failed: its exit status and last output lines, no result within
    `timeout_s`, or no JSON. Used here and by the peer benchmark's further timing runs (benchmarks/peer_tft.py)."""
    try:
        run = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout_s,
                             env={**os.environ, "FOXLIB_PROGRESS": "0", **(env or {})})
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout_s:g} s"}
    if run.returncode != 0:  # its stderr's end says why
        return {"error": f"exit {run.returncode}: " + " | ".join((run.stderr or run.stdout).strip().splitlines()[-3:])}
    try:
        return json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": "exit 0 without a JSON result on its last line: " + run.stdout.strip()[-200:]}


def measure_in_fresh_process(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The child's result as a dict; {"error": ...} when it failed (run_child), with the environment it was given."""
    return {**run_child([sys.executable, "-m", "foxlib.harness.fresh_process"], json.dumps(spec), env),
            "env": env or {}}


@dataclasses.dataclass(frozen=True)
class VariantRun(Record):
    """One variant in the child: its profile (None: not asked), each timed round's step (seconds), their median."""
    profile: dict[str, Any] | None
    step_s_samples: list[float]
    step_s_median: float


@dataclasses.dataclass(frozen=True)
class FailedRun(Record):
    """measure_in_fresh_process where the child failed: why (its last output lines), the environment it was given."""
    error: str
    env: dict[str, str]


@dataclasses.dataclass(frozen=True)
class RunsNotMade(Record):
    """Fresh-process runs a measurement did not make (wave 8.12's claim runs, its cuBLAS workspace knob): why, as the
    measurement file holds it ({"skipped_all": why})."""
    skipped_all: str

    @property
    def absent_reason(self) -> str:
        return self.skipped_all


@dataclasses.dataclass(frozen=True)
class ProcessRun(Record):
    """measure_in_fresh_process's result, typed: each variant's run, CUBLAS_WORKSPACE_CONFIG as the child saw it
    (None: unset), the environment it was given."""
    variants: dict[str, VariantRun]
    cublas_workspace_config: str | None
    env: dict[str, str]
    MANY = {"variants": VariantRun}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ProcessRun | FailedRun":
        """The result in `d`; a FailedRun where it holds the child's error."""
        return FailedRun.from_dict(d) if "error" in d else super().from_dict(d)


def variant_spec(cfg: Any, preset: str, precision: str, seed: int, device: torch.device, cuda_graph: bool = False,
                 options: StepOptions | None = None) -> dict[str, Any]:
    """One variant of a spec (the module's docstring): the TFT config `cfg` as overrides of `preset`, the
    inverse of what the child builds from it (_recipe)."""
    base = dataclasses.asdict(MODELS["tft"].preset(preset))
    return {"device": device.type, "preset": preset, "precision": precision, "seed": seed, "cuda_graph": cuda_graph,
            "options": (options or StepOptions()).to_dict(),
            "overrides": {k: v for k, v in dataclasses.asdict(cfg).items() if v != base[k]}}


def _recipe(spec: dict[str, Any]) -> StepRecipe:
    cfg = dataclasses.replace(MODELS["tft"].preset(spec.get("preset", "seed")), **spec.get("overrides", {}))
    return StepRecipe("tft", cfg, spec.get("precision", "fp32"), spec.get("seed", 0),
                      StepOptions.from_dict(spec.get("options")))


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """What the child measures (the module's docstring), in this process."""
    device = torch.device(spec.get("device", "cuda"))
    variants = {n: (_recipe(v), bool(v.get("cuda_graph"))) for n, v in spec["variants"].items()}
    # eager steps first: an eager profile counts the workspaces allocated at its start, a graph's included
    order = sorted(variants, key=lambda n: variants[n][1])
    profiles = {n: profile_recipe(variants[n][0], device, variants[n][1]) for n in order} if spec.get("profile") else {}
    steps = {n: capture_step(r, device)[1] if g else build_step(r, device).step for n, (r, g) in variants.items()}
    timings = time_alternating(steps, repeats=spec.get("steps", 20), warmup=WARMUP_STEPS, device=device)
    return {"variants": {n: {"profile": profiles.get(n), "step_s_samples": list(t.samples), "step_s_median": t.median_s}
                         for n, t in timings.items()},
            "cublas_workspace_config": os.environ.get(CUBLAS_WORKSPACE)}


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.stdin.read()))))
