"""predict_step: the memory of one training step, by category (foxlib.memory.profile.MemoryProfile),
predicted on the CPU without allocating the model, its gradients, optimizer state or activations.
The model is built, and the step runs as profile_step runs it (predict_model_step mirrors its
statements, warm-up included), under FakeTensorMode; only the batch is real. Parameters, gradients,
optimizer state and batch are the unique storages of their tensors; activations are counted by
accounting.SavedTensorTracker's hooks keyed for fake storages; forward_peak and peak are "live at
the start + largest running total" of the storages ops create less those freed
(foxlib/memory/predict_tracing.py). Where a meta kernel's output size is not the real CPU kernel's,
foxlib/memory/predict_kernels.py corrects it; what CPU kernels hold inside themselves is probed on
this CPU (foxlib/memory/predict_scratch.py). The result is a lower bound of profile_step's CPU peak;
how close, per model, precision and CPU ISA, is what tests/test_predict.py and
tests/test_prediction_table.py assert, within foxlib.memory.tolerances. With target="cuda" the
cuBLAS/cuDNN workspaces, the allocator's rounding and the CUDA context are outside the prediction."""
from __future__ import annotations

import contextlib
import gc
from typing import Any, Callable, Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from foxlib.memory import accounting
from foxlib.memory.predict_kernels import RealKernelSizes
from foxlib.memory.predict_scratch import probe_kernel_scratch
from foxlib.memory.predict_tracing import FakeSavedTensorTracker, LiveStorages, is_fake, unique_storage_bytes
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.step import TrainingStep, check_precision
from foxlib.memory.tolerances import LSTM_MARK

OPTIMIZERS = ("adam", "sgd")
PEAK_METHOD = ("predicted: model, autograd and optimizer on fake tensors (FakeTensorMode, no memory "
               "allocated); tensors live at the start + largest running sum of the storages that "
               "ops create, less those freed (TorchDispatchMode, weakrefs to storages)")


# ----------------------------------------------------------------------------- helpers

@contextlib.contextmanager
def _no_distribution_validation():
    """torch.distributions checks its arguments' values (`.all()`), which fake tensors do not have."""
    old = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(old)


class _AlwaysStepScaler(torch.amp.GradScaler):
    """GradScaler whose optimizer step is always taken: its inf/NaN check (`.item()`) needs values."""

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        return optimizer.step(*args, **kwargs)


def make_optimizer(name: str, params, lr: float, foreach: bool | None = None) -> torch.optim.Optimizer:
    """torch.optim.Adam (default betas and eps) or plain SGD at `lr`. foreach=None: torch's default."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, foreach=foreach)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=foreach)
    raise ValueError(f"unknown optimizer {name!r}; valid optimizers: {', '.join(OPTIMIZERS)}")


# ----------------------------------------------------------------------------- prediction

def build_fake(build: Callable[[], torch.nn.Module]) -> tuple[torch.nn.Module, FakeTensorMode]:
    """build() under a fresh FakeTensorMode: the model with fake parameters (no memory), and
    the mode to run it under. torch's global RNG is left as it was."""
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    with torch.random.fork_rng(devices=[]), fake_mode:
        model = build()
    return model, fake_mode


def _optimizer_label(optimizer: str, foreach: bool | None) -> str:
    if optimizer == "sgd":
        return "SGD (no state)"
    kind = {None: "for-loop (torch's CPU default)", False: "for-loop", True: "multi-tensor (foreach)"}[foreach]
    return f"Adam, {kind} implementation"


WARMUPS = ("optimizer", "full")
DROPOUTS = ("cpu", "fused")


@contextlib.contextmanager
def fused_dropout():
    """Dropout as torch runs it on CUDA: the fused `native_dropout` kernel, which returns the output
    and a 1-byte bool mask (saved for backward). On the CPU, F.dropout is a composite that saves
    the scaled float noise instead: 4 bytes an element (2 under autocast's 16-bit outputs). Inside
    this context F.dropout (what nn.Dropout calls) runs native_dropout, which has a CPU kernel and
    a meta kernel, so a CPU prediction saves what a CUDA step saves. In-place dropout is left as is."""
    functional = torch.nn.functional
    original = functional.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if inplace or not training or p == 0.0:
            return original(input, p, training, inplace)
        return torch.native_dropout(input, p, True)[0]

    functional.dropout = dropout
    try:
        yield
    finally:
        functional.dropout = original


