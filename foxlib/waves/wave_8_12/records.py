"""Wave 8.12's measurement: measure()'s data (measurement.json), typed and checked on load (`Measurement`), made into
`Measurement812`, one `StrategyResult` per strategy with raw bytes, seconds and each ratio to fp32 with its bootstrap
interval over the alternating rounds (foxlib.harness.timing.ratio_interval), computed once here
(`Measurement812.from_measurement`): the one thing every decision, table, chart and the notebook read."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from foxlib.core.schema import Device, Record, Sparse, WaveMeasurement, readable_version
from foxlib.harness import training
from foxlib.harness.equivalence import Equivalence, FailedCheck, check_from_dict
from foxlib.harness.floors import Floors
from foxlib.harness.step_options import StepOptions
from foxlib.harness.timelines import TimelineRun
from foxlib.harness.timing import (CONFIDENCE, RESAMPLES, SEED, RatioInterval, Timing, ratio_interval,
                                   shared_confidence)
from foxlib.harness.fresh_process import RunsNotMade
from foxlib.waves.wave_8_12.claim_runs import ClaimRuns, claim_intervals, claim_runs_record
from foxlib.waves.wave_8_12.strategies import BASELINE, resolve_overrides
from foxlib.memory.cuda_graph import GraphedProfile, own_workspaces, profile_from_dict
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.tolerances import FailedPrediction, predicted_profile
from foxlib.waves.wave_8_12.workspace import KnobResult, KnobRuns, knob_results, knob_runs


SCHEMA_VERSION = 4  # of Measurement812.to_dict(); 2 added each strategy's options and workspace bytes, 3 the presets,
# accuracy runs' figures, same-function figures, floors and why the workspace knob is empty; 4 derives (no longer
# stores) baseline_losses and each accuracy run's has_skill


@dataclass(frozen=True)
class StrategyRun(Sparse):
    """A strategy as measure() ran it (measurement.json's strategies[name], strategies.Strategy's fields): its
    overrides as stated (fractions of the base config stay fractions), options only where not the defaults."""
    precision: str
    overrides: dict[str, Any]
    seed_guess: str | None
    changes_numerics: bool
    cuda_graph: bool
    options: StepOptions = StepOptions()  # absent from the file where every option is the default (Sparse)
    PARTS = {"options": StepOptions}


@dataclass(frozen=True)
class Resumed(Record):
    """The parts a run took from an earlier, stopped run's checkpoint (measuring.Checkpoint), and when that run
    started."""
    parts: list[str]
    measured_at: str


@dataclass(frozen=True, kw_only=True)
class Measurement(WaveMeasurement, wave="8.12", version=1):
    """Wave 8.12's measurement.json: measure()'s data with its header (foxlib.core.results.measures)."""
    schema_version: int = 1  # 8.12's measurement.json has never held one: absent reads as 1
    base_config: dict[str, Any]
    strategies: dict[str, StrategyRun]
    skipped: dict[str, str]
    resumed: Resumed | None = None  # absent in a run not resumed
    memory: dict[str, MemoryProfile | GraphedProfile]
    """strategy -> its step's profile, in the order they were taken (eager steps first); a CUDA graph's:
    GraphedProfile."""
    predicted: dict[str, MemoryProfile | FailedPrediction]
    """strategy -> predict_step's profile, or why there is none (stored as {"error": ...})."""
    timing: dict[str, Timing]
    """strategy -> its step's samples (seconds), alternating in one run."""
    claim_runs: ClaimRuns | RunsNotMade
    floors: Floors
    cublas_workspace: KnobRuns | RunsNotMade
    accuracy_preset: str
    accuracy_runs: dict[str, tuple[training.TrainResult, ...]]
    """set of runs (the strategy they were run for) -> its runs, one per seed."""
    accuracy_source: dict[str, str]
    accuracy_harness: training.HarnessSettings
    same_function: dict[str, Equivalence | FailedCheck]
    """strategy claimed equal -> its check, or why it could not run."""
    timelines: dict[str, TimelineRun] | None = None  # absent with timelines=False

    PARTS: ClassVar[dict[str, Any]] = {"claim_runs": claim_runs_record, "floors": Floors,  # one record each
                                       "accuracy_harness": training.HarnessSettings, "resumed": Resumed,
                                       "cublas_workspace": knob_runs}
    MANY: ClassVar[dict[str, Any]] = {  # per name
        "strategies": StrategyRun, "timing": Timing, "timelines": TimelineRun, "memory": profile_from_dict,
        "predicted": predicted_profile, "accuracy_runs": training.TrainResult, "same_function": check_from_dict}

    def prediction_pairs(self) -> dict[str, tuple[MemoryProfile | FailedPrediction | None,
                                                  MemoryProfile | GraphedProfile]]:
        """One per strategy (a CUDA graph's step is never predicted: its stored prediction says so)."""
        return {n: (self.predicted.get(n), p) for n, p in self.memory.items()}


