"""The model card: how every model of the ensemble is presented to the rest of foxlib (the profiler, the
waves and the reports talk to cards, never to a model class)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch


@dataclass(frozen=True)
class ModelCard:
    name: str
    """Registry key: "tft", "dqn", "ppo" or "mamba2"."""
    title: str
    """Human-readable name for reports."""
    presets: Mapping[str, Any]
    """Preset name -> config dataclass instance (at least "seed" and "small")."""
    build: Callable[[Any], torch.nn.Module]
    """config -> freshly initialised module (on the CPU; move it with .to(device))."""
    example_batch: Callable[..., Any]
    """(config, device="cpu", seed=0) -> one training batch drawn from the real market data."""
    loss: Callable[[torch.nn.Module, Any], torch.Tensor]
    """(model, batch) -> scalar loss; loss.backward() trains the model."""
    buffers: Callable[[Any], Mapping[str, Any]] = field(default=lambda batch: {})
    """batch -> named replay/rollout buffers (tensors or numpy arrays) to report on their own line."""

    def preset(self, name: str):
        """The preset config `name`; ValueError naming the valid presets otherwise."""
        if name not in self.presets:
            valid = ", ".join(sorted(self.presets))
            raise ValueError(f"unknown preset {name!r} for model {self.name!r}; valid presets: {valid}")
        return self.presets[name]

    def learning_rate(self, cfg: Any) -> float:
        """The config's `lr` (or `learning_rate`, the RL agents'): every training step's (foxlib.harness.recipe)."""
        for name in ("lr", "learning_rate"):
            if hasattr(cfg, name):
                return float(getattr(cfg, name))
        raise ValueError(f"the {self.name} config {type(cfg).__name__} names no learning rate (lr or learning_rate)")

    def config(self, preset: str, **overrides):
        """A preset with fields replaced; ValueError naming the valid fields for an unknown one."""
        cfg = self.preset(preset)
        names = {f.name for f in dataclasses.fields(cfg)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ValueError(f"unknown config field(s) {unknown} for model {self.name!r}; "
                             f"valid fields: {', '.join(sorted(names))}")
        return dataclasses.replace(cfg, **overrides)


def seeded(build: Callable[[Any], torch.nn.Module], cfg: Any, seed: int, device: torch.device) -> torch.nn.Module:
    """build(cfg) under torch.manual_seed(seed), on `device`, leaving the caller's CPU random state as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(cfg).to(device)
