"""The ensemble's models as the run holds them (`Member`): loaded from its recipe (foxlib.harness.recipe),
stepped with its gradients freed afterwards, its exact bytes counted, freed. In graph mode a member whose loss
copies nothing from the host replays one captured step; the others run eagerly, and `graph_note` says why."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from foxlib.harness.recipe import StepRecipe, build_step, capture_step
from foxlib.harness.step_options import StepOptions
from foxlib.memory import accounting
from foxlib.memory.profile import release_memory
from foxlib.models import MODELS
from foxlib.waves.wave_8_13.cap import is_oom, one_line

NOT_CAPTURABLE = {
    "dqn": "its loss samples each minibatch from the replay buffer on the host (numpy): a captured step "
           "would replay one minibatch",
    "ppo": "its loss picks each minibatch's rows on the host (numpy): a captured step would replay one minibatch",
}


def graph_loss(name: str, cfg: Any, device: torch.device):
    """The member's loss in a form a CUDA graph can capture (no host copy), or None."""
    if name == "tft":
        from foxlib.models.tft import device_loss
        return device_loss(cfg, device)
    if name == "mamba2":  # mean squared error on device tensors only
        return MODELS["mamba2"].loss
    return None


@dataclasses.dataclass
class Member:
    name: str
    cfg: Any
    precision: str
    model: torch.nn.Module | None = None
    batch: Any = None
    optimizer: torch.optim.Optimizer | None = None
    step: Callable[[], torch.Tensor] | None = None
    """The recipe's training step (fp16 through its GradScaler); returns the loss."""
    cuda_graph: bool = False
    """Graph mode asked: capture the training step (and the inference forward) where it can be."""
    options: StepOptions = StepOptions()
    graphed: bool = False
    graph_note: str | None = None
    """In graph mode: captured, or why the step runs eagerly."""
    inference_note: str | None = None
    """In graph mode: the inference forward captured, or why it runs eagerly (serve.py)."""

    @property
    def card(self):
        return MODELS[self.name]


def load_member(member: Member, device: torch.device, seed: int) -> None:
    """The member's model, batch, Adam (at the card's learning rate) and step; in graph mode on CUDA the
    step captured as one CUDA graph where it can be (else eager, and why)."""
    recipe = StepRecipe(member.name, member.cfg, member.precision, seed, member.options)
    member.graphed = False
    if member.cuda_graph and device.type == "cuda":
        loss = graph_loss(member.name, member.cfg, device)
        why = NOT_CAPTURABLE.get(member.name, "no capturable loss") if loss is None else None
        if loss is not None:
            try:
                built, graphed = capture_step(recipe, device, loss)
            except (RuntimeError, ValueError) as exc:
                if is_oom(exc):
                    raise
                why = f"capture failed: {type(exc).__name__}: {one_line(exc, 200)}"
                release_memory()
            else:
                member.model, member.batch, member.optimizer, member.step = (built.model, built.batch,
                                                                             built.optimizer, graphed)
                member.graphed, member.graph_note = True, "captured: each training step replays one CUDA graph"
                return
        member.graph_note = f"eager: {why}"
    built = build_step(recipe, device)
    member.model, member.batch, member.optimizer, member.step = built.model, built.batch, built.optimizer, built.step


def step_member(member: Member, device: torch.device) -> float:
    """One training step, gradients freed afterwards (the other models step in between); a captured step keeps
    them in the graph's pool."""
    member.model.train()
    loss = member.step()
    if not member.graphed:
        member.optimizer.zero_grad(set_to_none=True)
    return float(loss.float())


def _tensor_bytes(obj: Any, device_type: str) -> int:
    return accounting.unique_bytes(t for t in accounting.iter_tensors(obj) if t.device.type == device_type)


def static_footprints(members: list[Member], device: torch.device) -> dict[str, dict[str, int]]:
    """Per loaded model: weights, Adam state, its batch/buffers on the device and in host RAM (exact; host: numpy
    arrays, e.g. DQN's replay buffer, and CPU tensors when training on a GPU)."""
    return {m.name: {"parameters_bytes": accounting.parameter_bytes(m.model),
                     "optimizer_state_bytes": accounting.optimizer_state_bytes(m.optimizer) if m.optimizer else 0,
                     "batch_device_bytes": _tensor_bytes(m.batch, device.type),
                     "batch_host_bytes": accounting.array_bytes(m.batch)
                     + (_tensor_bytes(m.batch, "cpu") if device.type != "cpu" else 0)}
            for m in members if m.model is not None}


def free_members(members: list[Member], device: torch.device, keep_models: bool = False) -> None:
    for m in members:
        if m.model is not None:
            m.model.zero_grad(set_to_none=True)
        m.batch = m.optimizer = m.step = None
        m.graphed = False
        if not keep_models:
            m.model = None
    if device.type == "cuda":  # on the CPU reference counting frees the tensors; a full collection is slow
        release_memory()