@dataclass(frozen=True)
class AccuracyRun(Record):
    """One accuracy run (foxlib.harness.training's, its history left out) as the report reads it: validation
    quantile loss, climatology's, the skill score, both 10-90 coverages, and whether it beats climatology by
    min_skill (has_skill)."""
    seed: int
    quantile_loss: float
    naive_quantile_loss: float
    skill_score: float
    coverage_10_90: float
    naive_coverage_10_90: float
    min_skill: float

    @property
    def has_skill(self) -> bool:
        return training.has_skill({"skill_score": self.skill_score}, self.min_skill)

    @classmethod
    def from_run(cls, r: training.TrainResult) -> "AccuracyRun":
        return cls(r.seed, *(float(r.metrics[k]) for k in ("quantile_loss", "naive_quantile_loss", "skill_score",
                                                           "coverage_10_90", "naive_coverage_10_90")),
                   float(r.harness.min_skill))


def same_function_figures(checks: dict[str, Equivalence | FailedCheck]
                          ) -> tuple[dict[str, Equivalence], dict[str, str]]:
    """Measurement.same_function apart: the checks that ran, and why each of the others could not."""
    return ({n: e for n, e in checks.items() if isinstance(e, Equivalence)},
            {n: e.error for n, e in checks.items() if isinstance(e, FailedCheck)})


@dataclass(frozen=True)
class StrategyResult(Record):
    """One strategy as measured: raw bytes and seconds, its ratios to fp32 with their intervals, its accuracy."""
    name: str
    precision: str
    overrides: dict[str, Any]  # as the strategy states them (fractions of the base config stay fractions)
    batch_size: int  # resolved against the base config
    peak_bytes: int  # the step's peak of live tensor bytes
    activation_bytes: int | None  # saved for backward (None: a CUDA graph's step is not split by category)
    step_samples_s: tuple[float, ...]  # one step time per alternating round, in round order
    step_ratio: RatioInterval  # step time over fp32's, paired by round
    window_ratio: RatioInterval  # time per training window over fp32's (step ratio × fp32's batch / this batch)
    accuracy_source: str  # the strategy whose accuracy runs stand for this one (itself, or the same function)
    quantile_loss: float  # mean validation quantile loss of the accuracy source's runs
    accuracy_impact_pct: float  # against fp32's mean, positive = worse
    seed_guess: str | None = None
    changes_numerics: bool = False
    cuda_graph: bool = False
    options: StepOptions = StepOptions()  # the step's options (results.json: {} where all are the defaults)
    workspace_bytes: int | None = None  # cuBLAS workspaces beside the step's tensors (None: not measured)
    minor_faults_samples: tuple[int, ...] = ()  # the CPU: each round's step's minor page faults (Timing)
    PARTS: ClassVar[dict[str, Any]] = {"step_ratio": RatioInterval, "window_ratio": RatioInterval,
                                       "options": StepOptions, "step_samples_s": float,
                                       "minor_faults_samples": int}  # a list: a tuple (typed())

    @property
    def allocator_peak_bytes(self) -> int | None:
        """What max_memory_allocated sees: the step's tensors and its cuBLAS workspaces."""
        return None if self.workspace_bytes is None else self.peak_bytes + self.workspace_bytes

    @property
    def timing(self) -> Timing:
        return Timing(self.name, self.step_samples_s, self.minor_faults_samples)

    @property
    def stated_options(self) -> dict[str, Any]:
        """The options as results.json states them: every option, or {} where all are the defaults."""
        return {} if self.options.is_default else self.options.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """Every field, the options as stated_options; minor_faults_samples only where they were counted."""
        d = super().to_dict() | {"options": self.stated_options}
        return d if self.minor_faults_samples else {k: v for k, v in d.items() if k != "minor_faults_samples"}


