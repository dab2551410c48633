"""The four models of the ensemble, each exposed as a model card (see card.py)."""
from __future__ import annotations

from foxlib.models.card import ModelCard


class _Registry(dict):
    """A dict of model cards whose unknown keys raise a ValueError naming the valid ones."""

    def __missing__(self, key):
        raise ValueError(f"unknown model {key!r}; valid models: {', '.join(sorted(self))}")


def _load() -> "_Registry":
    registry = _Registry()
    from foxlib.models import tft
    registry["tft"] = tft.CARD
    for name in ("dqn", "ppo", "mamba2"):
        try:
            module = __import__(f"foxlib.models.{name}", fromlist=["CARD"])
        except ModuleNotFoundError as exc:  # a model not written yet
            if exc.name != f"foxlib.models.{name}":
                raise
            continue
        registry[name] = module.CARD
    return registry


MODELS = _load()

__all__ = ["MODELS", "ModelCard"]
