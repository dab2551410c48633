"""The four models of the ensemble, each exposed as a model card (see card.py): the Temporal Fusion
Transformer (tft, with tft_config and tft_blocks), DQN (dqn), PPO (ppo) and Mamba-2 (mamba2); MODELS by
name, ENSEMBLE in order.

Layer rule (core < data < memory < models < harness < waves < report < run; tests/test_layout.py
checks it): models import foxlib.core, data and memory; never the harness, a wave, report or run.
"""
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
