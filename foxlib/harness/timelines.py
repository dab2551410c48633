"""Live-memory timelines of TFT training steps, one per configuration, each with its file and, for CUDA
snapshots, PyTorch's interactive viewer as HTML. An eager step is the recipe's step profiled with a
snapshot_path (profile_step); a CUDA-graph step is recorded while it is captured (a replay allocates nothing,
so the capture's allocations in the graph's pool are the step's memory).
"""
from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from foxlib.core.figures import slug
from foxlib.core.schema import Record
from foxlib.memory.live_series import MAX_POINTS, MemoryTimeline, load
from foxlib.memory.timeline import mark_forward_end
from foxlib.harness.recipe import StepRecipe, build_step, graph_parts
from foxlib.memory.profile import record_cuda_history, release_memory

GRAPH_NEEDS_CUDA = "skipped: a CUDA graph needs a CUDA device"
# the CUDA history's call stacks, tried in order: with Python stacks a checkpointed step's backward can fail
# ("run_backward returned NULL without setting an exception"); without stacks the series names no owners
STACKS_TRIED = ("python", "all", "none")


@dataclass(frozen=True)
class TimelineCase:
    """One configuration to draw: a name, the TFT config's overrides, the precision, eager or graphed."""
    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    precision: str = "fp32"
    cuda_graph: bool = False


# the four: the plain step, checkpointing (blocks), the memory-efficient path, the step as a CUDA graph
CASES = (
    TimelineCase("plain"),
    TimelineCase("checkpoint blocks", {"checkpointing": "blocks"}),
    TimelineCase("memory-efficient path", {"memory_efficient": True}),
    TimelineCase("CUDA graph", cuda_graph=True),
)
# what a report draws: 8.12's checkpointing result (VSNs, blocks, everything), then CASES' other two, each case once
# (the CUDA graph skipped on a CPU)
ALL_CASES = (CASES[0], TimelineCase("checkpoint VSNs", {"checkpointing": "vsn"}), CASES[1],
             TimelineCase("checkpoint all", {"checkpointing": "all"}), CASES[2], CASES[3])


@dataclass(frozen=True)
class TimelineRun(Record):
    """One configuration's timeline and where its files are (None where skipped, with why)."""
    name: str
    recipe: dict[str, Any]
    series: MemoryTimeline | None
    snapshot_path: str | None
    viewer_html_path: str | None = None
    profile_peak_bytes: int | None = None  # profile_step's model peak of the same step
    activations_bytes: int | None = None  # None for a CUDA graph
    skipped: str | None = None
    seconds: float = 0.0  # wall time to build, profile and read (not the step's time)
    stacks: str | None = None  # the CUDA history's stacks that worked (STACKS_TRIED); None on the CPU
    outside_bytes: int = 0
    """CUDA: bytes allocated at the step's start that are not the step's (workspaces, earlier computations'
    memory): in the series, not in profile_peak_bytes."""

    PARTS = {"series": MemoryTimeline}


