"""Which card fits: does the ensemble train and serve on real 4-24 GB cards, per configuration.

A card trains a configuration when its training figure is at most the card's memory, and serves it when its
serving figure leaves budgets.toml's [ensemble] min_headroom_mb free (8.13's two checks), decided on bytes
(`fits`), formatted afterwards. Each figure (`Footprint`) is "measured" (8.13's own, for the one card it
emulated under a real cap on a GPU) or "predicted" (predict_step per model, accounted as 8.13 accounts the CPU
run, plus 8.13's measured workspace per stream and CUDA context). A "4 GB" card holds 4 × 2^30 bytes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from foxlib.core.card_classes import nearest_class
from foxlib.core.config import MB
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.tolerances import PEAK_TOLERANCE_PCT
from foxlib.models import ENSEMBLE, MODELS
from foxlib.waves.wave_8_13 import analysis
from foxlib.waves.wave_8_13.analysis import mb
from foxlib.waves.wave_8_13.cap import GIB, account_training
from foxlib.waves.wave_8_13.records import Measurement

SOURCES = ("predicted", "measured")
STATED_MARGINS = (PEAK_TOLERANCE_PCT / 100,) * 2
MODEL_NAMES = {"dqn": "DQN", "ppo": "PPO", "mamba2": "Mamba-2", "tft": "TFT"}


@dataclass(frozen=True)
class Card:
    """A graphics card as sold: its name, memory in (GiB-valued) GB and CUDA compute capability."""
    name: str
    memory_gb: int
    compute_capability: str

    @property
    def memory_bytes(self) -> int:
        return self.memory_gb * GIB

    @property
    def bf16(self) -> bool:
        return nearest_class(self.compute_capability).allows("bf16")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.memory_gb} GB)"


# NVIDIA GeForce cards, one per memory size; memory and compute capability from NVIDIA's
# product pages and its CUDA GPU list (Turing 7.5, Ampere 8.6, Ada Lovelace 8.9).
CARDS: tuple[Card, ...] = (
    Card("GeForce GTX 1650", 4, "7.5"),
    Card("GeForce RTX 2060", 6, "7.5"),
    Card("GeForce RTX 3070", 8, "8.6"),
    Card("GeForce RTX 3060", 12, "8.6"),
    Card("GeForce RTX 4080", 16, "8.9"),
    Card("GeForce RTX 4090", 24, "8.9"),
)


@dataclass(frozen=True)
class ModelFigures:
    """One model of the ensemble in one configuration (bytes): its step's model peak, what it keeps between steps
    once stepped (Adam's state included), that state, and serving (weights + input + the forward's peak)."""
    model: str
    precision: str
    step_peak_bytes: int
    kept_bytes: int
    optimizer_state_bytes: int
    serve_bytes: int


@dataclass(frozen=True)
class Footprint:
    """What one configuration of the ensemble needs on a card, from one source (bytes, process figures)."""
    configuration: str
    source: str
    training_bytes: int
    serving_bytes: int
    precisions: tuple[str, ...] = ("fp32",)
    card_bytes: int | None = None
    """measured: the card 8.13 emulated under the cap; predicted: None (any card)."""
    training_ran: bool = True
    serving_ran: bool = True
    note: str = ""
    training_margin: float = 0.0
    """predicted: how far the figure may be off (prediction_margins); a card fits only with it added."""
    serving_margin: float = 0.0

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}; valid: {', '.join(SOURCES)}")
        if self.source == "measured" and self.card_bytes is None:
            raise ValueError(f"measured footprint {self.configuration!r} must name the card it was measured "
                             "under (card_bytes)")


@dataclass(frozen=True)
class CardCell:
    """One card and one configuration's footprint judged on it: does it train, does it serve, by how much."""
    card: Card
    footprint: Footprint
    trains: bool
    serves: bool
    training_free_bytes: int
    """card − figure with its margin (negative: short by that much); serving's likewise."""
    serving_free_bytes: int
    serving_limit_bytes: int
    """card − the headroom asked."""
    reason: str = ""


