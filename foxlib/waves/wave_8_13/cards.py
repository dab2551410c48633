"""Which card fits: whether the ensemble trains and serves on real 4-24 GB cards, per configuration;
the figures and the one call a report makes (`table_for_measurement`). The table, its cards and its
decisions are in card_table.py (its names are importable from here too).

A configuration's figures on a card come from one of two sources, and every cell says which:
- "measured": wave 8.13's own figures (analysis.py's training_figure / inference_figure: the
  process's peak against the cap, plus the CUDA context), for the one card 8.13 emulated
  under a real allocator cap on a GPU. A CPU run (nothing enforced) or a run with a cap_bytes
  override emulates no card and gives no measured cell.
- "predicted": each model's training step predicted without running it
  (foxlib.memory.predict.predict_step, for CUDA), the interleaved run accounted as 8.13 accounts
  it on the CPU (account.py's account_training: the stepping model's peak plus what every other
  model keeps between its steps), plus the cuBLAS workspace once per CUDA stream and the CUDA
  context measured by 8.13. The context is that of the measuring GPU and driver: another card's differs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from foxlib.core.config import MB
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.tolerances import PEAK_TOLERANCE_PCT
from foxlib.waves.wave_8_13 import analysis
from foxlib.waves.wave_8_13.account import account_training
from foxlib.waves.wave_8_13.card_table import (CARDS, Card, CardTable, Footprint, ModelFigures, card_frame, fits,
                                                notes_text)
from foxlib.waves.wave_8_13.records import Measurement, Phase

# ----------------------------------------------------------------------------- prediction

def accounted_training_bytes(models: Sequence[ModelFigures], steps: int = 2) -> int:
    """The interleaved run's largest live total (models only), accounted as wave 8.13 accounts it:
    loading every model, then each model's step peak beside what the others keep. Two rounds reach
    the steady state (every model has stepped and holds its Adam state)."""
    if not models:
        raise ValueError("a configuration needs at least one model")
    profiles = {m.model: m.as_step_profile() for m in models}
    plan = account_training(profiles, [m.model for m in models], steps, cap=2**62)
    return max([plan["setup_bytes"]] + [s["peak_bytes"] for s in plan["steps"]])


def serving_streams(n_models: int) -> int:
    """CUDA streams wave 8.13's serving uses: the default one (each model timed alone) + one per model."""
    return n_models + 1


def predicted_footprint(configuration: str, models: Sequence[ModelFigures], *, context_bytes: int,
                        workspace_bytes: int, streams: int | None = None, training_cache_bytes: int = 0,
                        serving_cache_bytes: int = 0, note: str = "",
                        margins: tuple[float, float] = (PEAK_TOLERANCE_PCT / 100,) * 2) -> Footprint:
    """A configuration's predicted process figures: training = the accounted models' peak + one
    workspace (the step runs on the default stream) + the context; serving = every model's serve
    figure + a workspace per stream (`streams`, default serving_streams) + the context. The
    *_cache_bytes add what the caching allocator holds beyond live tensors (reserved − allocated
    at the peak), which no prediction of tensors sees; 0 unless given (measured_overheads). A card fits it only
    with `margins` (training, serving) added: the prediction's measured errors where a run measured them
    (prediction_margins), else the predictor's stated peak tolerance."""
    if min(context_bytes, workspace_bytes, training_cache_bytes, serving_cache_bytes) < 0:
        raise ValueError(f"context, workspace and cache bytes must not be negative, got {context_bytes}, "
                         f"{workspace_bytes}, {training_cache_bytes}, {serving_cache_bytes}")
    streams = serving_streams(len(models)) if streams is None else streams
    training = accounted_training_bytes(models) + workspace_bytes + training_cache_bytes + context_bytes
    serving = sum(m.serve_bytes for m in models) + streams * workspace_bytes + serving_cache_bytes + context_bytes
    return Footprint(configuration, "predicted", int(training), int(serving),
                     tuple(sorted({m.precision for m in models})), note=note,
                     training_margin=margins[0], serving_margin=margins[1])


def prediction_margins(measured: Footprint | None, predicted: Footprint) -> tuple[tuple[float, float], str]:
    """The margins (training, serving) a predicted footprint decides with, and where they come from: each phase's
    measured error, |measured − predicted| / predicted of the configuration 8.13 ran on the card it emulated;
    where no complete run measured them (a CPU run, an out-of-memory phase), the predictor's stated peak
    tolerance for both (foxlib.memory.tolerances.PEAK_TOLERANCE_PCT)."""
    if measured is None or not (measured.training_ran and measured.serving_ran):
        return (PEAK_TOLERANCE_PCT / 100,) * 2, (f"the predictor's stated peak tolerance, {PEAK_TOLERANCE_PCT:g} % (no "
                                                 "complete run on a card here measured its error)")
    training = (measured.training_bytes - predicted.training_bytes) / predicted.training_bytes
    serving = (measured.serving_bytes - predicted.serving_bytes) / predicted.serving_bytes
    return (abs(training), abs(serving)), (f"the prediction's measured errors, training {100 * training:+.2f} %, serving "
                                           f"{100 * serving:+.2f} % (measured against predicted: this run's configuration "
                                           "on the card it emulated), each for its phase")


