"""The training step's knobs beyond the model's config: which Adam, where it runs, TF32 matmuls.

- `adam`: "default" (PyTorch's choice for the device: the multi-tensor "foreach" Adam on CUDA) or
  "fused" (one fused kernel; `torch.optim.Adam(fused=True)`).
- `optimizer_in_backward`: Adam applied per parameter during backward
  (foxlib.harness.optimizer_in_backward): the gradients never all exist at once.
- `tf32`: float32 matrix products on TensorFloat-32 tensor cores
  (`torch.backends.cuda.matmul.allow_tf32`), set only while the step runs or is captured
  (`matmul_tf32`); PyTorch's default is off. A change of numerics, like bf16.
- `cudnn`: False runs the LSTMs (every cuDNN-backed op) on PyTorch's own CUDA kernels instead of
  cuDNN's (`torch.backends.cudnn.flags(enabled=False)`), held like TF32 while the step runs or is
  captured. Other kernels, other rounding: treated as a change of numerics.
- `compile`: the model's forward (and so its backward) compiled by torch.compile (TorchInductor: fused
  elementwise kernels; `nn.Module.compile`, the module itself, so parameters and state dict are unchanged),
  dropout drawn by PyTorch's own random ops (inductor's `fallback_random`): the same function, rounding aside.
`backends(options)` holds TF32 and cuDNN. The defaults are the plain step every wave has measured so far.
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any, Iterator

import torch

from foxlib.harness.optimizer_in_backward import OptimizerInBackward

ADAMS = ("default", "fused")


@dataclass(frozen=True)
class StepOptions:
    adam: str = "default"
    optimizer_in_backward: bool = False
    tf32: bool = False
    cudnn: bool = True
    compile: bool = False

    def __post_init__(self):
        if self.adam not in ADAMS:
            raise ValueError(f"unknown adam {self.adam!r}; valid: {', '.join(ADAMS)}")

    @property
    def is_default(self) -> bool:
        return self == StepOptions()

    @property
    def numeric_changes(self) -> tuple[str, ...]:
        """The options on that change the numbers the step computes, by name: TF32 rounds the products'
        inputs to 10 mantissa bits; Adam in backward cannot clip the gradients' joint norm; the LSTMs
        without cuDNN round differently ("no_cudnn"). A fused Adam computes the same update in one kernel."""
        return tuple(k for k, on in (("tf32", self.tf32), ("optimizer_in_backward", self.optimizer_in_backward),
                                     ("no_cudnn", not self.cudnn)) if on)

    @property
    def changes_numerics(self) -> bool:
        return bool(self.numeric_changes)

    @property
    def sets_backends(self) -> bool:
        """Whether `backends(self)` changes anything (TF32 on, or cuDNN off)."""
        return self.tf32 or not self.cudnn

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "StepOptions":
        """From plain data (a JSON object; None: the defaults), checked: a ValueError names an unknown
        option with the valid ones, and a switch that is not true or false."""
        d = {} if d is None else d
        defaults = asdict(cls())
        valid = ", ".join(defaults)
        if not isinstance(d, dict):
            raise ValueError(f"step options must be an object of {valid}, got {d!r}")
        unknown = sorted(set(d) - set(defaults))
        if unknown:
            raise ValueError(f"unknown step option(s) {', '.join(unknown)}; valid: {valid}")
        wrong = sorted(k for k, v in d.items() if isinstance(defaults[k], bool) and not isinstance(v, bool))
        if wrong:
            raise ValueError(f"step option(s) {', '.join(wrong)} must be true or false, got "
                             f"{ {k: d[k] for k in wrong} }")
        return cls(**d)

    def label(self) -> str:
        parts = (["fused Adam"] if self.adam == "fused" else []) + \
                (["Adam in backward"] if self.optimizer_in_backward else []) + (["TF32"] if self.tf32 else []) + \
                ([] if self.cudnn else ["LSTMs without cuDNN"]) + (["torch.compile"] if self.compile else [])
        return " + ".join(parts)


def make_optimizer(options: StepOptions, model: torch.nn.Module, lr: float, *, clip_each: float | None = None,
                   **adam: Any):
    """Adam over the model's parameters as the options say (extra Adam options, e.g. capturable=True,
    pass through)."""
    if options.adam == "fused":
        adam["fused"] = True
    if options.optimizer_in_backward:
        return OptimizerInBackward(model.parameters(), lr=lr, clip_each=clip_each, **adam)
    return torch.optim.Adam(model.parameters(), lr=lr, **adam)


@contextlib.contextmanager
def matmul_tf32(enabled: bool) -> Iterator[None]:
    """float32 matrix products on TF32 while inside (restored after); a no-op when not enabled."""
    if not enabled:
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@contextlib.contextmanager
def backends(options: StepOptions) -> Iterator[None]:
    """The options' backend settings held while inside (restored after): TF32 matmuls, cuDNN off."""
    with matmul_tf32(options.tf32), (contextlib.nullcontext() if options.cudnn
                                     else torch.backends.cudnn.flags(enabled=False)):
        yield
