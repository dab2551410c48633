"""Which card fits: whether the ensemble trains and serves on real 4-24 GB cards, per configuration.

A configuration's figures on a card come from one of two sources, and every cell says which:
- "measured": wave 8.13's own figures (foxlib.waves.wave_8_13.training_figure / inference_figure:
  the process's peak against the cap, plus the CUDA context), for the one card 8.13 emulated
  under a real allocator cap on a GPU. A CPU run (nothing enforced) or a run with a cap_bytes
  override emulates no card and gives no measured cell.
- "predicted": each model's training step predicted without running it
  (foxlib.memory.predict.predict_step, for CUDA), the interleaved run accounted as 8.13 accounts
  it on the CPU (wave_8_13.account_training: the stepping model's peak plus what every other model
  keeps between its steps), plus the cuBLAS workspace once per CUDA stream and the CUDA context
  measured by 8.13. The context is that of the measuring GPU and driver: another card's differs.

A card trains a configuration when its training figure is at most the card's memory, and serves
it when its serving figure leaves at least budgets.toml's [ensemble] min_headroom_mb free: the two
checks of wave 8.13, with the same limits. Decisions are on bytes; `card_frame` only formats.

Cards are sold in GB that are GiB: a "4 GB" card holds 4 × 2^30 = 4,294,967,296 bytes
(budgets.toml's card_mb). bf16 autocast needs compute capability 8.0 (Ampere) or newer.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from foxlib.core.config import MB

GIB = 2**30
SOURCES = ("predicted", "measured")
BF16_MIN_CAPABILITY = (8, 0)


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
        major, minor = (int(x) for x in self.compute_capability.split("."))
        return (major, minor) >= BF16_MIN_CAPABILITY

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


# ----------------------------------------------------------------------------- the figures

@dataclass(frozen=True)
class ModelFigures:
    """One model of the ensemble in one configuration (bytes), measured or predicted."""
    model: str
    precision: str
    step_peak_bytes: int
    """Model peak of one training step: the largest total of its own live tensors."""
    kept_bytes: int
    """What it keeps between its steps once it has stepped: weights, device batch and buffers, Adam state."""
    optimizer_state_bytes: int
    """Adam's state, which exists only after the model's first step."""
    serve_bytes: int
    """Serving: weights + one inference input + the forward's own peak."""

    def as_step_profile(self) -> dict[str, int]:
        """The three fields wave_8_13.account_training reads from a step profile."""
        return {"peak": self.step_peak_bytes, "live_before_step": self.kept_bytes,
                "optimizer_state": self.optimizer_state_bytes}


@dataclass(frozen=True)
class Footprint:
    """What one configuration of the ensemble needs on a card, from one source (bytes, process figures)."""
    configuration: str
    source: str
    training_bytes: int
    """Training interleaved: models' peak as accounted + workspaces + CUDA context."""
    serving_bytes: int
    """All models served at once: their weights, inputs and forward peaks + workspaces + CUDA context."""
    precisions: tuple[str, ...] = ("fp32",)
    card_bytes: int | None = None
    """measured: the card 8.13 emulated under the cap; predicted: None (any card)."""
    training_ran: bool = True
    """measured: False when training ran out of memory (its figure is then where it stopped)."""
    serving_ran: bool = True
    note: str = ""

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}; valid: {', '.join(SOURCES)}")
        if self.source == "measured" and self.card_bytes is None:
            raise ValueError(f"measured footprint {self.configuration!r} must name the card it was measured "
                             "under (card_bytes)")


@dataclass(frozen=True)
class CardCell:
    """One card and one configuration: does it train, does it serve, by how much, from which source."""
    card: Card
    configuration: str
    source: str
    training_bytes: int
    serving_bytes: int
    trains: bool
    serves: bool
    training_free_bytes: int
    """card − training figure (negative: short by that much)."""
    serving_free_bytes: int
    """card − serving figure."""
    serving_limit_bytes: int
    """card − the headroom asked: the most serving may use."""
    reason: str = ""


