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

    def explore_config(self, preset: str, batch_size: int = 0, checkpointing: str = "none",
                       memory_efficient: bool = False):
        """The explore notebook's choices as a config: batch_size 0 keeps the preset's; checkpointing "none" or
        the model's own (a TFT granularity; "blocks" where the field is a switch, Mamba-2's); memory_efficient
        where the model has it. A choice the model lacks is a ValueError, never silently dropped."""
        base = self.preset(preset)
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
        overrides: dict[str, Any] = {"batch_size": batch_size} if batch_size else {}
        if checkpointing != "none" and "checkpointing" not in fields:
            raise ValueError(f"{self.name} has no checkpointing; use checkpointing=none")
        if "checkpointing" in fields and isinstance(fields["checkpointing"], bool):
            if checkpointing not in ("none", "blocks"):
                raise ValueError(f"{self.name} checkpoints whole blocks or nothing: checkpointing=none or blocks, "
                                 f"got {checkpointing!r}")
            overrides["checkpointing"] = checkpointing == "blocks"
        elif "checkpointing" in fields:
            overrides["checkpointing"] = checkpointing
        if memory_efficient and "memory_efficient" not in fields:
            raise ValueError(f"{self.name} has no memory-efficient path; use memory_efficient=False")
        if "memory_efficient" in fields:
            overrides["memory_efficient"] = memory_efficient
        return self.config(preset, **overrides)


def seeded(build: Callable[[Any], torch.nn.Module], cfg: Any, seed: int, device: torch.device) -> torch.nn.Module:
    """build(cfg) under torch.manual_seed(seed), on `device`, leaving the caller's CPU random state as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(cfg).to(device)