def predict_model_step(build, batch: Any, loss_fn, *, precision: str = "fp32", optimizer: str = "adam",
                       lr: float = 1e-3, foreach: bool | None = None, warmup: str = "optimizer",
                       buffers: Mapping[str, Any] | None = None, dropout: str = "cpu",
                       kernel_scratch: bool = True) -> MemoryProfile:
    """Predict profile_step(build(), batch, loss_fn, <optimizer>, precision) without allocating.

    build: a zero-argument callable returning the model; it runs under FakeTensorMode, so its
    parameters are fake. batch: real (small) data, converted to fake tensors where used.
    foreach: None for the implementation torch picks on the CPU (for-loop), True for the
    multi-tensor one (CUDA's default), False for the for-loop one.

    warmup: what stands for profile_step's warm-up step, whose only lasting effect is the
    optimizer's state (and the GradScaler's scale):
    - "full": a whole untracked step first, then the tracked one (as profile_step does);
    - "optimizer" (default, about 40 % faster): the tracked step's forward and backward run
      first, then an untracked optimizer step creates the state (with the gradients of this
      very step), then the tracked optimizer step runs, as the warmed-up step's would. The
      state is counted as live from the start of the step, as in profile_step. Equal to
      "full" wherever the first forward leaves nothing behind (lazy modules do: a model with
      one gets the full warm-up).

    dropout: "cpu" (torch's CPU composite, a float mask) or "fused" (CUDA's native_dropout, a
    1-byte mask: see fused_dropout).

    kernel_scratch: add what the CPU kernels of predict_scratch.SCRATCH_OPS hold inside themselves (oneDNN's
    scratchpads, ...), probed on this CPU (probe_kernel_scratch). False for a step that will run
    on CUDA, whose kernels are others (cuBLAS/cuDNN workspaces are not modelled)."""
    check_precision(precision)
    if dropout not in DROPOUTS:
        raise ValueError(f"unknown dropout {dropout!r}; valid: {', '.join(DROPOUTS)}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid optimizers: {', '.join(OPTIMIZERS)}")
    if warmup not in WARMUPS:
        raise ValueError(f"unknown warmup {warmup!r}; valid: {', '.join(WARMUPS)}")
    device = torch.device("cpu")
    batch_tensors = list(accounting.iter_tensors(batch))
    if any(t.device.type != "cpu" for t in batch_tensors):
        raise ValueError("predict: the batch must be on the CPU (it is real data; the model is not)")
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    seen: dict[str, Any] = {}
    kernel_sizes = RealKernelSizes()
    with torch.random.fork_rng(devices=[]), _no_distribution_validation(), fake_mode, kernel_sizes, \
            (fused_dropout() if dropout == "fused" else contextlib.nullcontext()):
        model = build()
        params = list(model.parameters())
        if not all(is_fake(p) for p in params):
            raise AssertionError("predict: the model was built with real parameters")
        if any(isinstance(m, torch.nn.modules.lazy.LazyModuleMixin) for m in model.modules()):
            warmup = "full"
        opt = make_optimizer(optimizer, params, lr, foreach)
        scaler = _AlwaysStepScaler(device.type) if precision == "fp16" else None
        model.train()
        live = None

        # the one TrainingStep (foxlib.memory.step), as profile_step runs it: the same statements, the same lifetimes
        run = TrainingStep(model, batch, loss_fn, opt, precision, device, scaler=scaler)

        def make_state():  # the optimizer's state made outside the live count, as a warm-up step would have
            with live.paused():
                opt.step()

        def step(tracker=None, on_forward_end=None, make_state_first=False):
            run(tracker=tracker, on_forward_end=on_forward_end, before_step=make_state if make_state_first else None)

        if warmup == "full":
            step()
        elif scaler is not None:
            scaler._lazy_init_scale_growth_tracker(device)  # what the warm-up's scale() would make
        opt.zero_grad(set_to_none=True)
        gc.collect()

        tracker = FakeSavedTensorTracker(model)
        live = LiveStorages(fake_mode)

        def on_forward_end(loss):
            seen["activations"], seen["by_module"] = tracker.live_bytes(), tracker.by_module()
            live.mark()
            live.watch_backward(loss)

        with live:
            step(tracker, on_forward_end, make_state_first=warmup == "optimizer")
        # what the real kernels hold inside themselves (oneDNN scratchpads...): one probe each
        if kernel_scratch:
            scratch = probe_kernel_scratch(k for k, _, _ in live.kernel_calls)
            live.add_kernel_scratch(scratch)
        # live at the start of the step: weights, buffers, optimizer state, the batch
        state = list(accounting.iter_tensors(list(opt.state.values())))
        own_live = (unique_storage_bytes(list(model.parameters()) + list(model.buffers()) + state)
                    + unique_storage_bytes(batch_tensors))
        seen["parameters_fake"] = all(is_fake(p) for p in model.parameters())
        profile = MemoryProfile(
            device=f"predicted ({device.type})",
            device_name="none: fake tensors (torch._subclasses.fake_tensor.FakeTensorMode)",
            precision=precision,
            n_parameters=sum(p.numel() for p in model.parameters()),
            parameters=unique_storage_bytes(list(model.parameters()) + list(model.buffers())),
            gradients=unique_storage_bytes(p.grad for p in model.parameters()),
            optimizer_state=unique_storage_bytes(state),
            activations=seen["activations"],
            activations_by_module=seen["by_module"],
            saved_tensor_saves=tracker.saves,
            batch=unique_storage_bytes(batch_tensors),
            buffers=accounting.buffer_bytes(dict(buffers or {})),
            live_before_step=own_live,
            forward_peak=own_live + live.marked_peak,
            peak=own_live + live.peak,
            loss=float("nan"),  # fake tensors have no values
            peak_method=f"{PEAK_METHOD}; optimizer: {_optimizer_label(optimizer, foreach)}; warm-up: {warmup}; "
                        f"dropout: {'fused, 1-byte mask (as on CUDA)' if dropout == 'fused' else 'CPU composite'}; "
                        + (f"kernels' own scratch: probed on this CPU ({len(scratch)} op shapes)" if kernel_scratch
                           else "kernels' own scratch: not counted")
                        + (f"; {LSTM_MARK} oneDNN's, workspace probed on this CPU" if kernel_sizes.lstm_calls else ""),
        )
    if not seen["parameters_fake"]:
        raise AssertionError("predict: parameters became real during the step")
    return profile


