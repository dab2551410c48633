"""Wave 8.13's measurement, typed: frozen dataclasses (`Measurement` and its parts), measurement.json through
to_dict / from_dict, checked on load."""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from foxlib.core.provenance import Citation
from foxlib.core.schema import Record, Sparse, WaveMeasurement
from foxlib.harness.step_options import StepOptions
from foxlib.memory.cuda import BareContext
from foxlib.memory.profile import MemoryProfile


SCHEMA_VERSION = 2
"""2: the warm-up before the context, NVML's per-process figure sampled through the run, depends_on."""


@dataclasses.dataclass(frozen=True)
class Cap(Sparse):
    """The allocator cap (bytes): cap = card − CUDA context (or cap_bytes), the limit the run is checked against;
    on CUDA the fraction of device memory set, the device's memory and what was reserved when the cap was set
    (the CPU: fraction and device memory null, reserved_at_cap_bytes absent)."""
    card_bytes: int
    context_bytes: int
    cap_bytes: int
    limit_bytes: int
    enforced: bool
    override: bool
    how: str
    fraction: float | None
    device_total_bytes: int | None
    reserved_at_cap_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class NvmlSeries(Record):
    """NVML's per-process figure sampled through training and inference: [seconds, phase, bytes or None] each."""
    applicable: bool
    note: str
    interval_s: float | None
    samples: list[list[Any]]

    def values(self, phase: str | None = None) -> list[int | None]:
        return [v for _, p, v in self.samples if phase is None or p == phase]


@dataclasses.dataclass(frozen=True)
class Step(Record):
    """One step of the interleaved run (bytes, seconds): allocated at its start and peak (all models), reserved
    peak; on the CPU the accounting's figures, reserved None."""
    model: str
    step: int
    loss: float | None
    seconds: float
    start_bytes: int
    peak_bytes: int
    reserved_peak_bytes: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Oom(Sparse):
    """An out-of-memory error as data: cap.cuda_oom (the allocator's figures when it failed, bytes) or, on the
    CPU, cap.accounting_oom (without them). needed: reserved + the failed request (CPU: what would be live)."""
    phase: str
    model: str | None
    step: int | None
    error: str
    requested_bytes: int | None
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    needed_bytes: int
    enforced: bool

    @property
    def where(self) -> str:
        if self.phase == "setup":
            return f"while loading {self.model}"
        if self.phase == "training":
            return f"at step {self.step} of {self.model}"
        return f"during inference ({self.model})" if self.model else "during inference"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NvmlView(Sparse):
    """foxlib.memory.cuda.nvml_view at a phase's end (bytes): the device's and this process's use, or why not."""
    available: bool
    device_used_bytes: int | None = None
    device_total_bytes: int | None = None
    driver: str | None = None
    process_used_bytes: int | None = None
    note: str


@dataclasses.dataclass(frozen=True)
class AllocatorStats(Record):
    """foxlib.memory.cuda.allocator_stats at a phase's end (bytes; peaks since the last reset)."""
    allocated_bytes: int
    allocated_peak_bytes: int
    reserved_bytes: int
    reserved_peak_bytes: int
    requested_bytes: int
    inactive_split_bytes: int
    alloc_retries: int
    ooms: int


@dataclasses.dataclass(frozen=True)
class Setup(Record):
    """The models loaded, before the first step (bytes): allocated, its peak, reserved peak (None on the CPU)."""
    bytes: int
    peak_bytes: int
    reserved_peak_bytes: int | None


@dataclasses.dataclass(frozen=True)
class Footprint(Record):
    """A loaded model (members.static_footprints, bytes): weights, Adam state, its batch/buffers on the device and
    in host RAM."""
    parameters_bytes: int
    optimizer_state_bytes: int
    batch_device_bytes: int
    batch_host_bytes: int

    @property
    def kept_bytes(self) -> int:
        """What it keeps on the device between its steps."""
        return self.parameters_bytes + self.optimizer_state_bytes + self.batch_device_bytes


