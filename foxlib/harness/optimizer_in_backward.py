"""Adam applied during the backward pass, one parameter at a time, so that all the gradients never
exist at once.

Each parameter gets its own Adam; a hook that runs once the parameter's gradient is accumulated
(`Tensor.register_post_accumulate_grad_hook`) steps that Adam and frees the gradient. The step's
floor of persistent bytes falls from 16 per fp32 parameter (weight 4, gradient 4, Adam's two
moments 8) to 12 plus the largest gradients alive together. A global operation over all gradients
(clipping by their joint norm, a GradScaler's inf check) cannot run: `clip_each` clips each
parameter's gradient by its own norm instead, and fp16 (GradScaler) is refused.

The object quacks like the optimizer the step expects: `step()` and `zero_grad()` do nothing (the
hooks did the work), `state` and `param_groups` are those of the per-parameter Adams, so that the
profilers count its state and a CUDA graph checks `capturable`.
"""
from __future__ import annotations

from typing import Any, Iterable

import torch


class OptimizerInBackward:
    """Per-parameter Adam stepped from post-accumulate-grad hooks (see the module docstring)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], *, clip_each: float | None = None, **adam: Any):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no parameter requires a gradient")
        self.clip_each = clip_each
        self.optimizers = [torch.optim.Adam([p], **adam) for p in self.params]
        self._by_param = {id(p): o for p, o in zip(self.params, self.optimizers)}
        self._handles = [p.register_post_accumulate_grad_hook(self._apply) for p in self.params]

    def _apply(self, p: torch.Tensor) -> None:
        if self.clip_each is not None:
            torch.nn.utils.clip_grad_norm_([p], self.clip_each)
        self._by_param[id(p)].step()
        p.grad = None

    def step(self, closure=None) -> None:  # noqa: ARG002 - the hooks stepped every parameter already
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:  # noqa: ARG002 - the hooks freed every gradient
        for p in self.params:
            p.grad = None

    @property
    def state(self) -> dict[torch.Tensor, dict[str, Any]]:
        return {p: o.state[p] for p, o in zip(self.params, self.optimizers) if p in o.state}

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for o in self.optimizers for g in o.param_groups]

    def remove(self) -> None:
        """Take the hooks off the parameters (the model trains with another optimizer afterwards)."""
        for h in self._handles:
            h.remove()
        self._handles = []