@dataclass(frozen=True)
class CardTable:
    cards: tuple[Card, ...]
    configurations: tuple[str, ...]
    cells: tuple[CardCell, ...]
    min_headroom_bytes: int
    notes: tuple[tuple[str, str, str], ...] = ()
    """(configuration, source, note) per footprint with a note."""

    def cell(self, configuration: str, memory_gb: int) -> CardCell | None:
        """The cell of a configuration on the card of `memory_gb` GB; None where no figure covers it."""
        if configuration not in self.configurations:
            raise ValueError(f"unknown configuration {configuration!r}; known: {', '.join(self.configurations)}")
        sizes = [c.memory_gb for c in self.cards]
        if memory_gb not in sizes:
            raise ValueError(f"no {memory_gb} GB card in the table; cards: {', '.join(f'{s} GB' for s in sizes)}")
        return next((c for c in self.cells
                     if c.footprint.configuration == configuration and c.card.memory_gb == memory_gb), None)


def _judge(card: Card, fp: Footprint, headroom: int) -> CardCell:
    limit = card.memory_bytes - headroom
    # a prediction decides with its error added, each phase's own
    training = int(fp.training_bytes * (1 + fp.training_margin))
    serving = int(fp.serving_bytes * (1 + fp.serving_margin))
    trains = fp.training_ran and training <= card.memory_bytes
    serves = fp.serving_ran and serving <= limit
    reasons = []
    if "bf16" in fp.precisions and not card.bf16:
        trains = serves = False
        reasons.append(f"bf16 needs compute capability 8.0 or newer; this card has {card.compute_capability}")
    reasons += [f"{phase} ran out of memory under the cap"
                for phase, ran in (("training", fp.training_ran), ("serving", fp.serving_ran)) if not ran]
    return CardCell(card, fp, trains, serves, card.memory_bytes - training, card.memory_bytes - serving, limit,
                    "; ".join(reasons))


def fits(footprints: Iterable[Footprint], min_headroom_bytes: float, cards: Sequence[Card] = CARDS) -> CardTable:
    """Every configuration on every card: the measured footprint on the card it was measured under,
    the predicted one elsewhere; no cell where neither covers a card."""
    if min_headroom_bytes < 0:
        raise ValueError(f"min_headroom_bytes must not be negative, got {min_headroom_bytes}")
    headroom = int(round(min_headroom_bytes))
    footprints = list(footprints)
    configurations = tuple(dict.fromkeys(f.configuration for f in footprints))
    cells = []
    for conf in configurations:
        mine = [f for f in footprints if f.configuration == conf]
        predicted = [f for f in mine if f.source == "predicted"]
        if len(predicted) > 1:
            raise ValueError(f"configuration {conf!r} has {len(predicted)} predicted footprints; give one")
        for card in cards:
            measured = [f for f in mine if f.source == "measured" and f.card_bytes == card.memory_bytes]
            if len(measured) > 1:
                raise ValueError(f"configuration {conf!r} has {len(measured)} measurements for {card.label}; give one")
            if measured or predicted:  # the measured footprint first
                cells.append(_judge(card, (measured + predicted)[0], headroom))
    notes = tuple((f.configuration, f.source, f.note) for f in footprints if f.note)
    return CardTable(tuple(cards), configurations, tuple(cells), headroom, notes)


# ----------------------------------------------------------------------------- predicted figures

def accounted_training_bytes(models: Sequence[ModelFigures], steps: int = 2) -> int:
    """The interleaved run's largest live total (models only), accounted as wave 8.13 accounts it. Two
    rounds reach the steady state (every model has stepped and holds its Adam state)."""
    if not models:
        raise ValueError("a configuration needs at least one model")
    profiles = {m.model: {"peak": m.step_peak_bytes, "live_before_step": m.kept_bytes,
                          "optimizer_state": m.optimizer_state_bytes} for m in models}
    plan = account_training(profiles, [m.model for m in models], steps, cap=2**62)
    return max([plan["setup_bytes"]] + [s["peak_bytes"] for s in plan["steps"]])