@dataclasses.dataclass(frozen=True)
class StepSummary(Record):
    """A model's steps (measuring.summarise_steps; bytes, seconds): losses, median step, peaks (all models)."""
    steps_run: int
    first_loss: float | None
    last_loss: float | None
    non_finite_losses: int
    median_step_s: float | None
    peak_bytes: int | None
    reserved_peak_bytes: int | None
    step_increment_bytes: int | None


@dataclasses.dataclass(frozen=True)
class Training(Sparse):
    """The interleaved run: its setup, each model's footprint and summary, every step in order; the figures the
    checks use (bytes); on CUDA NVML's and the allocator's view at its end and the context they imply."""
    setup: Setup
    models: dict[str, Footprint]
    peak_how: str
    per_model: dict[str, StepSummary]
    enforced: bool
    steps: tuple[Step, ...]
    peak_bytes: int
    peak_allocated_bytes: int
    oom: Oom | None
    context_end_bytes: int | None = None
    nvml_end: NvmlView | None = None
    allocator_end: AllocatorStats | None = None

    PARTS = {"setup": Setup, "steps": Step, "oom": Oom, "nvml_end": NvmlView, "allocator_end": AllocatorStats}
    MANY = {"models": Footprint, "per_model": StepSummary}


@dataclasses.dataclass(frozen=True)
class Latency(Record):
    """serve.py's timings of one model (or of the whole round) over the timed rounds, in seconds."""
    p50_s: float | None
    p99_s: float | None
    mean_s: float | None
    n: int
    samples_s: list[float]


@dataclasses.dataclass(frozen=True)
class Served(Sparse):
    """One model in inference (bytes): its batch, weights and input, how its forward ran where captured, its
    forward's own peak alone, its latency alone and all at once (where it got that far)."""
    precision: str
    batch: int
    parameters_bytes: int
    input_bytes: int
    cuda_graph: str | None = None
    solo_increment_bytes: int | None = None
    alone: Latency | None = None
    together: Latency | None = None

    PARTS = {"alone": Latency, "together": Latency}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inference(Sparse):
    """Every model resident (serve.infer), each alone then all at once in `mode`: each model, the round, the
    figures the checks use (bytes); what an out-of-memory error stopped is absent; the ends as in Training."""
    mode: str
    repeats: int
    warmup_rounds: int
    models: dict[str, Served]
    how: str
    memory_how: str
    resident_bytes: int | None = None
    accounted_bytes: int | None = None
    round: Latency | None = None
    enforced: bool
    peak_bytes: int
    peak_allocated_bytes: int
    oom: Oom | None
    context_end_bytes: int | None = None
    nvml_end: NvmlView | None = None
    allocator_end: AllocatorStats | None = None

    PARTS = {"round": Latency, "oom": Oom, "nvml_end": NvmlView, "allocator_end": AllocatorStats}
    MANY = {"models": Served}


@dataclasses.dataclass(frozen=True)
class TftRun(Sparse):
    """The TFT as the run took it (tft.resolve_tft less its config and citations): cuda_graph and options for a
    captured step, cublas_workspace where 8.12 advises one."""
    precision: str
    overrides: dict[str, Any]
    source: str
    recommended: bool
    cuda_graph: bool | None = None
    options: StepOptions | None = None
    cublas_workspace: str | None = None
    """A CUBLAS_WORKSPACE_CONFIG value such as ":16:8"."""

    PARTS = {"options": StepOptions}

    @property
    def step_options(self) -> StepOptions:
        """The TFT's training step options: the defaults where the run recorded none."""
        return self.options or StepOptions()


@dataclasses.dataclass(frozen=True)
class ModelRun(Record):
    """One model of the ensemble as it ran: its card's title, precision, config (the dataclass's fields), preset."""
    title: str
    precision: str
    config: dict[str, Any]
    preset: str


