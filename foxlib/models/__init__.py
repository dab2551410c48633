"""The four models of the ensemble as model cards (card.py): the Temporal Fusion Transformer (tft, tft_config,
tft_blocks), DQN, PPO and Mamba-2; MODELS by name, ENSEMBLE in order. Imports foxlib.core, data and memory."""
from __future__ import annotations

from foxlib.models import dqn, mamba2, ppo, tft
from foxlib.models.card import ModelCard


class _Registry(dict):
    """A dict of model cards whose unknown keys raise a ValueError naming the valid ones."""

    def __missing__(self, key):
        raise ValueError(f"unknown model {key!r}; valid models: {', '.join(self)}")


ENSEMBLE = ("dqn", "ppo", "mamba2", "tft")  # the ensemble's members, in the order the waves list them
MODELS = _Registry((card.name, card) for card in (tft.CARD, dqn.CARD, ppo.CARD, mamba2.CARD))

__all__ = ["ENSEMBLE", "MODELS", "ModelCard"]
