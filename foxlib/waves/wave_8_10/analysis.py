"""Wave 8.10's decisions and shared figures, on raw bytes: the ensemble's totals in one process, the checks
against budgets.toml, the share of the peak torch.profiler could not put in a category, and the named figures.

The model peak is the step's own tensors (`MemoryProfile.peak`); the process peak adds the cuBLAS workspaces
(each stream's once) and the CUDA context, once for the ensemble in one process; on the CPU it is the model peak.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from foxlib.core.budgets import Check
from foxlib.core.config import MB
from foxlib.core.figures import Figure, key
from foxlib.memory.second_opinion import SecondOpinion
from foxlib.models import ENSEMBLE
from foxlib.waves.wave_8_10.measuring import TARGET_PRECISION
from foxlib.waves.wave_8_10.records import Measurement

MODEL_PEAK = "model peak"
PROCESS_PEAK = "process peak"
MODEL_PEAK_DEFINITION = "the step's own tensors at their largest (CUDA: the allocator's peak less the workspaces)"


@dataclass(frozen=True)
class EnsembleTotals:
    """The four models trained in one process, in bytes."""
    model_peaks: dict[str, int]
    workspace_bytes: int
    """cuBLAS workspaces, each stream's once: the largest any model's step found allocated (they persist
    and accumulate in the process, so the last model's start holds every one made before); 0 on the CPU."""
    context_bytes: int
    """The CUDA context, once: the largest measured after any model's step (it grows as kernels load); 0 on the CPU."""
    on_cuda: bool

    @property
    def process_peak(self) -> int:
        """The ensemble's process peak: sum of the model peaks + workspaces once + context once."""
        return sum(self.model_peaks.values()) + self.workspace_bytes + self.context_bytes

    def share_of(self, card_bytes: float) -> float:
        return self.process_peak / card_bytes


def ensemble_totals(m: Measurement, target_state: bool = False) -> EnsembleTotals | None:
    """The ensemble as measured (fp32), or in the seed's target state (None where that was not measured)."""
    models = m.target_state if target_state else m.models
    if not models:
        return None
    profiles = {k: v.profile for k, v in models.items()}
    context_bytes = (max(p.context_bytes for p in profiles.values())
                     or int(m.bare_context and m.bare_context.context_bytes or 0)) if m.on_cuda else 0
    return EnsembleTotals(model_peaks={k: p.peak for k, p in profiles.items()},
                          workspace_bytes=max(p.workspace_bytes for p in profiles.values()),
                          context_bytes=context_bytes, on_cuda=m.on_cuda)


def checks(m: Measurement, budgets: dict[str, dict[str, float]]) -> list[Check]:
    p, b = m.tft.profile, budgets["tft"]
    out = [
        Check.at_most("TFT parameters", p.parameters, b["parameters_mb"] * MB, "bytes"),
        Check.at_most("TFT forward activations (saved for backward)", p.activations,
                      b["forward_activations_mb"] * MB, "bytes"),
        Check.at_most("TFT gradients", p.gradients, b["gradients_mb"] * MB, "bytes"),
        Check.at_most("TFT optimizer state", p.optimizer_state, b["optimizer_state_mb"] * MB, "bytes"),
        Check.at_most("TFT peak training memory", p.peak, b["peak_training_mb"] * MB, "bytes",
                      note=f"{MODEL_PEAK}: {MODEL_PEAK_DEFINITION}"),
    ]
    if m.ensemble:
        e = ensemble_totals(m)
        headroom_mb = budgets["ensemble"]["min_headroom_mb"]
        limit_bytes = budgets["ensemble"]["card_mb"] * MB - headroom_mb * MB
        what = ("sum of the four model peaks + cuBLAS workspaces once + CUDA context once" if e.on_cuda else
                "sum of the four model peaks (CPU: no context or workspaces, the process peak is the models' sum)")
        out.append(Check.at_most("ensemble fits in 4 GB", e.process_peak, limit_bytes, "bytes",
                                 note=f"{PROCESS_PEAK} of the ensemble: {what}, leaving at least "
                                      f"{headroom_mb:.0f} MB free"))
    return out


def unexplained_fraction(so: SecondOpinion | None) -> float | None:
    """Of one second opinion (torch.profiler's categories): the bytes in no category at the peak over the peak."""
    if so is None or not so.available or not so.peak_bytes:
        return None
    return so.at_peak.get("unknown", 0) / so.peak_bytes


UNEXPLAINED_TARGET_PCT = 5.0


def named_figures(m: Measurement) -> list[Figure]:
    """The figures this report shows that other pages show too (foxlib.core.figures), raw."""
    p, cfg = m.tft.profile, m.tft.config
    preset = m.measure_parameters.get("preset", "seed")
    tft = partial(key, "tft", preset, cfg["batch_size"], cfg["encoder_length"], p.precision)
    out = [Figure(tft(q), getattr(p, q), "bytes") for q in
           ("parameters", "gradients", "optimizer_state", "activations", "forward_peak")]
    out += [Figure(tft("model_peak"), p.peak, "bytes"), Figure(tft("process_peak"), p.process_peak, "bytes"),
            Figure(tft("theory_peak"), int(m.theory.peak), "bytes")]
    ensemble_preset = m.measure_parameters.get("ensemble_preset", "seed")
    out += [Figure(f"{name}/{ensemble_preset}/fp32/model_peak", mm.profile.peak, "bytes")
            for name, mm in m.ensemble.items()]
    for state, tag in ((False, "fp32"), (True, f"{TARGET_PRECISION}-checkpoint")):
        totals = ensemble_totals(m, target_state=state)
        if totals is not None and len(totals.model_peaks) == len(ENSEMBLE):
            quantity = "predicted_process_peak" if state and m.target_state_predicted else "process_peak"
            out.append(Figure(f"ensemble/{ensemble_preset}/{tag}/{quantity}", totals.process_peak, "bytes"))
    return out
