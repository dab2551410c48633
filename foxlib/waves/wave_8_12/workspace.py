"""The cuBLAS workspace as a memory knob. PyTorch gives cuBLAS a workspace per stream, sized by
CUBLAS_WORKSPACE_CONFIG when the stream first needs one: the workspace is in the allocator peak
(max_memory_allocated), not in the model peak (the step's own tensors). So that every stream of a step,
from the first, takes the size asked, the knob is measured in fresh processes
(foxlib.harness.fresh_process): each round runs one process at the default size and one at SMALL
(rounds alternate which goes first); each process profiles KNOB_STRATEGIES as the wave does in-process
(first round only: memory is the same every round) and times them alternating. A strategy's step-time
ratio small/default is paired by round (foxlib.harness.timing.interval_of_samples over the rounds'
medians). CUDA only: a CPU has no cuBLAS.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from foxlib.core.progress import progress
from foxlib.core.schema import Record
from foxlib.harness.fresh_process import FailedRun, ProcessRun, RunsNotMade, measure_in_fresh_process, variant_spec
from foxlib.harness.timing import ROUNDS_FOR_CONFIDENCE, RatioInterval, interval_of_samples
from foxlib.memory.cuda import CUBLAS_WORKSPACE as VARIABLE
from foxlib.memory.cuda_graph import own_workspace, profile_from_dict

SMALL = ":16:8"  # 8 buffers of 16 KiB per stream (PyTorch's default on this GPU: MiBs per stream)
KNOB_STRATEGIES = (  # the candidates to ship: the eager recommendation, the fastest graphed, the lightest graphed
    "efficient + checkpoint VSN variables (8 per chunk)",
    "efficient + bf16 + CUDA graph + fused Adam",
    "efficient + bf16 + CUDA graph + Adam in backward",
    "efficient + checkpoint VSN variables + bf16 + CUDA graph + Adam in backward",
    "efficient + batched VSNs + checkpoint VSN variables + bf16 + CUDA graph + Adam in backward",
)  # not the torch.compile strategies: each fresh process would compile again (tens of seconds each)
ROUNDS = ROUNDS_FOR_CONFIDENCE  # fewer rounds' intervals cover the median less than 95 % (their label says so)
MAX_SLOWDOWN = 0.02  # a small workspace "costs no time" when its ratio's upper end is at most 1.02
STEPS = 20  # timed steps per process and strategy, alternating
SKIPPED_CPU = "skipped: the cuBLAS workspace is a CUDA knob"


def measure_knob(chosen, configs: dict[str, Any], preset: str, device: torch.device, seed: int,
                 rounds: int = ROUNDS, steps: int = STEPS) -> dict[str, Any]:
    """KNOB_STRATEGIES among `chosen` (wave 8.12's Strategy objects, `configs` their TFT configs) in
    2 x `rounds` fresh processes, as plain data: {"setting", "strategies", "rounds", "steps", "runs":
    {"default": [...], "small": [...]}} (one child's output per round), or {"skipped_all": why}."""
    if device.type != "cuda":
        return {"skipped_all": SKIPPED_CPU}
    picked = sorted((s for s in chosen if s.name in KNOB_STRATEGIES), key=lambda s: s.cuda_graph)  # eager first:
    if not picked:  # an eager profile counts what is allocated at its start, graphs' workspaces included
        return {"skipped_all": f"none of {', '.join(KNOB_STRATEGIES)} was measured in this run"}
    variants = {s.name: variant_spec(configs[s.name], preset, s.precision, seed, torch.device("cuda"), s.cuda_graph, s.options)
                for s in picked}
    runs: dict[str, list[dict[str, Any]]] = {"default": [], "small": []}
    with progress(2 * rounds, "cuBLAS workspace knob (fresh processes)") as bar:
        for r in range(rounds):
            for setting in (("default", "small") if r % 2 == 0 else ("small", "default")):
                bar.describe(f"round {r + 1}/{rounds}: {len(variants)} strategies, workspace {setting}")
                runs[setting].append(measure_in_fresh_process(
                    {"device": "cuda", "profile": r == 0, "steps": steps, "variants": variants},
                    {VARIABLE: SMALL} if setting == "small" else None))
                bar.advance()
    return {"setting": SMALL, "strategies": list(variants), "rounds": rounds, "steps": steps, "runs": runs}


@dataclass(frozen=True)
class KnobResult(Record):
    """One strategy at the default workspace and at `setting`: raw bytes, seconds (each round's median
    step), and the step-time ratio small/default paired by round with its bootstrap interval."""
    name: str
    setting: str
    model_peak_bytes: int  # at the default size
    allocator_peak_bytes: int  # model peak + its own workspaces, at the default size
    small_model_peak_bytes: int
    small_allocator_peak_bytes: int
    step_s: tuple[float, ...]  # per round, at the default size
    small_step_s: tuple[float, ...]
    ratio: RatioInterval  # small over default
    PARTS = {"ratio": RatioInterval, "step_s": float, "small_step_s": float}  # a list: a tuple (typed())

    @property
    def saved_bytes(self) -> int:
        return self.allocator_peak_bytes - self.small_allocator_peak_bytes

    @property
    def shown_slower(self) -> bool:
        """Slower at the small size beyond the noise: the ratio's whole interval above 1."""
        return self.ratio.low > 1.0

    @property
    def costs_time(self) -> bool:
        """Not shown within MAX_SLOWDOWN of the default size's step: the interval's upper end above it
        (a tight interval can "show" a 0.3 % difference, which is no cost)."""
        return self.ratio.high > 1.0 + MAX_SLOWDOWN


@dataclass(frozen=True)
class KnobRuns(Record):
    """measure_knob's data where the processes ran, typed: the small setting, the strategies, the rounds, the timed
    steps per process, and per size ("default", "small") each round's process's output
    (foxlib.harness.fresh_process: a ProcessRun, or a FailedRun)."""
    setting: str
    strategies: list[str]
    rounds: int
    steps: int
    runs: dict[str, tuple[ProcessRun | FailedRun, ...]]
    MANY = {"runs": ProcessRun}

    @property
    def absent_reason(self) -> str | None:
        """Why there are no results although the processes ran: the first failed process's error."""
        return next((f"a process at the {setting} workspace failed: {r.error}"
                     for setting, rs in self.runs.items() for r in rs if isinstance(r, FailedRun)), None)


def knob_runs(d: dict[str, Any]) -> KnobRuns | RunsNotMade:
    """measure_knob's data, typed; its to_dict() writes it back as measured."""
    return (RunsNotMade if "skipped_all" in d else KnobRuns).from_dict(d)


def knob_results(knob: KnobRuns | RunsNotMade) -> tuple[KnobResult, ...]:
    """Each strategy's KnobResult; () when the knob was skipped or a process failed (absent_reason says why)."""
    if knob.absent_reason:
        return ()
    out, runs = [], knob.runs
    for name in knob.strategies:
        first = {k: profile_from_dict(runs[k][0].variants[name].profile) for k in ("default", "small")}
        rounds = {k: [r.variants[name].step_s_median for r in runs[k]] for k in ("default", "small")}
        out.append(KnobResult(
            name, knob.setting, int(first["default"].peak), int(first["default"].peak) + own_workspace(first["default"]),
            int(first["small"].peak), int(first["small"].peak) + own_workspace(first["small"]),
            tuple(rounds["default"]), tuple(rounds["small"]), interval_of_samples(rounds["small"], rounds["default"])))
    return tuple(out)