def predicted_footprint(configuration: str, models: Sequence[ModelFigures], *, context_bytes: int,
                        workspace_bytes: int, streams: int | None = None, training_cache_bytes: int = 0,
                        serving_cache_bytes: int = 0, note: str = "",
                        margins: tuple[float, float] = STATED_MARGINS) -> Footprint:
    """training = the accounted models' peak + one workspace (the default stream) + the context; serving =
    every model's serve figure + a workspace per stream (default: the default one + one per model, as 8.13
    serves) + the context. The *_cache_bytes add the allocator's reserved − allocated, which no prediction sees."""
    if min(context_bytes, workspace_bytes, training_cache_bytes, serving_cache_bytes) < 0:
        raise ValueError(f"context, workspace and cache bytes must not be negative, got {context_bytes}, "
                         f"{workspace_bytes}, {training_cache_bytes}, {serving_cache_bytes}")
    streams = len(models) + 1 if streams is None else streams
    training = accounted_training_bytes(models) + workspace_bytes + training_cache_bytes + context_bytes
    serving = sum(m.serve_bytes for m in models) + streams * workspace_bytes + serving_cache_bytes + context_bytes
    return Footprint(configuration, "predicted", int(training), int(serving),
                     tuple(sorted({m.precision for m in models})), note=note,
                     training_margin=margins[0], serving_margin=margins[1])


def prediction_margins(measured: Footprint | None, predicted: Footprint) -> tuple[tuple[float, float], str]:
    """The margins (training, serving) a predicted footprint decides with, and where they come from: each phase's
    measured error, |measured − predicted| / predicted, where a complete run on a card measured it; else the
    predictor's stated peak tolerance (foxlib.memory.tolerances.PEAK_TOLERANCE_PCT)."""
    if measured is None or not (measured.training_ran and measured.serving_ran):
        return STATED_MARGINS, (f"the predictor's stated peak tolerance, {PEAK_TOLERANCE_PCT:g} % (no "
                                "complete run on a card here measured its error)")
    training = (measured.training_bytes - predicted.training_bytes) / predicted.training_bytes
    serving = (measured.serving_bytes - predicted.serving_bytes) / predicted.serving_bytes
    return (abs(training), abs(serving)), (
        f"the prediction's measured errors, training {100 * training:+.2f} %, serving {100 * serving:+.2f} % "
        "(measured against predicted: this run's configuration on the card it emulated), each for its phase")


def model_figures(model: str, precision: str, profile: MemoryProfile) -> ModelFigures:
    """ModelFigures from one training step's MemoryProfile (predict_step's). Serving is weights + the batch less
    its device buffers (the RL models' replay and rollout buffers, which inference does not need) + the training
    forward's increment, which holds what autograd saves for backward: an upper bound of a no-grad forward."""
    live = int(profile.live_before_step)
    forward = max(0, int(profile.forward_peak) - live)
    serve = int(profile.parameters) + max(0, int(profile.batch) - profile.device_buffers) + forward
    return ModelFigures(model, precision, int(profile.peak), live, int(profile.optimizer_state), serve)


def ensemble_members(preset: str = "seed", tft_overrides: Mapping[str, Any] | None = None,
                     tft_precision: str = "fp32") -> dict[str, tuple[Any, str]]:
    """{model: (config, precision)} as wave 8.13 builds the ensemble: every model of the preset in fp32, the TFT
    with `tft_overrides` in `tft_precision`."""
    return {name: (MODELS[name].config(preset, **dict(tft_overrides or {})), tft_precision) if name == "tft" else
            (MODELS[name].preset(preset), "fp32") for name in ENSEMBLE if name in MODELS}


def measured_members(m: Measurement) -> dict[str, tuple[Any, str]]:
    """{model: (config, precision)} of the ensemble a wave 8.13 measurement ran (JSON lists back to tuples)."""
    out = {}
    for name in m.order:
        info = m.models[name]
        base = MODELS[name].preset(info.preset)
        values = {k: (tuple(v) if isinstance(v, list) and isinstance(getattr(base, k, None), tuple) else v)
                  for k, v in info.config.items()}
        out[name] = (MODELS[name].config(info.preset, **values), info.precision)
    return out


