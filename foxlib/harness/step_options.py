"""The training step's knobs beyond the model's config: which Adam, where it runs, TF32 matmuls, cuDNN.

- `adam`: "default" (PyTorch's choice: the multi-tensor "foreach" Adam on CUDA) or "fused" (`Adam(fused=True)`);
- `optimizer_in_backward`: Adam applied per parameter during backward (OptimizerInBackward);
- `tf32`: float32 matrix products on TensorFloat-32 (`torch.backends.cuda.matmul.allow_tf32`), a change of numerics;
- `cudnn`: False runs the LSTMs on PyTorch's own CUDA kernels instead of cuDNN's, a change of numerics.
- `compile`: the model compiled in place by torch.compile (`nn.Module.compile`: same parameters and state dict;
  inductor's fused kernels), dropout through PyTorch's own random ops (`fallback_random`): the same function.
- `cpp_wrapper` (with `compile`): inductor's C++ wrapper launches the compiled kernels from C++ instead of Python,
  and combo kernels fuse independent kernels side by side (fewer launches): for an eager step, which the host's
  time per launch bounds (scripts/diagnose_eager_step.py; reports/h200/batched-vsn/README.md). Inductor compiles
  C++ besides Triton then: a longer warm-up (on the H200 machine, 161.8 s for the C++ wrapper at c5c08ef,
  eager-cpp-combo.json, against 47.3 s for torch.compile alone compiled first in its process at 00f1b4e,
  eager-cpp-wrapper.json; both in reports/h200/batched-vsn/).
`backends(options)` holds TF32, cuDNN and inductor's options while the step runs or is captured. The defaults are
the plain step.
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Iterator

import torch

from foxlib.core.schema import Record

ADAMS = ("default", "fused")


@dataclass(frozen=True)
class StepOptions(Record):
    adam: str = "default"
    optimizer_in_backward: bool = False
    tf32: bool = False
    cudnn: bool = True
    compile: bool = False
    cpp_wrapper: bool = False

    def __post_init__(self):
        if self.adam not in ADAMS:
            raise ValueError(f"unknown adam {self.adam!r}; valid: {', '.join(ADAMS)}")
        if self.cpp_wrapper and not self.compile:
            raise ValueError("cpp_wrapper is an option of torch.compile: set compile too")

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
        """Whether `backends(self)` changes anything (TF32 on, cuDNN off, inductor's C++ wrapper)."""
        return self.tf32 or not self.cudnn or self.cpp_wrapper

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "StepOptions":
        """From plain data (a JSON object; None: the defaults), checked: a ValueError names an unknown
        option with the valid ones, and a switch that is not true or false."""
        d = {} if d is None else d
        defaults = asdict(cls())
        valid = ", ".join(defaults)
        if not isinstance(d, dict):
            raise ValueError(f"step options must be an object of {valid}, got {d!r}")
        if unknown := sorted(set(d) - set(defaults)):
            raise ValueError(f"unknown step option(s) {', '.join(unknown)}; valid: {valid}")
        if wrong := sorted(k for k, v in d.items() if isinstance(defaults[k], bool) and not isinstance(v, bool)):
            raise ValueError(f"step option(s) {', '.join(wrong)} must be true or false, got "
                             f"{ {k: d[k] for k in wrong} }")
        return cls(**d)

    def label(self) -> str:
        parts = {"fused Adam": self.adam == "fused", "Adam in backward": self.optimizer_in_backward, "TF32": self.tf32,
                 "LSTMs without cuDNN": not self.cudnn,
                 "torch.compile" + (" (C++ wrapper)" if self.cpp_wrapper else ""): self.compile}
        return " + ".join(name for name, on in parts.items() if on)


CPP_WRAPPER = {"cpp_wrapper": True, "combo_kernels": True}  # inductor's options for StepOptions.cpp_wrapper


def compile_in_place(model: torch.nn.Module, cpp_wrapper: bool = False) -> torch.nn.Module:
    """`model` compiled in place by torch.compile (`nn.Module.compile`: the same module, parameters and state dict;
    its forward compiled on the first call), dropout through PyTorch's own random ops (inductor's
    `fallback_random`), so that the compiled model computes the same function. `cpp_wrapper`: with CPP_WRAPPER too;
    run it inside `backends` (cpp_wrapper set), which the backward, compiled lazily on the first backward, reads
    (options given to torch.compile miss it: pytorch/pytorch#178845). Given to torch.compile as well, they make
    another backend, so the model is compiled anew rather than given the graphs dynamo cached for another model of
    the same class with other options (scripts/diagnose_eager_step.py at a384e34: a warm-up of 0.1 s)."""
    model.compile(options={"fallback_random": True, **(CPP_WRAPPER if cpp_wrapper else {})})
    return model


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
    """The options' backend settings held while inside (restored after): TF32 matmuls, cuDNN off, inductor's
    C++ wrapper (CPP_WRAPPER in inductor's config, which the backward, compiled lazily, reads)."""
    with contextlib.ExitStack() as held:
        held.enter_context(matmul_tf32(options.tf32))
        if not options.cudnn:
            held.enter_context(torch.backends.cudnn.flags(enabled=False))
        if options.cpp_wrapper:
            from torch._inductor import config as inductor_config
            held.enter_context(inductor_config.patch(**CPP_WRAPPER))
        yield


class OptimizerInBackward:
    """Adam applied during backward, one parameter at a time, so that the gradients never all exist at once: each
    parameter's own Adam is stepped by a post-accumulate-grad hook, which then frees the gradient. The floor of
    persistent bytes falls from 16 per fp32 parameter to 12 plus the largest gradients alive together. Nothing
    global over the gradients can run: `clip_each` clips each gradient by its own norm, and fp16 (GradScaler) is
    refused (StepRecipe). It quacks like the optimizer the step expects: `step()` and `zero_grad()` do nothing,
    `state` and `param_groups` are the per-parameter Adams' (for the profilers and a CUDA graph's checks)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], *, clip_each: float | None = None, **adam: Any):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no parameter requires a gradient")
        self.clip_each = clip_each
        self.optimizers = [torch.optim.Adam([p], **adam) for p in self.params]
        self._by_param = {id(p): o for p, o in zip(self.params, self.optimizers)}
        # the hooks hold this object weakly: a hook on a parameter that held it would keep the parameters, their
        # gradients and Adam's state alive after the model is dropped (a cycle the collector never frees)
        me = weakref.ref(self)
        self._handles = [p.register_post_accumulate_grad_hook(lambda p, me=me: me()._apply(p)) for p in self.params]

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