def model_figures(model: str, precision: str, profile: MemoryProfile) -> ModelFigures:
    """ModelFigures from the MemoryProfile of one training step (predict_step's).

    Serving is taken as weights + the batch less its device buffers (the RL models' replay and
    rollout buffers, which inference does not need) + the training forward's increment, which
    holds what autograd saves for backward: an upper bound of a no-grad forward."""
    device_buffers = sum(int(b.get("device_bytes", 0)) for b in (profile.buffers or {}).values())
    live = int(profile.live_before_step)
    forward = max(0, int(profile.forward_peak) - live)
    serve = int(profile.parameters) + max(0, int(profile.batch) - device_buffers) + forward
    return ModelFigures(model, precision, int(profile.peak), live, int(profile.optimizer_state), serve)


def ensemble_members(preset: str = "seed", tft_overrides: Mapping[str, Any] | None = None,
                     tft_precision: str = "fp32", ensemble_precision: str = "fp32") -> dict[str, tuple[Any, str]]:
    """{model: (config, precision)} of the ensemble as wave 8.13 builds it: every model of the preset
    in `ensemble_precision`, the TFT with `tft_overrides` in `tft_precision`."""
    from foxlib.models import ENSEMBLE, MODELS
    out = {}
    for name in (n for n in ENSEMBLE if n in MODELS):
        if name == "tft":
            out[name] = (MODELS[name].config(preset, **dict(tft_overrides or {})), tft_precision)
        else:
            out[name] = (MODELS[name].preset(preset), ensemble_precision)
    return out


def measured_members(m: Measurement) -> dict[str, tuple[Any, str]]:
    """{model: (config, precision)} of the ensemble a wave 8.13 measurement ran (its "models")."""
    from foxlib.models import MODELS
    out = {}
    for name in m.order:
        info = m.models[name]
        base = MODELS[name].preset(info["preset"])
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
        values = {k: (tuple(v) if isinstance(v, list) and isinstance(fields.get(k), tuple) else v)
                  for k, v in info["config"].items()}
        out[name] = (MODELS[name].config(info["preset"], **values), info["precision"])
    return out


def _predicted(name: str, cfg: Any, precision: str, seed: int):
    """predict_step of one model's CUDA step, made once per (model, config, precision, seed) in this process
    (predict_step keeps its predictions): the configurations of one table share most of their models."""
    from foxlib.memory.predict import predict_step
    from foxlib.models import MODELS
    return predict_step(MODELS[name], cfg, precision=precision, seed=seed, target="cuda")


def predict_configuration(configuration: str, members: Mapping[str, tuple[Any, str]], *, context_bytes: int,
                          workspace_bytes: int, training_cache_bytes: int = 0, serving_cache_bytes: int = 0,
                          seed: int = 0, note: str = "",
                          margins: tuple[float, float] = (PEAK_TOLERANCE_PCT / 100,) * 2) -> Footprint:
    """Predict every model's CUDA training step (predict_step, target "cuda": multi-tensor Adam) and
    sum them into a predicted_footprint. Takes seconds to a minute per model on a CPU (the seed
    TFT is the slow one); allocates no model memory."""
    figures = [model_figures(name, precision, _predicted(name, cfg, precision, seed))
               for name, (cfg, precision) in members.items()]
    return predicted_footprint(configuration, figures, context_bytes=context_bytes, workspace_bytes=workspace_bytes,
                               training_cache_bytes=training_cache_bytes, serving_cache_bytes=serving_cache_bytes,
                               note=note, margins=margins)


# ----------------------------------------------------------------------------- wave 8.13's measurement

@dataclass(frozen=True)
class Overheads:
    """What a GPU process holds beyond the models' tensors, as wave 8.13 measured it (bytes)."""
    context_bytes: int
    """The CUDA context: the larger of 8.13's two phases (analysis.py's context_bytes)."""
    workspace_bytes: int
    """cuBLAS workspace, per CUDA stream."""
    training_cache_bytes: int
    """Training: reserved − allocated at the peaks (the caching allocator's cache and rounding)."""
    serving_cache_bytes: int
    device: str

    @property
    def note(self) -> str:
        if not (self.context_bytes or self.workspace_bytes):
            return (f"no CUDA context, workspace or allocator cache was measured on {self.device}: the predicted "
                    "figures hold the models' tensors only; a GPU adds its context (hundreds of MB)")
        return (f"CUDA context {self.context_bytes / MB:,.1f} MB, cuBLAS workspace {self.workspace_bytes / MB:,.1f} MB "
                f"per stream and the allocator's cache (training {self.training_cache_bytes / MB:,.1f} MB, serving "
                f"{self.serving_cache_bytes / MB:,.1f} MB) as wave 8.13 measured them on {self.device}; another "
                "card's driver and context differ")


