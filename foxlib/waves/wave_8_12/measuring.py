"""Wave 8.12's measurement on a device: every strategy's training step profiled, all of them timed
alternating in one run (foxlib.harness.timing), one set of accuracy runs per distinct function
(foxlib.harness.training), the same-function claims checked as numbers (foxlib.harness.equivalence),
and live-memory timelines of the seed TFT's step (foxlib.harness.timelines). `measure(...)` returns
records.Measurement (bytes and seconds)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from foxlib.core import results
from foxlib.core.progress import progress
from foxlib.core.provenance import git_revision
from foxlib.harness.equivalence import FailedCheck, reference_run, same_function
from foxlib.harness.measure_step import measure_model, profile_graphed
from foxlib.harness.floors import floors, step_flops
from foxlib.harness.recipe import StepRecipe, build_step, capture_step
from foxlib.harness.timelines import ALL_CASES, measure_timelines
from foxlib.harness.timing import time_alternating
from foxlib.harness.training import HARNESS, accuracy_config, check_target, train_many
from foxlib.memory.devices import describe, environment, resolve_device
from foxlib.memory.profile import release_memory
from foxlib.models import MODELS
from foxlib.waves.wave_8_12.claim_runs import measure_claim_runs
from foxlib.waves.wave_8_12.records import Measurement, StrategyRun
from foxlib.waves.wave_8_12.strategies import BASELINE, Strategy, accuracy_key, configure, runnable, select
from foxlib.waves.wave_8_12.workspace import measure_knob


@results.measures(Measurement)
def measure(*, preset: str = "seed", batch_size: int = 32, encoder_length: int = 60, strategies: str = "all",
            device: str = "auto", seed: int = 0, timing_repeats: int = 10, timing_warmup: int = 2,
            accuracy_preset: str = "auto", accuracy_seeds: int = 2, accuracy_steps: int = HARNESS["max_steps"],
            accuracy_eval_every: int = HARNESS["eval_every"], accuracy_patience: int = HARNESS["patience"],
            accuracy_val_windows: int = HARNESS["val_windows"], accuracy_target: str = HARNESS["target"],
            accuracy_batch_size: int = HARNESS["batch_size"], accuracy_lr: float = HARNESS["lr"],
            accuracy_min_skill_pct: float = 100 * HARNESS["min_skill"], timelines: bool = True,
            timeline_dir: str = "", cublas_workspace_knob: bool = True, claim_runs: int = 3,
            checkpoint_path: str = "") -> dict[str, Any]:
    """Profile and time every strategy of `strategies` runnable on `device`, train one set of accuracy runs
    per distinct function they compute, check the same-function claims and, with `timelines`, record the
    seed TFT's live memory through one step; with `cublas_workspace_knob` (CUDA), the cuBLAS workspace
    size as a memory knob (workspace.py, fresh processes); the strategies the seed's claims are about timed
    again in `claim_runs` independent fresh processes (claim_runs.py). `checkpoint_path`: a file each
    finished part is saved to as it completes; a run handed one made by an earlier, stopped run at this
    revision, on this device, with these parameters takes the parts it holds and measures the rest
    (Checkpoint; the measurement's "resumed" says which parts and when they were measured)."""
    params = {k: v for k, v in locals().items() if k not in ("checkpoint_path", "timeline_dir")}
    dev = resolve_device(device)
    check_target(accuracy_target)
    chosen, skipped = runnable(select(strategies), dev)
    base = MODELS["tft"].config(preset, batch_size=batch_size, encoder_length=encoder_length)
    configs = {s.name: configure(base, s.overrides) for s in chosen}
    out: dict[str, Any] = {"device": describe(dev), "environment": environment(),
                           "base_config": dataclasses.asdict(base),
                           "strategies": {s.name: StrategyRun(s.precision, s.overrides, s.seed_guess,
                                                              s.changes_numerics, s.cuda_graph, s.options)
                                          for s in chosen},
                           "skipped": skipped}
    saved = Checkpoint(checkpoint_path, {"revision": git_revision(), "device": out["device"].to_dict(),
                                         "parameters": params})
    if saved.parts:
        out["resumed"] = {"parts": list(saved.parts), "measured_at": saved.started}
    def keep_strategies():  # which strategies run on, and their profiles: a failed one is dropped in both parts
        saved.keep("memory", {k: out[k] for k in ("strategies", "skipped", "memory", "predicted")})

    if "memory" in saved.parts:
        out.update(saved.parts["memory"])
        chosen = [s for s in chosen if s.name in out["strategies"]]
    else:
        _profile_all(chosen, configs, dev, seed, out)
        keep_strategies()
    if "timing" in saved.parts:
        out["timing"] = saved.parts["timing"]
    else:
        out["timing"] = _time_all(chosen, configs, dev, seed, out, timing_repeats, timing_warmup)
        keep_strategies()
        saved.keep("timing", out["timing"])
    out["claim_runs"] = saved.get("claim_runs", lambda: measure_claim_runs(chosen, configs, preset, dev, seed,
                                                                           runs=claim_runs))
    out["floors"] = saved.get("floors", lambda: step_floors(base, dev, seed))
    not_asked = {"skipped_all": "not asked (cublas_workspace_knob=False)"}
    out["cublas_workspace"] = saved.get("cublas_workspace", lambda: measure_knob(chosen, configs, preset, dev, seed)
                                        if cublas_workspace_knob else not_asked)
    acc_preset = accuracy_preset if accuracy_preset != "auto" else ("seed" if dev.type == "cuda" else "small")
    out["accuracy_preset"] = acc_preset
    out.update(saved.get("accuracy", lambda: accuracy_runs(
        chosen, accuracy_config(acc_preset, batch_size=accuracy_batch_size, lr=accuracy_lr), accuracy_seeds, dev,
        max_steps=accuracy_steps, eval_every=accuracy_eval_every, patience=accuracy_patience,
        val_windows=accuracy_val_windows, target=accuracy_target, min_skill=accuracy_min_skill_pct / 100)))
    out["same_function"] = saved.get("same_function", lambda: same_function_checks(chosen, base, dev, seed))
    if timelines:  # last, and not kept: its snapshot files are written beside the measurement
        out["timelines"] = measure_timeline_cases(base, dev, timeline_dir, seed)
    return out


class Checkpoint:
    """The parts of one measurement finished so far, in a JSON file (`path`; "" keeps nothing): taken up
    again only by a run with the same `key` (revision, device, parameters), which measures what is missing.
    A file made by another run is an error, never silently mixed in."""

    def __init__(self, path: str, key: dict[str, Any]):
        self.path, self.key, self.parts = path, key, {}
        self.started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        if path and os.path.exists(path):
            held = results.read_json(path)  # a truncated file (a run killed while writing) says so
            stated = json.loads(json.dumps(key))  # as the file holds it (tuples as lists)
            if held["key"] != stated:
                differs = sorted(k for k in stated if held["key"].get(k) != stated[k])
                raise ValueError(f"{path} was made by another run (its {', '.join(differs)} differ): delete it "
                                 "or pass another checkpoint_path")
            self.parts, self.started = held["parts"], held["started"]
            logging.getLogger(__name__).info("resuming from %s: %s measured", path, ", ".join(self.parts))

    def keep(self, name: str, value: Any) -> Any:
        self.parts[name] = value
        if self.path:
            results.write_json(Path(self.path), {"key": self.key, "started": self.started, "parts": self.parts})
        return value

    def get(self, name: str, measure_part):
        return self.parts[name] if name in self.parts else self.keep(name, measure_part())


def _profile_all(chosen: list[Strategy], configs, dev: torch.device, seed: int, out: dict[str, Any]) -> None:
    """Every chosen strategy's step profiled (and predicted) into out["memory"] / out["predicted"]; one that
    cannot run here leaves `chosen`, named in out["skipped"] (the baseline's failure is raised)."""
    with progress(len(chosen), "wave 8.12 memory") as bar:
        out["memory"] = {}  # eager steps first: a graph's capture stream keeps its workspace (cuda_graph.own_workspaces)
        for s in sorted(chosen, key=lambda s: s.cuda_graph):
            bar.describe(f"profiling {s.name} on {dev}")
            try:
                cfg = configs[s.name]
                r = ({"profile": profile_graphed(StepRecipe("tft", cfg, s.precision, seed, s.options), dev),
                      "predicted": {"error": "not predicted: the step runs as one CUDA graph"}} if s.cuda_graph else
                     measure_model("tft", cfg, dev, s.precision, seed, options=s.options))
                out["memory"][s.name] = r["profile"]
                out.setdefault("predicted", {})[s.name] = r["predicted"]
            except (RuntimeError, ValueError) as exc:  # one strategy that cannot run here: named, the rest go on
                _drop(s, chosen, out, "failed", exc)
            bar.advance()


def _time_all(chosen: list[Strategy], configs, dev: torch.device, seed: int, out: dict[str, Any], repeats: int,
              warmup: int) -> dict[str, Any]:
    """Every chosen strategy's step timed, alternating in one run (as plain data); one that cannot be built
    leaves `chosen` as _profile_all's do."""
    steps = {}
    for s in list(chosen):
        recipe = StepRecipe("tft", configs[s.name], s.precision, seed, s.options)
        try:
            steps[s.name] = capture_step(recipe, dev)[1] if s.cuda_graph else build_step(recipe, dev).step
        except (RuntimeError, ValueError) as exc:
            _drop(s, chosen, out, "failed to build for timing", exc)
    timings = time_alternating(steps, repeats=repeats, warmup=warmup, device=dev)
    del steps
    release_memory()
    return {n: t.to_dict() for n, t in timings.items()}


def measure_timeline_cases(base, dev: torch.device, timeline_dir: str, seed: int) -> dict[str, Any]:
    """The seed TFT's live-memory timelines (foxlib.harness.timelines) as plain data: plain, checkpointed (VSNs,
    blocks, all), memory-efficient, and the step as a CUDA graph (its capture: a replay allocates nothing; skipped
    on the CPU); snapshot files in `timeline_dir` (a temporary folder if empty)."""
    import tempfile
    runs = measure_timelines(base, dev, timeline_dir or tempfile.mkdtemp(prefix="foxlib-timelines-"),
                             ALL_CASES, seed=seed, max_points=1500, viewer_html=False)
    release_memory()
    return {n: r.to_dict() for n, r in runs.items()}


def accuracy_runs(chosen: list[Strategy], acc_base, seeds: int, device: torch.device, **harness) -> dict[str, Any]:
    """One set of accuracy runs (foxlib.harness.training's harness, skill fields included) per distinct
    function the chosen strategies compute; the strategies that compute the same function share
    them (accuracy_source). Fractions of batch and sequence apply to the accuracy config alike."""
    runs: dict[str, list[dict]] = {}
    keys: dict[tuple, Strategy] = {}  # one set of runs per distinct function computed
    for s in sorted(chosen, key=lambda s: not s.changes_numerics):
        keys.setdefault(accuracy_key(s), s)
    jobs = [(s, {"cfg": configure(acc_base, dict(key[1])), "precision": s.precision, "seed": sd,
                 "options": s.options, **harness})
            for key, s in keys.items() for sd in range(seeds)]
    # independent runs: several processes at once on a GPU (foxlib.harness.training.train_many)
    done = train_many([job for _, job in jobs], device, what="wave 8.12 accuracy")
    for (s, _), r in zip(jobs, done):
        runs.setdefault(s.name, []).append(r)
    return {"accuracy_runs": runs, "accuracy_source": {s.name: keys[accuracy_key(s)].name for s in chosen},
            "accuracy_harness": {**done[0]["harness"], "tft_config": dataclasses.asdict(acc_base)}}


def same_function_checks(chosen: list[Strategy], base, device: torch.device, seed: int = 0) -> dict[str, dict[str, Any]]:
    """For every strategy claimed to compute the same function as another (changes_numerics False:
    checkpointing, the memory-efficient path, a CUDA graph), foxlib.harness.equivalence.same_function on this
    device: its outputs and gradients against the plain step of its precision from the same weights
    and batch, dropout off, as max |Δ| (absolute and relative). The report shows these numbers where it
    says "same function". fp16 CUDA-graph strategies are not captured (GraphedStep refuses fp16)."""
    out: dict[str, dict[str, Any]] = {}
    references: dict[str, dict[str, Any]] = {}  # the plain step, once per precision
    for s in [s for s in chosen if not s.changes_numerics]:
        try:
            if s.precision not in references:
                references[s.precision] = reference_run(base, precision=s.precision, device=device, seed=seed)
            e = same_function(base, configure(base, s.overrides), precision=s.precision, device=device, seed=seed,
                              cuda_graph=s.cuda_graph, options=s.options, name=s.name,
                              reference=references[s.precision])
            out[s.name] = e.to_dict()
        except (ValueError, RuntimeError) as exc:  # a variant that cannot run here: say why, never hide it
            out[s.name] = FailedCheck(s.name, str(exc)).to_dict()
        release_memory()
    return out


def _drop(s: Strategy, chosen: list[Strategy], out: dict[str, Any], what: str, exc: Exception) -> None:
    """Take a strategy that failed out of the run, saying why (in "skipped"); the baseline's failure is raised."""
    if s.name == BASELINE:
        raise exc
    chosen.remove(s)
    out["strategies"].pop(s.name, None)
    out["memory"].pop(s.name, None)
    out.get("predicted", {}).pop(s.name, None)
    out["skipped"][s.name] = f"{what}: {type(exc).__name__}: {str(exc)[:300]}"
    release_memory()


def step_floors(base, device: torch.device, seed: int) -> dict[str, Any]:
    """The base step's floors (foxlib.harness.floors): bytes per parameter, and time from its FLOPs and
    the optimizer's traffic at the device's published peaks."""
    with build_step(StepRecipe("tft", base, "fp32", seed), device) as step:
        n = sum(p.numel() for p in step.model.parameters())
        flops = step_flops(step.model, step.batch, step.loss_fn)
    return floors(n, flops, describe(device).name).to_dict()