@dataclass(frozen=True)
class CardTable:
    cards: tuple[Card, ...]
    configurations: tuple[str, ...]
    cells: tuple[CardCell, ...]
    min_headroom_bytes: int
    notes: tuple[str, ...] = ()
    """What each footprint says about how it was made ("<configuration>, <source>: <note>")."""

    def cell(self, configuration: str, memory_gb: int) -> CardCell | None:
        """The cell of a configuration on the card of `memory_gb` GB; None where no figure covers it."""
        if configuration not in self.configurations:
            raise ValueError(f"unknown configuration {configuration!r}; known: {', '.join(self.configurations)}")
        sizes = [c.memory_gb for c in self.cards]
        if memory_gb not in sizes:
            raise ValueError(f"no {memory_gb} GB card in the table; cards: {', '.join(f'{s} GB' for s in sizes)}")
        for c in self.cells:
            if c.configuration == configuration and c.card.memory_gb == memory_gb:
                return c
        return None


# ----------------------------------------------------------------------------- prediction

def accounted_training_bytes(models: Sequence[ModelFigures], steps: int = 2) -> int:
    """The interleaved run's largest live total (models only), accounted as wave 8.13 accounts it:
    loading every model, then each model's step peak beside what the others keep. Two rounds reach
    the steady state (every model has stepped and holds its Adam state)."""
    from foxlib.waves.wave_8_13 import account_training
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
                        serving_cache_bytes: int = 0, note: str = "") -> Footprint:
    """A configuration's predicted process figures: training = the accounted models' peak + one
    workspace (the step runs on the default stream) + the context; serving = every model's serve
    figure + a workspace per stream (`streams`, default serving_streams) + the context. The
    *_cache_bytes add what the caching allocator holds beyond live tensors (reserved − allocated
    at the peak), which no prediction of tensors sees; 0 unless given (measured_overheads)."""
    if min(context_bytes, workspace_bytes, training_cache_bytes, serving_cache_bytes) < 0:
        raise ValueError(f"context, workspace and cache bytes must not be negative, got {context_bytes}, "
                         f"{workspace_bytes}, {training_cache_bytes}, {serving_cache_bytes}")
    streams = serving_streams(len(models)) if streams is None else streams
    training = accounted_training_bytes(models) + workspace_bytes + training_cache_bytes + context_bytes
    serving = sum(m.serve_bytes for m in models) + streams * workspace_bytes + serving_cache_bytes + context_bytes
    return Footprint(configuration, "predicted", int(training), int(serving),
                     tuple(sorted({m.precision for m in models})), note=note)


def _get(profile: Any, name: str) -> Any:
    return profile[name] if isinstance(profile, Mapping) else getattr(profile, name)


def model_figures(model: str, precision: str, profile: Any) -> ModelFigures:
    """ModelFigures from a MemoryProfile (or its to_dict) of one training step.

    Serving is taken as weights + the batch less its device buffers (the RL models' replay and
    rollout buffers, which inference does not need) + the training forward's increment, which
    holds what autograd saves for backward: an upper bound of a no-grad forward."""
    buffers = _get(profile, "buffers") or {}
    device_buffers = sum(int(b.get("device_bytes", 0)) for b in buffers.values())
    live = int(_get(profile, "live_before_step"))
    forward = max(0, int(_get(profile, "forward_peak")) - live)
    serve = int(_get(profile, "parameters")) + max(0, int(_get(profile, "batch")) - device_buffers) + forward
    return ModelFigures(model, precision, int(_get(profile, "peak")), live,
                        int(_get(profile, "optimizer_state")), serve)


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