def measure_timelines(cfg, device: torch.device | str, out_dir: str, cases: Sequence[TimelineCase] = CASES, *,
                      seed: int = 0, max_points: int = MAX_POINTS, viewer_html: bool = True,
                      prefix: str = "timeline") -> dict[str, TimelineRun]:
    """Profile one step of the TFT `cfg` with each case's overrides on `device` and read its timeline. Writes
    {prefix}-{case}.pickle (CUDA snapshot) or .json (CPU events) in out_dir, and for CUDA the viewer's .html."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"case names must differ (they name the files): {', '.join(names)}")
    os.makedirs(out_dir, exist_ok=True)
    runs: dict[str, TimelineRun] = {}
    for case in cases:
        started = time.perf_counter()
        recipe = StepRecipe("tft", dataclasses.replace(cfg, **case.overrides), case.precision, seed)
        if case.cuda_graph and not cuda:
            runs[case.name] = TimelineRun(case.name, recipe.to_dict(), None, None, skipped=GRAPH_NEEDS_CUDA)
            continue
        path = os.path.join(out_dir, f"{prefix}-{slug(case.name)}." + ("pickle" if cuda else "json"))
        failures = []
        for stacks in STACKS_TRIED if cuda else STACKS_TRIED[:1]:
            try:  # the step with the allocation history on
                if case.cuda_graph:
                    peak, outside = _record_graphed(recipe, device, path, stacks)
                    activations = None  # saved in the graph's pool, where no hook sees them
                else:
                    with build_step(recipe, device) as step:
                        profile = step.profile(snapshot_path=path, snapshot_stacks=stacks)
                    peak, activations, outside = profile.peak, profile.activations, profile.workspace_bytes
                break
            except Exception as exc:  # noqa: BLE001 - one case's failure is reported, the others still run
                if cuda:
                    torch.cuda.memory._record_memory_history(enabled=None)
                    release_memory()
                failures.append(f"stacks={stacks}: {type(exc).__name__}: {str(exc)[:160]}")
        else:  # every stacks setting failed
            runs[case.name] = TimelineRun(case.name, recipe.to_dict(), None, None,
                                          skipped="failed: " + "; ".join(failures))
            continue
        series = load(path, label=case.name, max_points=max_points)
        html_path = viewer_html_file(path, path.rsplit(".", 1)[0] + ".html") if viewer_html and cuda else None
        runs[case.name] = TimelineRun(case.name, recipe.to_dict(), series, path, html_path, peak, activations,
                                      seconds=time.perf_counter() - started, stacks=stacks if cuda else None,
                                      outside_bytes=outside)
    return runs


def _record_graphed(recipe: StepRecipe, device: torch.device, path: str, stacks: str) -> tuple[int, int]:
    """Capture the recipe's step as a CUDA graph with the allocator's history on, replay it once, write the
    snapshot; returns (the model peak over capture and replay, the outside bytes), as profile_graphed_step does."""
    from foxlib.memory.cuda_graph import GraphedStep, bytes_outside_step

    step, loss = graph_parts(recipe, device)

    def marked_loss(model, batch):
        value = loss(model, batch)
        mark_forward_end()
        return value

    with step:  # freed when the block ends, a failed capture included
        graphed = GraphedStep(step.model, step.batch, marked_loss, step.optimizer, recipe.precision)
        gc.collect()
        torch.cuda.synchronize(device)
        outside = bytes_outside_step(step.model, step.batch, step.optimizer)
        torch.cuda.reset_peak_memory_stats(device)
        record_cuda_history(stacks)
        try:
            graphed.capture()()
            torch.cuda.synchronize(device)
            peak = torch.cuda.max_memory_allocated(device) - outside
            torch.cuda.memory._dump_snapshot(path)
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
            del graphed
    return peak, outside


def own_timelines(runs: dict[str, TimelineRun]) -> dict[str, MemoryTimeline | None]:
    """Each recorded run's series less its outside bytes: the step's own memory (None where none was recorded)."""
    return {name: None if run.series is None else run.series.without(run.outside_bytes)
            for name, run in runs.items()}


def viewer_html_file(snapshot_path: str, html_path: str) -> str:
    """PyTorch's interactive memory viewer for a CUDA snapshot as one HTML file (torch.cuda._memory_viz.trace_plot;
    the page loads MemoryViz.js from cdn.jsdelivr.net when opened)."""
    from torch.cuda._memory_viz import trace_plot

    Path(html_path).write_text(trace_plot(pickle.loads(Path(snapshot_path).read_bytes())))
    return html_path


def keep_beside(runs: dict[str, TimelineRun], out_dir: str,
                search_dirs: Sequence[str | os.PathLike] = ()) -> dict[str, dict[str, str | None]]:
    """Copy each run's snapshot into out_dir beside a report, with the viewer's HTML for CUDA snapshots; returns
    per run the file names relative to out_dir (None where there is none). A file is looked for at its path, then
    by its name in each of search_dirs (a measurement made on another machine names paths there)."""
    os.makedirs(out_dir, exist_ok=True)
    links: dict[str, dict[str, str | None]] = {}
    for name, run in runs.items():
        links[name] = {"snapshot": None, "viewer_html": None}
        if not run.snapshot_path:
            continue
        base = os.path.basename(run.snapshot_path)
        found = next((p for p in [run.snapshot_path, *(os.path.join(d, base) for d in search_dirs)]
                      if os.path.isfile(p)), None)
        if found is None:
            continue
        target = os.path.join(out_dir, base)
        if os.path.abspath(found) != os.path.abspath(target):
            shutil.copyfile(found, target)
        links[name]["snapshot"] = base
        if base.endswith(".pickle"):
            html_name = base.rsplit(".", 1)[0] + ".html"
            viewer_html_file(target, os.path.join(out_dir, html_name))
            links[name]["viewer_html"] = html_name
    return links
