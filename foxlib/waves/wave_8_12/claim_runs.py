"""The seed's speed claims timed in independent runs. One alternating run (measuring.py's timing) gives
intervals narrower than the spread between runs of the same code: on the H200, "checkpoint all" was
1.39x [1.23, 1.69] in one run and 1.53x [1.43, 1.69] in another of the same code. So each strategy a seed claim
is about (a `seed_guess`, with fp32 beside it) is timed again in `runs` fresh processes
(foxlib.harness.fresh_process: each builds the steps anew, warms up, then times them alternating), and a
claim's verdict comes from the runs pooled: the interval of their mean holds the spread between them
(foxlib.core.seed_claims.pooled_verdict).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from foxlib.core.progress import progress
from foxlib.core.schema import Record
from foxlib.core.pooled_runs import MIN_RUNS
from foxlib.harness.fresh_process import FailedRun, ProcessRun, RunsNotMade, measure_in_fresh_process, variant_spec
from foxlib.harness.timing import RatioInterval, interval_of_samples
from foxlib.memory.cpu_support import kernel_speed
from foxlib.models import MODELS
from foxlib.waves.wave_8_12.strategies import BASELINE, STRATEGIES

CLAIM_STRATEGIES = tuple(n for n, s in STRATEGIES.items() if s.seed_guess)
"""fp16, the checkpointing granularities, batch ÷4 and sequence ÷2: every strategy a seed claim is about."""
RUNS = MIN_RUNS
"""Independent runs made by default (foxlib.core.pooled_runs.MIN_RUNS). Their spread is pooled over every claim
timed in them (foxlib.core.pooled_runs.run_spread): with each claim's 3 runs alone, Student's t for two degrees of
freedom (4.30) widened batch ÷4's and sequence ÷2's intervals, about 7 % inside their bands, across an edge in one
of three sets of H200 runs (d3b10e0); pooled (14 degrees of freedom: t_975 gives 2.23, its table's last, a little
wider than the exact 2.14), the three sets gave one verdict per claim."""
STEPS = 20  # timed rounds per run, after the child's warm-up steps


def measure_claim_runs(chosen, configs: dict[str, Any], preset: str, device: torch.device, seed: int,
                       runs: int = RUNS, steps: int = STEPS) -> dict[str, Any]:
    """The claim strategies among `chosen` (with fp32) timed in `runs` fresh processes, as plain data:
    {"strategies", "batch_sizes", "steps", "runs": [one child's output per run], "skipped": {name: why}},
    or {"skipped_all": why}. On a CPU, a strategy in a 16-bit precision without kernels there is skipped
    (foxlib.memory.cpu_support: minutes a step)."""
    if runs < 1:
        return {"skipped_all": "not asked (claim_runs=0): each claim rests on the one alternating run"}
    claimed = [s for s in chosen if s.name == BASELINE or s.name in CLAIM_STRATEGIES]
    skipped = {s.name: kernel_speed(s.precision).reason() for s in claimed
               if device.type == "cpu" and s.precision != "fp32" and not kernel_speed(s.precision).fast}
    variants = {s.name: variant_spec(configs[s.name], preset, s.precision, seed, device, s.cuda_graph, s.options)
                for s in claimed if s.name not in skipped}
    out: list[dict[str, Any]] = []
    with progress(runs, "seed claims, independent runs (fresh processes)") as bar:
        for r in range(runs):
            bar.describe(f"run {r + 1}/{runs}: {len(variants)} strategies alternating, {steps} rounds")
            out.append(measure_in_fresh_process({"device": device.type, "profile": False, "steps": steps,
                                                 "variants": variants}))
            bar.advance()
    return {"strategies": list(variants), "batch_sizes": {n: configs[n].batch_size for n in variants},
            "steps": steps, "runs": out, "skipped": skipped}


@dataclass(frozen=True)
class ClaimRuns(Record):
    """measure_claim_runs' data where the runs were made, typed: the strategies timed (fp32 among them), their batch
    sizes, the timed rounds per run, each fresh process's output (a ProcessRun, or a FailedRun) and the strategies
    skipped."""
    strategies: list[str]
    batch_sizes: dict[str, int]
    steps: int
    runs: tuple[ProcessRun | FailedRun, ...]
    skipped: dict[str, str]
    PARTS = {"runs": ProcessRun}

    @property
    def absent_reason(self) -> str | None:
        """Why the runs give no interval although they were made: no strategy a seed claim is about was timed, or
        the first failed process's error."""
        if all(n == BASELINE for n in self.strategies):
            why = "; ".join(f"{n}: {r}" for n, r in self.skipped.items())
            return "no strategy a seed speed claim is about was timed" + (f" ({why})" if why else "")
        return next((f"independent run {i + 1} failed: {run.error}" for i, run in enumerate(self.runs)
                     if isinstance(run, FailedRun)), None)


def claim_runs_record(d: dict[str, Any]) -> ClaimRuns | RunsNotMade:
    """measure_claim_runs' data, typed; its to_dict() writes it back as measured."""
    return (RunsNotMade if "skipped_all" in d else ClaimRuns).from_dict(d)


def claim_intervals(data: ClaimRuns | RunsNotMade) -> dict[str, tuple[RatioInterval, ...]]:
    """{strategy: one time-per-window ratio to fp32 per run}, fp32 left out; {} where the runs were not made or a
    run failed (absent_reason says why)."""
    if data.absent_reason:
        return {}
    base_bs = data.batch_sizes[BASELINE]
    return {name: tuple(interval_of_samples(run.variants[name].step_s_samples, run.variants[BASELINE].step_s_samples)
                        .scaled(base_bs / data.batch_sizes[name]) for run in data.runs)
            for name in data.strategies if name != BASELINE}


def main(argv: list[str] | None = None) -> int:
    """`python -m foxlib.waves.wave_8_12.claim_runs --out F [--device D] [--runs N]`: the claim runs alone, at the
    seed configuration (as wave 8.12 makes them), into a JSON file: a re-run of the same revision checks that the
    verdicts hold from run to run without the whole wave."""
    import argparse
    import json

    from foxlib.core.provenance import git_revision
    from foxlib.memory.devices import describe, resolve_device
    from foxlib.waves.wave_8_12.strategies import configure, select
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("--runs", type=int, default=RUNS)
    p.add_argument("--steps", type=int, default=STEPS)
    a = p.parse_args(argv)
    dev = resolve_device(a.device)
    chosen = select(";".join(CLAIM_STRATEGIES))
    base = MODELS["tft"].preset("seed")
    configs = {s.name: configure(base, s.overrides) for s in chosen}
    data = measure_claim_runs(chosen, configs, "seed", dev, 0, runs=a.runs, steps=a.steps)
    with open(a.out, "w") as f:
        json.dump({"device": describe(dev).to_dict(), "revision": git_revision(), "claim_runs": data}, f, indent=1)
    for name, runs in claim_intervals(claim_runs_record(data)).items():
        print(name, ", ".join(str(r) for r in runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