def predict_configuration(configuration: str, members: Mapping[str, tuple[Any, str]], **footprint: Any) -> Footprint:
    """Every model's CUDA training step predicted (predict_step, target "cuda": multi-tensor Adam; seconds to a
    minute per model on a CPU, no model memory allocated), summed into a predicted_footprint."""
    from foxlib.memory.predict import predict_step
    figures = [model_figures(name, precision, predict_step(MODELS[name], cfg, precision=precision, target="cuda"))
               for name, (cfg, precision) in members.items()]
    return predicted_footprint(configuration, figures, **footprint)


# ----------------------------------------------------------------------------- wave 8.13's measurement

@dataclass(frozen=True)
class Overheads:
    """What a GPU process holds beyond the models' tensors, as wave 8.13 measured it (bytes): the context, the
    cuBLAS workspace per stream, and per phase the allocator's reserved − allocated at the peak."""
    context_bytes: int
    workspace_bytes: int
    training_cache_bytes: int
    serving_cache_bytes: int
    device: str

    @property
    def note(self) -> str:
        if not (self.context_bytes or self.workspace_bytes):
            return (f"no CUDA context, workspace or allocator cache was measured on {self.device}: the predicted "
                    "figures hold the models' tensors only; a GPU adds its context (hundreds of MB)")
        return (f"CUDA context {mb(self.context_bytes)} MB, cuBLAS workspace {mb(self.workspace_bytes)} MB "
                f"per stream and the allocator's cache (training {mb(self.training_cache_bytes)} MB, serving "
                f"{mb(self.serving_cache_bytes)} MB) as wave 8.13 measured them on {self.device}; another "
                "card's driver and context differ")


def measured_overheads(m: Measurement) -> Overheads:
    """The context (the larger of the two phases'), workspace and allocator cache of a measurement; 0 on the CPU."""
    device = m.device.name
    if not m.cap.enforced:
        return Overheads(0, 0, 0, 0, device)
    cache = [max(0, p.peak_bytes - p.peak_allocated_bytes) for p in (m.training, m.inference)]
    return Overheads(analysis.largest_context_bytes(m), analysis.workspace_bytes(m), *cache, device)


def measured_footprint(configuration: str, m: Measurement) -> Footprint | None:
    """8.13's own figures for the card it emulated; None where it emulated none (a CPU run, a cap_bytes override)."""
    if not m.cap.enforced or m.cap.override:
        return None
    precisions = tuple(sorted({info.precision for info in m.models.values()}))
    return Footprint(configuration, "measured", int(analysis.figure(m, "training")),
                     int(analysis.figure(m, "inference")), precisions, card_bytes=int(m.cap.card_bytes),
                     training_ran=not m.training.oom, serving_ran=not m.inference.oom,
                     note=f"wave 8.13 on {m.device.name}, {analysis.how(m)}")


def configuration_name(members: Mapping[str, tuple[Any, str]], preset: str = "seed") -> str:
    """A configuration in words: each model's precision and the fields that differ from the preset."""
    parts = []
    for name, (cfg, precision) in members.items():
        base = MODELS[name].preset(preset)
        changed = [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
                   if getattr(cfg, f.name) != getattr(base, f.name)]
        parts.append(f"{MODEL_NAMES.get(name, name)} {precision}" + (f" ({', '.join(changed)})" if changed else ""))
    return f"{preset}: " + ", ".join(parts)


def alternatives(preset: str = "seed") -> dict[str, dict[str, tuple[Any, str]]]:
    """Predicted beside the configuration 8.13 measured: the plain fp32 ensemble, and the TFT in fp16 with
    every block checkpointed (the lightest TFT the seed's plan named)."""
    members = (ensemble_members(preset), ensemble_members(preset, {"checkpointing": "all"}, tft_precision="fp16"))
    return {configuration_name(v, preset): v for v in members}


