"""The "which card fits" table itself: the cards (real GeForce sizes), a configuration's figures on
them (`Footprint`, measured or predicted: cards.py makes them), and the decision per card and phase
(`fits`), formatted only afterwards (`cell_text`, `card_frame`).

A card trains a configuration when its training figure is at most the card's memory, and serves
it when its serving figure leaves at least budgets.toml's [ensemble] min_headroom_mb free: the two
checks of wave 8.13, with the same limits. Decisions are on bytes; `card_frame` only formats.

Cards are sold in GB that are GiB: a "4 GB" card holds 4 × 2^30 = 4,294,967,296 bytes
(budgets.toml's card_mb). bf16 autocast needs the bf16 card class (foxlib.core.card_classes: compute
capability 8.0, Ampere, or newer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import pandas as pd

from foxlib.core.card_classes import class_of
from foxlib.core.config import MB

GIB = 2**30
SOURCES = ("predicted", "measured")


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
        """Whether its card class (foxlib.core.card_classes, by compute capability) runs bf16."""
        return class_of(self.compute_capability).allows("bf16")

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
        """The three fields account.py's account_training reads from a step profile."""
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
    training_margin: float = 0.0
    """predicted: how far the training figure may be off (cards.prediction_margins: the prediction's error this run
    measured in training, else the predictor's stated peak tolerance); a card fits only with it added. 0 when
    measured."""
    serving_margin: float = 0.0
    """The same for the serving figure (the error this run measured in serving)."""

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
    training_margin: float = 0.0
    """The footprint's margins (Footprint.training_margin, serving_margin), added before deciding."""
    serving_margin: float = 0.0


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


def _judge(card: Card, fp: Footprint, headroom: int) -> CardCell:
    limit = card.memory_bytes - headroom
    # a prediction decides with its error added, each phase's own
    training, serving = int(fp.training_bytes * (1 + fp.training_margin)), int(fp.serving_bytes * (1 + fp.serving_margin))
    trains = fp.training_ran and training <= card.memory_bytes
    serves = fp.serving_ran and serving <= limit
    reasons = []
    if "bf16" in fp.precisions and not card.bf16:
        trains = serves = False
        reasons.append(f"bf16 needs compute capability 8.0 or newer; this card has {card.compute_capability}")
    if not fp.training_ran:
        reasons.append("training ran out of memory under the cap")
    if not fp.serving_ran:
        reasons.append("serving ran out of memory under the cap")
    return CardCell(card, fp.configuration, fp.source, fp.training_bytes, fp.serving_bytes, trains, serves,
                    card.memory_bytes - training, card.memory_bytes - serving, limit, "; ".join(reasons),
                    fp.training_margin, fp.serving_margin)


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


def _pct(fraction: float) -> str:
    """A margin in %, two decimals below 1 % (a measured error), else as few as it needs (10 %)."""
    return f"{100 * fraction:.2f}" if fraction < 0.01 else f"{100 * fraction:.3g}"


def cell_text(cell: CardCell | None, phase: str, headroom_bytes: int) -> str:
    """A cell as the table shows it: "yes: 1,923.1 of 4,295.0 MB, 2,371.9 MB free (measured)"."""
    if cell is None:
        return "— (no figure)"
    card = cell.card.memory_bytes
    error = cell.training_margin if phase == "trains" else cell.serving_margin
    grow = 1 + error
    if phase == "trains":
        ok, used, free = cell.trains, cell.training_bytes, cell.training_free_bytes
        margin = f"{_mb(free)} MB free" if free >= 0 else f"{_mb(-free)} MB short"
    else:
        ok, used, free = cell.serves, cell.serving_bytes, cell.serving_free_bytes
        left = cell.serving_limit_bytes - int(used * grow)
        margin = (f"{_mb(free)} MB free" if left >= 0 else
                  f"{_mb(free)} MB free, {_mb(-left)} MB under the {_mb(headroom_bytes)} MB headroom")
    shown = (f"{_mb(used)} MB + {_pct(error)} % for the prediction's error = {_mb(int(used * grow))}"
             if error else _mb(used))
    text = f"{'yes' if ok else 'no'}: {shown} of {_mb(card)} MB, {margin} ({cell.source})"
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


def notes_text(table: CardTable) -> str:
    """Where the figures come from, for under the table: a Markdown list item per source and note, naming
    the configurations it holds for ("every configuration" when all share it)."""
    groups: dict[str, list[str]] = {}
    for note in table.notes:  # "<configuration>, <source>: <note>", as fits() makes them
        conf = next((c for c in table.configurations if note.startswith(f"{c}, ")), None)
        rest = note[len(conf) + 2:] if conf else note
        groups.setdefault(rest, []).append(conf or "")
    lines = []
    for rest, confs in groups.items():
        source, _, text = rest.partition(": ")
        which = ("every configuration" if len(confs) == len(table.configurations) > 1 else
                 "; ".join(c for c in confs if c))
        lines.append(f"- {source}" + (f" ({which})" if which else "") + f": {text}")
    return "\n".join(lines)