@dataclass(frozen=True)
class Measurement812(Record):
    """Wave 8.12's measurement as the decisions read it: one StrategyResult per strategy measured.
    Built from the typed measurement (`from_measurement`) or read back from its own JSON (`from_dict`)."""
    strategies: tuple[StrategyResult, ...]
    base_config: dict[str, Any]
    device: Device
    n_parameters: int  # of the fp32 baseline's model
    skipped: dict[str, str] = field(default_factory=dict)
    baseline: str = BASELINE
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    bootstrap_seed: int = SEED
    schema_version: int = SCHEMA_VERSION
    workspace_knob: tuple[KnobResult, ...] = ()  # the cuBLAS workspace knob's strategies (workspace.py)
    claim_runs: dict[str, tuple[RatioInterval, ...]] = field(default_factory=dict)
    """Per seed-claim strategy, its time per window over fp32's in each independent run (claim_runs.py)."""
    preset: str = ""  # the TFT preset the strategies start from (measure_parameters)
    accuracy_preset: str = ""  # the accuracy runs' TFT preset
    accuracy_runs: dict[str, tuple[AccuracyRun, ...]] = field(default_factory=dict)  # per set of runs
    same_function: dict[str, Equivalence] = field(default_factory=dict)  # per strategy claimed equal, checked
    same_function_errors: dict[str, str] = field(default_factory=dict)  # why a claimed strategy was not checked
    floors: Floors = field(kw_only=True)  # foxlib.harness.floors' figures (required, in its place in to_dict)
    knob_absent: str | None = None  # why workspace_knob is empty (the knob's absent_reason, workspace.py)
    PARTS = {"device": Device, "strategies": StrategyResult, "workspace_knob": KnobResult, "floors": Floors}
    MANY = {"same_function": Equivalence, "claim_runs": RatioInterval, "accuracy_runs": AccuracyRun}

    def knob(self, name: str) -> KnobResult | None:
        """The strategy measured at both cuBLAS workspace sizes, or None."""
        return next((k for k in self.workspace_knob if k.name == name), None)

    def __getitem__(self, name: str) -> StrategyResult:
        for s in self.strategies:
            if s.name == name:
                return s
        raise KeyError(f"no strategy {name!r}; measured: {'; '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.strategies]

    @property
    def interval_confidence(self) -> float:
        """The coverage the strategies' intervals state: `confidence`, or less from too few timing rounds
        (foxlib.harness.timing.shared_confidence; every strategy is timed in the same rounds)."""
        return shared_confidence(s.window_ratio for s in self.strategies)

    @property
    def baseline_losses(self) -> tuple[float, ...]:
        """The baseline's accuracy runs' quantile losses, one per seed: its own spread."""
        return tuple(r.quantile_loss for r in self.accuracy_runs[self.baseline])

    @classmethod
    def from_measurement(cls, m: Measurement, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                         seed: int = SEED) -> "Measurement812":
        """From the typed, checked measurement (Measurement.from_dict of measurement.json's data): the ratios'
        intervals bootstrapped here."""
        if BASELINE not in m.strategies:
            raise ValueError(f"a wave 8.12 measurement needs the {BASELINE!r} strategy; it has: "
                             f"{'; '.join(m.strategies)}")
        base_bs = m.base_config["batch_size"]
        runs = {n: tuple(AccuracyRun.from_run(r) for r in rs) for n, rs in m.accuracy_runs.items()}
        same, errors = same_function_figures(m.same_function)
        base_loss = sum(r.quantile_loss for r in runs[BASELINE]) / len(runs[BASELINE])
        out, workspaces = [], own_workspaces(m.memory)  # m.memory is in the order the profiles were taken
        for name, info in m.strategies.items():
            bs = resolve_overrides(m.base_config, info.overrides).get("batch_size", base_bs)
            step = ratio_interval(m.timing, name, BASELINE, confidence, resamples, seed)
            source = m.accuracy_source[name]
            loss = sum(r.quantile_loss for r in runs[source]) / len(runs[source])
            out.append(StrategyResult(
                name=name, precision=info.precision, overrides=dict(info.overrides), batch_size=bs,
                peak_bytes=int(m.memory[name].peak), activation_bytes=m.memory[name].activations,
                step_samples_s=m.timing[name].samples, step_ratio=step, window_ratio=step.scaled(base_bs / bs),
                accuracy_source=source, quantile_loss=loss, accuracy_impact_pct=100 * (loss - base_loss) / base_loss,
                seed_guess=info.seed_guess, changes_numerics=info.changes_numerics,
                cuda_graph=info.cuda_graph, options=info.options,
                workspace_bytes=workspaces[name], minor_faults_samples=m.timing[name].minor_faults_samples))
        return cls(tuple(out), dict(m.base_config), m.device, int(m.memory[BASELINE].n_parameters), dict(m.skipped),
                   BASELINE, confidence, resamples, seed, workspace_knob=knob_results(m.cublas_workspace),
                   claim_runs=claim_intervals(m.claim_runs), preset=m.measure_parameters["preset"],
                   accuracy_preset=m.accuracy_preset, accuracy_runs=runs, same_function=same,
                   same_function_errors=errors, floors=m.floors, knob_absent=m.cublas_workspace.absent_reason)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement812":
        """From to_dict()'s data (every field, each record through its own to_dict), of this schema version."""
        readable_version(d, "8.12", SCHEMA_VERSION, absent=None)
        return super().from_dict(d)