@dataclasses.dataclass(frozen=True)
class Context(BareContext):
    """The CUDA context (bytes) as cap.measure_context measured it: foxlib.memory.cuda.bare_context's figures, the
    context always given (without NVML's process figure: the device's use − the allocator's reserve), and how."""
    context_bytes: int
    how: str


@dataclasses.dataclass(frozen=True)
class Warmup(Record):
    """measuring.warm_up: its seconds, an out-of-memory error that stopped it, what it ran, what it left allocated
    (bytes: the cuBLAS workspaces)."""
    seconds: float
    oom: str | None
    what: list[str]
    allocated_after_bytes: int
    how: str


@dataclasses.dataclass(frozen=True)
class GraphMode(Sparse):
    """Where 8.12's recommendation asked for a CUDA graph: asked, on, why, and per model how its training step and
    inference forward ran (where on)."""
    asked: bool
    on: bool
    why: str
    training: dict[str, str] | None = None
    inference: dict[str, str] | None = None


@dataclasses.dataclass(frozen=True)
class CublasWorkspace(Record):
    """foxlib.memory.cuda.use_cublas_workspace: the setting asked, whether it held, the workspace taken (bytes)."""
    asked: str
    applied: bool
    workspace_bytes: int
    asked_bytes: int
    why: str


@dataclasses.dataclass(frozen=True)
class ClassFacts(Record):
    """The card class validated (measuring.class_facts): what it enforces, and what an emulation leaves out."""
    name: str
    title: str
    own_class: str
    emulated: bool
    enforced: list[str]
    not_emulated: str


@dataclasses.dataclass(frozen=True)
class Measurement(WaveMeasurement, wave="8.13", version=SCHEMA_VERSION):
    """What `measure` returns (its data with the header: foxlib.core.results.measures)."""
    order: tuple[str, ...]
    steps: int
    tft: TftRun
    models: dict[str, ModelRun]
    depends_on: tuple[Citation, ...]
    cap: Cap
    training: Training
    inference: Inference
    nvml: NvmlSeries
    context: Context | None
    """CUDA: the context measured after the warm-up; None on the CPU."""
    context_before_warmup: Context | None
    """CUDA: the context before the warm-up; None on the CPU."""
    warmup: Warmup | None
    """CUDA: what the warm-up ran and left allocated; None on the CPU."""
    step_profiles: dict[str, MemoryProfile] | None
    """The CPU: each model's step measured alone, the accounting's input; None on CUDA."""
    graph_mode: GraphMode | None
    """Where 8.12's recommendation asked for a CUDA graph; else None."""
    cublas_workspace: CublasWorkspace | None
    """The cuBLAS workspace size the TFT's recommendation carries; else None."""
    card_class: ClassFacts

    CUDA_PARTS: ClassVar[tuple[str, ...]] = ("context", "context_before_warmup", "warmup")  # a cap's run holds them
    PARTS: ClassVar[dict[str, Any]] = {
        "tft": TftRun, "cap": Cap, "training": Training, "inference": Inference, "nvml": NvmlSeries, "context": Context,
        "context_before_warmup": Context, "warmup": Warmup, "graph_mode": GraphMode,
        "cublas_workspace": CublasWorkspace, "card_class": ClassFacts, "depends_on": Citation}
    MANY: ClassVar[dict[str, Any]] = {"models": ModelRun, "step_profiles": MemoryProfile}

    @classmethod
    def typed_parts(cls, d: dict[str, Any]) -> dict[str, Any]:
        missing = [k for k in cls.CUDA_PARTS if d["cap"]["enforced"] and d[k] is None]
        if missing:  # the cap's tables and risks read them: refused here, not a TypeError at render
            raise KeyError(f"a run under an enforced cap lacks {', '.join(missing)}")
        return {"order": tuple(d["order"]), "steps": int(d["steps"])}

    def phase(self, name: str) -> Training | Inference:
        """`training` or `inference`, by name; another name is a ValueError (not another field)."""
        if name not in ("training", "inference"):
            raise ValueError(f"unknown phase {name!r}; valid: training, inference")
        return getattr(self, name)