def measured_overheads(m: Measurement) -> Overheads:
    """The context, workspace and allocator cache of a wave 8.13 measurement; all 0 on the CPU."""
    device = m.device["name"]
    if not m.cap.enforced:
        return Overheads(0, 0, 0, 0, device)

    def cache(phase: Phase) -> int:
        if phase.peak_bytes is None or phase.peak_allocated_bytes is None:
            return 0
        return max(0, int(phase.peak_bytes) - int(phase.peak_allocated_bytes))
    context = max(analysis.context_bytes(m, "training"), analysis.context_bytes(m, "inference"))
    # the workspaces the warm-up left allocated (analysis.py's workspace_bytes); a measurement made before
    # the warm-up existed names only the first product's workspace, with the context
    measured = analysis.workspace_bytes(m)
    workspace = int(measured if measured is not None else (m.context or {}).get("cublas_workspace_bytes") or 0)
    return Overheads(int(context), workspace, cache(m.training), cache(m.inference), device)


def measured_footprint(configuration: str, m: Measurement) -> Footprint | None:
    """8.13's own figures for the card it emulated; None where it emulated none (a CPU run: not
    enforced; a cap_bytes override: a cap that is not a card)."""
    if not m.cap.enforced or m.cap.override:
        return None
    precisions = tuple(sorted({info["precision"] for info in m.models.values()}))
    return Footprint(configuration, "measured", int(analysis.training_figure(m)), int(analysis.inference_figure(m)),
                     precisions, card_bytes=int(m.cap.card_bytes),
                     training_ran=not m.training.oom, serving_ran=not m.inference.oom,
                     note=f"wave 8.13 on {m.device['name']}, {analysis.how(m)}")


# ----------------------------------------------------------------------------- one call for a report

MODEL_NAMES = {"dqn": "DQN", "ppo": "PPO", "mamba2": "Mamba-2", "tft": "TFT"}


def configuration_name(members: Mapping[str, tuple[Any, str]], preset: str = "seed") -> str:
    """A configuration in words: each model's precision and the fields that differ from the preset."""
    from foxlib.models import MODELS
    parts = []
    for name, (cfg, precision) in members.items():
        base = MODELS[name].preset(preset)
        changed = [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
                   if getattr(cfg, f.name) != getattr(base, f.name)]
        parts.append(f"{MODEL_NAMES.get(name, name)} {precision}" + (f" ({', '.join(changed)})" if changed else ""))
    return f"{preset}: " + ", ".join(parts)


def alternatives(preset: str = "seed") -> dict[str, dict[str, tuple[Any, str]]]:
    """Configurations every card table predicts beside the one 8.13 measured: the plain ensemble in
    fp32, and the TFT in fp16 with every block checkpointed (the lightest TFT the seed's plan named)."""
    members = {"plain": ensemble_members(preset),
               "light": ensemble_members(preset, {"checkpointing": "all"}, tft_precision="fp16")}
    return {configuration_name(v, preset): v for v in members.values()}


def table_for_measurement(m: Measurement, min_headroom_bytes: float,
                          extra: Mapping[str, Mapping[str, tuple[Any, str]]] | None = None,
                          cards: Sequence[Card] = CARDS, seed: int = 0) -> CardTable:
    """The card table of a wave 8.13 measurement: its configuration measured (on the card it emulated)
    and predicted (everywhere), and each `extra` configuration ({name: ensemble_members(...)})
    predicted, all with the context, workspace and allocator cache 8.13 measured."""
    members = measured_members(m)
    preset = next(iter(m.models.values()))["preset"]
    name = configuration_name(members, preset)
    over = measured_overheads(m)
    kw = dict(context_bytes=over.context_bytes, workspace_bytes=over.workspace_bytes,
              training_cache_bytes=over.training_cache_bytes, serving_cache_bytes=over.serving_cache_bytes,
              seed=seed, note=over.note)
    measured = measured_footprint(name, m)
    own = predict_configuration(name, members, **kw)
    margins, source = prediction_margins(measured, own)
    kw["note"] = f"{over.note}; a card is decided with {source} added"
    footprints = [f for f in [measured] if f is not None]
    footprints.append(dataclasses.replace(own, training_margin=margins[0], serving_margin=margins[1], note=kw["note"]))
    for extra_name, extra_members in (extra or {}).items():
        if extra_name != name:
            footprints.append(predict_configuration(extra_name, extra_members, **kw, margins=margins))
    return fits(footprints, min_headroom_bytes, cards)


def report_section(m: Measurement, budgets: dict[str, dict[str, float]]) -> tuple[pd.DataFrame, str]:
    """Wave 8.13's report section "which card fits": the card table of the measurement (its configuration
    measured on the card it emulated, predicted on the others; the alternatives predicted), judged with
    budgets.toml's [ensemble] min_headroom_mb, as (card_frame, notes_text): formatted after the decisions."""
    preset = next(iter(m.models.values()))["preset"]
    table = table_for_measurement(m, budgets["ensemble"]["min_headroom_mb"] * MB, extra=alternatives(preset))
    return card_frame(table), notes_text(table)