def measured_members(m: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """{model: (config, precision)} of the ensemble a wave 8.13 measurement ran (its "models")."""
    from foxlib.models import MODELS
    out = {}
    for name in m["order"]:
        info = m["models"][name]
        base = MODELS[name].preset(info["preset"])
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
        values = {k: (tuple(v) if isinstance(v, list) and isinstance(fields.get(k), tuple) else v)
                  for k, v in info["config"].items()}
        out[name] = (MODELS[name].config(info["preset"], **values), info["precision"])
    return out


def predict_configuration(configuration: str, members: Mapping[str, tuple[Any, str]], *, context_bytes: int,
                          workspace_bytes: int, training_cache_bytes: int = 0, serving_cache_bytes: int = 0,
                          seed: int = 0, note: str = "") -> Footprint:
    """Predict every model's CUDA training step (predict_step, target "cuda": multi-tensor Adam) and
    sum them into a predicted_footprint. Takes seconds to a minute per model on a CPU (the seed
    TFT is the slow one); allocates no model memory."""
    from foxlib.memory.predict import predict_step
    from foxlib.models import MODELS
    figures = [model_figures(name, precision,
                             predict_step(MODELS[name], cfg, precision=precision, seed=seed, target="cuda"))
               for name, (cfg, precision) in members.items()]
    return predicted_footprint(configuration, figures, context_bytes=context_bytes, workspace_bytes=workspace_bytes,
                               training_cache_bytes=training_cache_bytes, serving_cache_bytes=serving_cache_bytes,
                               note=note)


# ----------------------------------------------------------------------------- wave 8.13's measurement

@dataclass(frozen=True)
class Overheads:
    """What a GPU process holds beyond the models' tensors, as wave 8.13 measured it (bytes)."""
    context_bytes: int
    """The CUDA context: the larger of 8.13's two phases (wave_8_13.context_bytes)."""
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


def measured_overheads(m: Mapping[str, Any]) -> Overheads:
    """The context, workspace and allocator cache of a wave 8.13 measurement; all 0 on the CPU."""
    from foxlib.waves import wave_8_13 as wave
    device = m["device"]["name"]
    if not m["cap"].get("enforced"):
        return Overheads(0, 0, 0, 0, device)
    t, i = m["training"], m["inference"]

    def cache(phase: Mapping[str, Any]) -> int:
        if phase.get("peak_bytes") is None or phase.get("peak_allocated_bytes") is None:
            return 0
        return max(0, int(phase["peak_bytes"]) - int(phase["peak_allocated_bytes"]))
    context = max(wave.context_bytes(m, "training"), wave.context_bytes(m, "inference"))
    # the workspaces the warm-up left allocated (wave_8_13.workspace_bytes); a measurement made before
    # the warm-up existed names only the first product's workspace, with the context
    measured = wave.workspace_bytes(m)
    workspace = int(measured if measured is not None else (m.get("context") or {}).get("cublas_workspace_bytes") or 0)
    return Overheads(int(context), workspace, cache(t), cache(i), device)


def measured_footprint(configuration: str, m: Mapping[str, Any]) -> Footprint | None:
    """8.13's own figures for the card it emulated; None where it emulated none (a CPU run: not
    enforced; a cap_bytes override: a cap that is not a card)."""
    from foxlib.waves import wave_8_13 as wave
    cap = m["cap"]
    if not cap.get("enforced") or cap.get("override"):
        return None
    precisions = tuple(sorted({info["precision"] for info in m["models"].values()}))
    return Footprint(configuration, "measured", int(wave.training_figure(m)), int(wave.inference_figure(m)),
                     precisions, card_bytes=int(cap["card_bytes"]),
                     training_ran=not m["training"].get("oom"), serving_ran=not m["inference"].get("oom"),
                     note=f"wave 8.13 on {m['device']['name']}, {wave.how(m)}")


# ----------------------------------------------------------------------------- the table

def _judge(card: Card, fp: Footprint, headroom: int) -> CardCell:
    limit = card.memory_bytes - headroom
    trains = fp.training_ran and fp.training_bytes <= card.memory_bytes
    serves = fp.serving_ran and fp.serving_bytes <= limit
    reasons = []
    if "bf16" in fp.precisions and not card.bf16:
        trains = serves = False
        reasons.append(f"bf16 needs compute capability 8.0 or newer; this card has {card.compute_capability}")
    if not fp.training_ran:
        reasons.append("training ran out of memory under the cap")
    if not fp.serving_ran:
        reasons.append("serving ran out of memory under the cap")
    return CardCell(card, fp.configuration, fp.source, fp.training_bytes, fp.serving_bytes, trains, serves,
                    card.memory_bytes - fp.training_bytes, card.memory_bytes - fp.serving_bytes, limit,
                    "; ".join(reasons))


def fits(footprints: Iterable[Footprint], min_headroom_bytes: float, cards: Sequence[Card] = CARDS) -> CardTable:
    """Every configuration on every card: the measured footprint on the card it was measured under,
    the predicted one elsewhere; no cell where neither covers a card.

    min_headroom_bytes: budgets.toml's [ensemble] min_headroom_mb × MB."""
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
            chosen = measured[0] if measured else (predicted[0] if predicted else None)
            if chosen is not None:
                cells.append(_judge(card, chosen, headroom))
    notes = tuple(f"{f.configuration}, {f.source}: {f.note}" for f in footprints if f.note)
    return CardTable(tuple(cards), configurations, tuple(cells), headroom, notes)


def _mb(x: int) -> str:
    return f"{x / MB:,.1f}"


def cell_text(cell: CardCell | None, phase: str, headroom_bytes: int) -> str:
    """A cell as the table shows it: "yes: 1,923.1 of 4,295.0 MB, 2,371.9 MB free (measured)"."""
    if cell is None:
        return "— (no figure)"
    card = cell.card.memory_bytes
    if phase == "trains":
        ok, used, free = cell.trains, cell.training_bytes, cell.training_free_bytes
        margin = f"{_mb(free)} MB free" if free >= 0 else f"{_mb(-free)} MB short"
    else:
        ok, used, free = cell.serves, cell.serving_bytes, cell.serving_free_bytes
        left = cell.serving_limit_bytes - used
        margin = (f"{_mb(free)} MB free" if left >= 0 else
                  f"{_mb(free)} MB free, {_mb(-left)} MB under the {_mb(headroom_bytes)} MB headroom")
    text = f"{'yes' if ok else 'no'}: {_mb(used)} of {_mb(card)} MB, {margin} ({cell.source})"
    return text + (f"; {cell.reason}" if cell.reason else "")


def card_frame(table: CardTable) -> pd.DataFrame:
    """The table for a report: a row per configuration and phase (trains, serves), a column per card."""
    rows = []
    for conf in table.configurations:
        for phase in ("trains", "serves"):
            row = {"configuration": conf,
                   "phase": "trains (interleaved)" if phase == "trains" else
                            f"serves (all at once, ≥ {_mb(table.min_headroom_bytes)} MB free)"}
            for card in table.cards:
                row[card.label] = cell_text(table.cell(conf, card.memory_gb), phase, table.min_headroom_bytes)
            rows.append(row)
    return pd.DataFrame(rows)


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


def table_for_measurement(m: Mapping[str, Any], min_headroom_bytes: float,
                          extra: Mapping[str, Mapping[str, tuple[Any, str]]] | None = None,
                          cards: Sequence[Card] = CARDS, seed: int = 0) -> CardTable:
    """The card table of a wave 8.13 measurement: its configuration measured (on the card it emulated)
    and predicted (everywhere), and each `extra` configuration ({name: ensemble_members(...)})
    predicted, all with the context, workspace and allocator cache 8.13 measured."""
    members = measured_members(m)
    preset = next(iter(m["models"].values()))["preset"]
    name = configuration_name(members, preset)
    over = measured_overheads(m)
    kw = dict(context_bytes=over.context_bytes, workspace_bytes=over.workspace_bytes,
              training_cache_bytes=over.training_cache_bytes, serving_cache_bytes=over.serving_cache_bytes,
              seed=seed, note=over.note)
    footprints = [f for f in [measured_footprint(name, m)] if f is not None]
    footprints.append(predict_configuration(name, members, **kw))
    for extra_name, extra_members in (extra or {}).items():
        if extra_name != name:
            footprints.append(predict_configuration(extra_name, extra_members, **kw))
    return fits(footprints, min_headroom_bytes, cards)
