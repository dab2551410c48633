"""The training step, written once: zero_grad, forward + loss under autocast, backward, optimizer step (fp16
through a GradScaler). Profiling, prediction, timing, CUDA-graph capture, the second opinion, training and the
models' own short runs (their `train`) all run this one `TrainingStep`, adding what they need in its hooks, so
they measure the same statements in the same order with the same lifetimes. Hooks, in order: `tracker` (a
context around forward + loss), `check` (a non-finite loss stops there: NonFiniteLossError naming the step, e.g.
"measured step"), `on_forward_end(loss)`, `clip` (the gradients' joint norm, unscaled first under fp16),
`before_step()`.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable

import torch

PRECISIONS = ("fp32", "fp16", "bf16")
OPTIMIZERS = ("adam", "sgd")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def make_optimizer(name: str, params, lr: float, foreach: bool | None = None) -> torch.optim.Optimizer:
    """torch.optim.Adam (default betas and eps) or plain SGD at `lr`. foreach=None: torch's default."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, foreach=foreach)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=foreach)
    raise ValueError(f"unknown optimizer {name!r}; valid optimizers: {', '.join(OPTIMIZERS)}")


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid precisions: {', '.join(PRECISIONS)}")


def autocast(device: torch.device, precision: str):
    """The forward's context for a precision: nothing for fp32, torch.autocast otherwise."""
    check_precision(precision)
    return contextlib.nullcontext() if precision == "fp32" else torch.autocast(device.type, dtype=DTYPES[precision])


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite during a measured, warm-up or training step."""


class TrainingStep:
    """One training step of `model` on `batch` (or the batch a call passes); a call returns the loss, detached.
    `scaler`: fp16's GradScaler, made here unless given; `clip`: the gradients' joint norm before the step."""

    def __init__(self, model: torch.nn.Module, batch: Any, loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
                 optimizer: torch.optim.Optimizer, precision: str = "fp32", device: torch.device | None = None, *,
                 scaler: Any = None, clip: float | None = None):
        check_precision(precision)
        self.model, self.batch, self.loss_fn = model, batch, loss_fn
        self.optimizer, self.precision = optimizer, precision
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.scaler = torch.amp.GradScaler(self.device.type) if scaler is None and precision == "fp16" else scaler
        self.clip = clip

    def __call__(self, batch: Any = None, *, tracker: Any = None, check: str | None = None,
                 on_forward_end: Callable[[torch.Tensor], None] | None = None,
                 before_step: Callable[[], None] | None = None) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.device, self.precision), (tracker if tracker is not None else contextlib.nullcontext()):
            loss = self.loss_fn(self.model, self.batch if batch is None else batch)
        if check is not None and not math.isfinite(value := float(loss.detach().float())):
            raise NonFiniteLossError(f"the loss is {value} at the {check}: training diverged "
                                     "(lower the learning rate, use bf16 instead of fp16, or check the data)")
        if on_forward_end is not None:
            on_forward_end(loss)
        scaler = self.scaler
        (scaler.scale(loss) if scaler is not None else loss).backward()
        if self.clip is not None:
            if scaler is not None:
                scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        if before_step is not None:
            before_step()
        if scaler is not None:
            scaler.step(self.optimizer)
            scaler.update()
        else:
            self.optimizer.step()
        return loss.detach()

    def scale(self) -> float | None:
        """fp16: the GradScaler's scale (it drops when a step's gradients overflow and the step is skipped)."""
        return self.scaler.get_scale() if self.scaler is not None else None