def table_for_measurement(m: Measurement, min_headroom_bytes: float,
                          extra: Mapping[str, Mapping[str, tuple[Any, str]]]) -> CardTable:
    """The card table of a measurement: its configuration measured (on the card it emulated) and predicted, each
    `extra` configuration ({name: ensemble_members(...)}) predicted, all with the overheads 8.13 measured."""
    members = measured_members(m)
    name = configuration_name(members, next(iter(m.models.values())).preset)
    over = measured_overheads(m)
    kw = {k: v for k, v in dataclasses.asdict(over).items() if k != "device"} | {"note": over.note}
    measured = measured_footprint(name, m)
    own = predict_configuration(name, members, **kw)
    margins, source = prediction_margins(measured, own)
    kw["note"] = f"{over.note}; a card is decided with {source} added"
    footprints = [f for f in [measured] if f is not None]
    footprints.append(dataclasses.replace(own, training_margin=margins[0], serving_margin=margins[1], note=kw["note"]))
    footprints += [predict_configuration(extra_name, extra_members, **kw, margins=margins)
                   for extra_name, extra_members in extra.items() if extra_name != name]
    return fits(footprints, min_headroom_bytes)


# ----------------------------------------------------------------------------- formatted, after the decisions

def _pct(fraction: float) -> str:
    """A margin in %, two decimals below 1 % (a measured error), else as few as it needs (10 %)."""
    return f"{100 * fraction:.2f}" if fraction < 0.01 else f"{100 * fraction:.3g}"


def cell_text(cell: CardCell | None, phase: str, headroom_bytes: int) -> str:
    """A cell as the table shows it: "yes: 1,923.1 of 4,295.0 MB, 2,371.9 MB free (measured)"."""
    if cell is None:
        return "— (no figure)"
    fp = cell.footprint
    if phase == "trains":
        ok, used, free, error = cell.trains, fp.training_bytes, cell.training_free_bytes, fp.training_margin
        margin = f"{mb(free)} MB free" if free >= 0 else f"{mb(-free)} MB short"
    else:
        ok, used, free, error = cell.serves, fp.serving_bytes, cell.serving_free_bytes, fp.serving_margin
        left = cell.serving_limit_bytes - int(used * (1 + error))
        margin = (f"{mb(free)} MB free" if left >= 0 else
                  f"{mb(free)} MB free, {mb(-left)} MB under the {mb(headroom_bytes)} MB headroom")
    shown = (f"{mb(used)} MB + {_pct(error)} % for the prediction's error = {mb(int(used * (1 + error)))}"
             if error else mb(used))
    text = f"{'yes' if ok else 'no'}: {shown} of {mb(cell.card.memory_bytes)} MB, {margin} ({fp.source})"
    return text + (f"; {cell.reason}" if cell.reason else "")


def card_frame(table: CardTable) -> pd.DataFrame:
    """A row per configuration and phase (trains, serves), a column per card."""
    return pd.DataFrame([{"configuration": conf,
                          "phase": "trains (interleaved)" if phase == "trains" else
                                   f"serves (all at once, ≥ {mb(table.min_headroom_bytes)} MB free)",
                          **{card.label: cell_text(table.cell(conf, card.memory_gb), phase, table.min_headroom_bytes)
                             for card in table.cards}}
                         for conf in table.configurations for phase in ("trains", "serves")])


def notes_text(table: CardTable) -> str:
    """A Markdown list item per source and note, naming the configurations it holds for ("every
    configuration" when all share it)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for conf, source, note in table.notes:
        groups.setdefault((source, note), []).append(conf)
    lines = []
    for (source, text), confs in groups.items():
        which = "every configuration" if len(confs) == len(table.configurations) > 1 else "; ".join(confs)
        lines.append(f"- {source}" + (f" ({which})" if which else "") + f": {text}")
    return "\n".join(lines)


def report_section(m: Measurement, budgets: dict[str, dict[str, float]]) -> tuple[pd.DataFrame, str]:
    """The report's "which card fits": the measurement's card table with the alternatives, judged with
    budgets.toml's [ensemble] min_headroom_mb, as (card_frame, notes_text)."""
    preset = next(iter(m.models.values())).preset
    table = table_for_measurement(m, budgets["ensemble"]["min_headroom_mb"] * MB, extra=alternatives(preset))
    return card_frame(table), notes_text(table)