_PREDICTED: dict[tuple, MemoryProfile] = {}
"""predict_step's predictions made in this process from the card's own batch, by their arguments."""


def predict_step(card, config, *, precision: str = "fp32", optimizer: str = "adam",
                 foreach: bool | None = None, warmup: str = "optimizer", seed: int = 0,
                 batch: Any = None, target: str = "cpu", kernel_scratch: bool | None = None) -> MemoryProfile:
    """Predict what profile_step measures for one training step of `card` built from `config`
    (as foxlib.harness.measure_step does it: Adam at the config's learning rate over all parameters), on
    the CPU, without allocating the model, its gradients, optimizer state or activations.

    Returns a MemoryProfile (device "predicted (cpu)", loss NaN). optimizer: "adam" or "sgd".
    foreach, warmup: see predict_model_step (foreach None: torch's CPU default, the for-loop
    Adam; True: the multi-tensor Adam, CUDA's default).
    batch: a real batch from card.example_batch(config, "cpu", seed), made here if None.
    target: the device type the step will run on: "cpu", or "cuda" (then Adam is the multi-tensor
    one unless foreach says otherwise, and dropout the fused kernel with its 1-byte mask; the CPU
    kernels' scratch is not probed).
    kernel_scratch: probe the CPU kernels' scratch (predict_scratch: each 16-bit matmul run once on zeros); None:
    on a "cpu" target. False where those kernels are the conversion path (foxlib.memory.cpu_support): the probe
    would take as long as the step, and the prediction is then the step's own tensors.

    A prediction is deterministic: one made from the card's own batch (batch None) is made once per
    process and argument set, and given again (the run's preflight, its measurement and wave 8.13's card
    table predict the same steps); not while another profiler runs (the kernels' scratch is not probed then).
    """
    if target not in ("cpu", "cuda"):
        raise ValueError(f"unknown target {target!r}; valid: cpu, cuda")
    if target == "cuda" and foreach is None:
        foreach = True
    scratch = target == "cpu" if kernel_scratch is None else kernel_scratch
    key = (card.name, id(card), repr(config), precision, optimizer, foreach, warmup, seed, target, scratch)
    if batch is None and key in _PREDICTED:
        return _PREDICTED[key]
    keep = batch is None and not torch._C._autograd._profiler_enabled()
    if batch is None:
        batch = card.example_batch(config, device="cpu", seed=seed)
    profile = predict_model_step(lambda: card.build(config), batch, card.loss, precision=precision,
                                 optimizer=optimizer, lr=card.learning_rate(config), foreach=foreach, warmup=warmup,
                                 buffers=card.buffers(batch), dropout="fused" if target == "cuda" else "cpu",
                                 kernel_scratch=scratch)
    if keep:
        _PREDICTED[key] = profile
    return profile
