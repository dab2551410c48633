"""The ensemble's models as the run holds them (`_Member`): each loaded from its recipe
(foxlib.harness.recipe: model, batch, Adam, training step), stepped with its gradients freed
afterwards, its exact bytes (weights, Adam state, batch on the device and in host RAM), and freed."""
from __future__ import annotations

import dataclasses
import gc
from typing import Any, Callable

import torch

from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.memory import accounting
from foxlib.models import MODELS


@dataclasses.dataclass
class _Member:
    name: str
    cfg: Any
    precision: str
    model: torch.nn.Module | None = None
    batch: Any = None
    optimizer: torch.optim.Optimizer | None = None
    step: Callable[[], torch.Tensor] | None = None
    """The recipe's training step (foxlib.harness.recipe; fp16 through its GradScaler); returns the loss."""

    @property
    def card(self):
        return MODELS[self.name]


def _load(member: _Member, device: torch.device, seed: int) -> None:
    """The member's model, batch, Adam (at the card's learning rate) and step, from foxlib.harness.recipe."""
    built = build_step(StepRecipe(member.name, member.cfg, member.precision, seed), device)
    member.model, member.batch, member.optimizer, member.step = built.model, built.batch, built.optimizer, built.step


def _step(member: _Member, device: torch.device) -> float:
    """One training step of the recipe (forward + loss, backward, Adam); gradients freed afterwards,
    because the other models step before this one steps again."""
    member.model.train()
    loss = member.step()
    member.optimizer.zero_grad(set_to_none=True)
    return float(loss.float())


def _device_bytes(obj: Any, device: torch.device) -> int:
    return accounting.unique_bytes(t for t in accounting.iter_tensors(obj) if t.device.type == device.type)


def _host_bytes(obj: Any, device: torch.device) -> int:
    """Host RAM of a batch: numpy arrays (e.g. DQN's replay buffer), and CPU tensors when training on a GPU."""
    arrays = {id(a.base if a.base is not None else a): (a.base if a.base is not None else a)
              for a in accounting.iter_arrays(obj)}
    cpu = accounting.unique_bytes(t for t in accounting.iter_tensors(obj) if t.device.type == "cpu") \
        if device.type != "cpu" else 0
    return sum(a.nbytes for a in arrays.values()) + cpu


def _static(members: list[_Member], device: torch.device) -> dict[str, dict[str, int]]:
    """Per loaded model: weights, Adam state, its batch/buffers on the device and in host RAM (exact)."""
    return {m.name: {"parameters_bytes": accounting.parameter_bytes(m.model),
                     "optimizer_state_bytes": accounting.optimizer_state_bytes(m.optimizer) if m.optimizer else 0,
                     "batch_device_bytes": _device_bytes(m.batch, device),
                     "batch_host_bytes": _host_bytes(m.batch, device)}
            for m in members if m.model is not None}


def _free(members: list[_Member], device: torch.device, keep_models: bool = False) -> None:
    for m in members:
        if m.model is not None:
            m.model.zero_grad(set_to_none=True)
        m.batch = m.optimizer = m.step = None
        if not keep_models:
            m.model = None
    if device.type == "cuda":  # on the CPU reference counting frees the tensors; a full collection is slow
        gc.collect()
        torch.cuda.empty_cache()
