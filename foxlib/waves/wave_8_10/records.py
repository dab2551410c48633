"""Wave 8.10's measurement, typed: `Measurement` (measurement.json through to_dict / from_dict, checked
on load), read by every check, table and figure of the wave."""
from __future__ import annotations

from dataclasses import dataclass

from foxlib.core.provenance import Citation
from foxlib.core.schema import Record, WaveMeasurement
from foxlib.harness.measure_step import ModelMeasurement
from foxlib.memory.cuda import BareContext
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.second_opinion import SecondOpinion
from foxlib.memory.tolerances import FailedPrediction
from foxlib.models import ENSEMBLE

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`: a CUDA profile's peak is the model peak, its workspaces apart."""


@dataclass(frozen=True)
class Theory(Record):
    """The TFT's step from its shapes alone (foxlib.memory.theory.training_step, bytes), its saved activations per
    block (activation_theory_by_block); activations, peak and the blocks None where the count does not apply."""
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int | None
    peak: int | None
    formula: str
    activations_by_module: dict[str, int] | None


@dataclass(frozen=True)
class SlowKernels(Record):
    """Why the target state was predicted, not run (measuring.slow_target): foxlib.memory.cpu_support's probe of the
    target precision on a CPU without its kernels (its product's time over fp32's, ATen's capability, fast or not,
    the ratio from which it is slow: SLOW_PATH_RATIO) and its reason."""
    precision: str
    ratio: float
    capability: str
    fast: bool
    slow_path_ratio: float
    reason: str


@dataclass(frozen=True)
class Measurement(WaveMeasurement, wave="8.10", version=SCHEMA_VERSION):
    """Wave 8.10's measurement (measure()'s data, with its header: foxlib.core.results.measures)."""
    WRITTEN_LAST = ("tft", "ensemble", "target_state")
    tft: ModelMeasurement
    theory: Theory
    ensemble: dict[str, ModelMeasurement]
    target_state: dict[str, ModelMeasurement]
    """The seed's target configuration (TARGET_PRECISION, the TFT checkpointed), each model; empty if not measured."""
    snapshot: str
    depends_on: tuple[Citation, ...]
    second_opinion: SecondOpinion | None
    """torch.profiler's categories of the TFT's step (None: not measured)."""
    bare_context: BareContext | None
    """CUDA: the context and the first cuBLAS workspace measured at the start (bare_context()); None on the CPU."""
    target_state_kernels: SlowKernels | None
    """Where the target state was predicted, not run: the fp16 kernel probe (measuring.slow_target); else None."""

    def snapshot_file(self) -> str:
        return self.snapshot

    def prediction_pairs(self) -> dict[str, tuple[MemoryProfile | FailedPrediction | None, MemoryProfile]]:
        """The TFT's, then the ensemble's models'."""
        return {name: (e.predicted, e.profile) for name, e in {"tft": self.tft, **self.ensemble}.items()}

    @property
    def models(self) -> dict[str, ModelMeasurement]:
        """Every measured model, in the ensemble's order (the TFT included)."""
        every = {**self.ensemble, "tft": self.tft}
        return {k: every[k] for k in ENSEMBLE if k in every} | {k: v for k, v in every.items() if k not in ENSEMBLE}

    @property
    def target_state_predicted(self) -> bool:
        """True where any model of the target state was predicted, not run (target_state_kernels says why)."""
        return any(v.predicted_only for v in self.target_state.values())

    @property
    def on_cuda(self) -> bool:
        return self.tft.profile.cuda is not None

    PARTS = {"theory": Theory, "tft": ModelMeasurement, "second_opinion": SecondOpinion, "bare_context": BareContext,
             "target_state_kernels": SlowKernels, "depends_on": Citation}
    MANY = {"ensemble": ModelMeasurement, "target_state": ModelMeasurement}
