"""predict_step: the memory of one training step, by category, predicted without running it.

The model is built, and the warm-up and measured steps run, under
`torch._subclasses.fake_tensor.FakeTensorMode`: every tensor the model, autograd and the
optimizer create is a fake tensor (shape, dtype, strides and a storage of the right size on the
meta device), so no memory is allocated for parameters, gradients, optimizer state or
activations, whatever the configuration. Only the batch is real: `card.example_batch` reads the
market data on the CPU, and fake mode converts its tensors (each once, memoised) where the
step uses them.

How the categories are counted (the same definitions as profile_step; see memory.md):
- parameters, gradients, optimizer state: unique storages of the (fake) tensors. Fake storages
  all have data_ptr 0, so `accounting.storage_key` cannot tell them apart; here a storage is
  keyed by its identity (`untyped_storage()._cdata`, the StorageImpl's address, equal for every
  view) and its size.
- activations: `accounting.SavedTensorTracker`'s saved-tensor hooks, keyed the same way
  (`_SavedTensorTracker` below: the tracker itself works on fake tensors, only its key had to
  change); live storages only, after the forward.
- peaks: `LiveStorages`, a TorchDispatchMode pushed on top of the fake mode (the approach of
  torch.distributed._tools.mem_tracker.MemTracker). Every op's output storages that are new
  are added to a running total. Frees are detected by a weakref (with callback) to the
  storage's Python object: PyTorch keeps that object alive exactly as long as the storage
  itself (PyObject preservation), so the callback runs the moment the last tensor or view of
  it dies, between two ops, and the total is lowered before the next op's outputs are added.
  A storage that changes size (resize_, out=) is re-measured when an op returns it.
  `forward_peak` and `peak` are live-at-start + the largest running total, the same
  definition as profile_step's CPU peak (storages live before the step and freed inside it
  are not counted as frees there either).

The optimizer. torch.optim.Adam's default implementation depends on the device: on the CPU
(what profile_step's callers get there, foreach=None) it is the for-loop one, whose
temporaries are two tensors the size of ONE parameter (sqrt(v), then its division by the bias
correction); on CUDA it is the multi-tensor ("foreach") one, whose `_foreach_sqrt` and
`_foreach_div_` hold a temporary the size of ALL parameters of a device and dtype group at
once (one prediction that skipped it was 15 % under the measured peak, memory.md). No formula
is needed for either: the real optimizer's step runs on the fake parameters, so its
temporaries pass through the dispatch mode like any other op. `foreach=None` predicts the
implementation Adam picks for the target device (the CPU: for-loop); `foreach=True` predicts
the multi-tensor one (CUDA's default). fp16 uses a GradScaler like profile_step; its inf/NaN
check reads a value (`.item()`), which fake tensors do not have, so here the optimizer step is
always taken (a real step is skipped only when the gradients overflowed).

Where prediction and the CPU measurement differ (tests/test_predict.py checks them):
- parameters, gradients, optimizer state: equal, byte for byte.
- activations: equal when every saved tensor's size follows from shapes. A kernel whose
  output size is its library's choice can differ: the CPU LSTM's oneDNN workspace (uint8,
  memory.md) comes from the meta kernel's formula, not from oneDNN.
- peaks: profile_step's CPU peak sums the CPU allocator's events, which also see memory an
  ATen kernel allocates and frees inside itself (oneDNN/MKL scratch buffers, contiguous
  copies of operands, reduction buffers, the LSTM's intermediate gate buffers). A dispatch
  mode sees only the outputs of ops, so the prediction under-states the peak by the largest
  of those in-kernel workspaces live at the peak; it over-states it by nothing. Tensors
  made from numpy inside the loss (the DQN's replay sample) are numpy memory in a real run,
  not allocator events, and are not counted here either.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import weakref
from typing import Any, Iterable, Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten

from foxlib.memory import accounting
from foxlib.memory.profile import MemoryProfile, autocast, check_precision

OPTIMIZERS = ("adam", "sgd")
PEAK_METHOD = ("predicted: model, autograd and optimizer on fake tensors (FakeTensorMode, no memory "
               "allocated); tensors live at the start + largest running sum of the storages that "
               "ops create, less those freed (TorchDispatchMode, weakrefs to storages)")


# ----------------------------------------------------------------------------- storage identity

def storage_id(t: torch.Tensor) -> tuple[str, int, int]:
    """(device, StorageImpl address, nbytes): equal for every view of one storage, real or fake.

    accounting.storage_key uses data_ptr, which is 0 for every fake storage."""
    s = t.untyped_storage()
    return (str(t.device), s._cdata, s.nbytes())


def unique_storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the distinct storages behind `tensors`, by storage identity (fake-safe)."""
    return sum(k[2] for k in {storage_id(t) for t in tensors if t is not None})


def is_fake(t: torch.Tensor) -> bool:
    """True for a tensor that holds no memory: a FakeTensor or a meta tensor."""
    return isinstance(t, FakeTensor) or t.device.type == "meta"


class _SavedTensorTracker(accounting.SavedTensorTracker):
    """accounting.SavedTensorTracker keyed by storage identity instead of data_ptr (fake-safe).

    Same attribution to the model's direct children, same exclusion of parameters and buffers,
    same count of live storages only."""

    def __init__(self, model: torch.nn.Module):
        super().__init__(model)
        self._exclude = {storage_id(t) for t in list(model.parameters()) + list(model.buffers())}

    def _pack(self, t: torch.Tensor):
        self.saves += 1
        if t.layout == torch.strided or t.layout == torch.sparse_coo:
            try:
                key = storage_id(t)
            except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
                return t
            if key not in self._exclude:
                old = self._saved.get(key)
                if old is None or old[0].expired():
                    self._saved[key] = (StorageWeakRef(t.untyped_storage()), self._where[-1])
        return t


# ----------------------------------------------------------------------------- live storages

def _storage_address(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


# torch.tensor(...) / torch.as_tensor(numpy) wrap memory that exists already (lift_fresh is the
# identity in eager mode; fake mode turns its real input into a fake tensor there)
_NO_ALLOCATION = {torch.ops.aten.lift_fresh.default}


class LiveStorages(TorchDispatchMode):
    """Running total of the bytes of storages created by ops while the mode is active.

    An op's output storage not seen before is added; a weakref callback on the storage's Python
    object subtracts it when it dies (frees happen between ops, so the total is exact at every
    op boundary). `peak` is the largest total; `mark()` remembers the peak so far (the forward's).
    Works on real and on fake tensors."""

    def __init__(self, fake_mode: FakeTensorMode | None = None):
        super().__init__()
        self.fake_mode = fake_mode
        self.live = 0
        self.peak = 0
        self.marked_peak: int | None = None
        self.ops = 0
        self._storages: dict[int, list] = {}  # StorageImpl address -> [weakref, nbytes]
        self._open = True

    def _freed(self, key: int, ref: weakref.ref) -> None:
        entry = self._storages.get(key)
        if self._open and entry is not None and entry[0] is ref:
            self.live -= entry[1]
            del self._storages[key]

    def _track(self, t: torch.Tensor, inputs: set[int]) -> None:
        try:
            s = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse, nested: no single storage
            return
        key, nbytes = s._cdata, s.nbytes()
        entry = self._storages.get(key)
        if entry is not None and entry[0]() is s:
            if entry[1] != nbytes:  # resized in place (resize_, out= arguments)
                self.live += nbytes - entry[1]
                entry[1] = nbytes
            return
        if key in inputs:  # a view of an input, or an in-place op: no new memory
            return
        ref = weakref.ref(s, lambda r, key=key: self._freed(key, r))
        self._storages[key] = [ref, nbytes]
        self.live += nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        out = func(*args, **kwargs)
        self.ops += 1
        if func not in _NO_ALLOCATION:
            inputs = {_storage_address(t) for t in tensors}
            if self.fake_mode is not None:
                # a real input (the batch) is converted to a fake tensor by the fake mode, once
                # (memoised): its fake storage is the input's memory, not a new allocation
                inputs |= {_storage_address(self.fake_mode.from_tensor(t)) for t in tensors if not is_fake(t)}
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self._track(t, inputs)
        self.peak = max(self.peak, self.live)
        return out

    def mark(self) -> None:
        self.marked_peak = self.peak

    def __exit__(self, *exc):
        self._open = False  # storages that die later no longer matter
        return super().__exit__(*exc)


# ----------------------------------------------------------------------------- oneDNN workspaces

_MKLDNN_RNN = torch.ops.aten.mkldnn_rnn_layer.default


def _spec(x):
    """A hashable description of an argument: tensors by (shape, dtype), lists element-wise."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_spec(v) for v in x)
    return x


def _zeros(spec):
    if isinstance(spec, tuple) and len(spec) == 3 and spec[0] == "tensor":
        return torch.zeros(spec[1], dtype=spec[2])
    if isinstance(spec, tuple):
        return [_zeros(v) for v in spec]
    return spec


@functools.lru_cache(maxsize=256)
def onednn_rnn_workspace_bytes(spec: tuple) -> int:
    """Bytes of the workspace oneDNN's LSTM layer saves for backward, for one argument spec.

    Its size is oneDNN's choice (page-aligned pieces, memory.md: "report it, do not derive
    it"), and the meta kernel returns an empty one. So it is measured: one real call of
    aten.mkldnn_rnn_layer on zeros of the same shapes and dtypes, outside every mode and
    autocast, on tensors that require no grad; cached per spec. The only real memory a prediction uses
    beyond the batch: that layer's input, weights, output and workspace, freed at once."""
    # grad mode on (the kernel keeps no workspace under no_grad); the zeros require no grad
    with _disable_current_modes(), torch.enable_grad(), torch.autocast("cpu", enabled=False):
        args = [_zeros(a) for a in spec]
        out = _MKLDNN_RNN(*args)
        return out[3].untyped_storage().nbytes()


class OneDNNWorkspaces(TorchDispatchMode):
    """Under fake mode, gives aten.mkldnn_rnn_layer's workspace output its real size.

    Sits between the fake mode and LiveStorages, so that both the live-storage count and
    the saved-tensor hooks (autograd saves the workspace for backward) see the real size."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is _MKLDNN_RNN and not kwargs:
            nbytes = onednn_rnn_workspace_bytes(tuple(_spec(a) for a in args))
            if out[3].untyped_storage().nbytes() != nbytes:
                out = (*out[:3], torch.empty(nbytes, dtype=torch.uint8, device=out[3].device))
        return out


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


def config_lr(config: Any) -> float:
    """The learning rate a card's config names (lr or learning_rate), 1e-3 otherwise (as measure.py)."""
    for name in ("lr", "learning_rate"):
        if hasattr(config, name):
            return float(getattr(config, name))
    return 1e-3


# ----------------------------------------------------------------------------- prediction

def predict_model_step(build, batch: Any, loss_fn, *, precision: str = "fp32", optimizer: str = "adam",
                       lr: float = 1e-3, foreach: bool | None = None, warmup: int = 1,
                       buffers: Mapping[str, Any] | None = None) -> MemoryProfile:
    """Predict profile_step(build(), batch, loss_fn, <optimizer>, precision) without allocating.

    build: a zero-argument callable returning the model; it runs under FakeTensorMode, so its
    parameters are fake. batch: real (small) data, converted to fake tensors where used.
    foreach: None for the implementation torch picks on the CPU (for-loop), True for the
    multi-tensor one (CUDA's default), False for the for-loop one."""
    check_precision(precision)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid optimizers: {', '.join(OPTIMIZERS)}")
    if warmup < 1 and optimizer == "adam":
        raise ValueError("Adam needs a warm-up step: its state is created at the first step")
    device = torch.device("cpu")
    batch_tensors = list(accounting.iter_tensors(batch))
    if any(t.device.type != "cpu" for t in batch_tensors):
        raise ValueError("predict: the batch must be on the CPU (it is real data; the model is not)")
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    seen: dict[str, Any] = {}
    with torch.random.fork_rng(devices=[]), _no_distribution_validation(), fake_mode, OneDNNWorkspaces():
        model = build()
        params = list(model.parameters())
        if not all(is_fake(p) for p in params):
            raise AssertionError("predict: the model was built with real parameters")
        opt = make_optimizer(optimizer, params, lr, foreach)
        scaler = _AlwaysStepScaler(device.type) if precision == "fp16" else None
        model.train()

        # mirrors profile_step's step(): same statements, so the same lifetimes
        def step(tracker=None, on_forward_end=None):
            opt.zero_grad(set_to_none=True)
            with autocast(device, precision), (tracker if tracker is not None else contextlib.nullcontext()):
                loss = loss_fn(model, batch)
            if on_forward_end is not None:
                on_forward_end()
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()

        for _ in range(warmup):
            step()
        opt.zero_grad(set_to_none=True)
        gc.collect()

        own = (list(model.parameters()) + list(model.buffers())
               + list(accounting.iter_tensors(list(opt.state.values()))))
        own_live = unique_storage_bytes(own) + unique_storage_bytes(batch_tensors)
        tracker = _SavedTensorTracker(model)
        live = LiveStorages(fake_mode)

        def on_forward_end():
            seen["activations"], seen["by_module"] = tracker.live_bytes(), tracker.by_module()
            live.mark()

        with live:
            step(tracker, on_forward_end)
        # a weak reference for the test that nothing was materialised
        seen["parameters_fake"] = all(is_fake(p) for p in model.parameters())
        profile = MemoryProfile(
            device=f"predicted ({device.type})",
            device_name="none: fake tensors (torch._subclasses.fake_tensor.FakeTensorMode)",
            precision=precision,
            n_parameters=sum(p.numel() for p in model.parameters()),
            parameters=unique_storage_bytes(list(model.parameters()) + list(model.buffers())),
            gradients=unique_storage_bytes(p.grad for p in model.parameters()),
            optimizer_state=unique_storage_bytes(accounting.iter_tensors(list(opt.state.values()))),
            activations=seen["activations"],
            activations_by_module=seen["by_module"],
            saved_tensor_saves=tracker.saves,
            batch=unique_storage_bytes(batch_tensors),
            buffers=accounting.buffer_bytes(dict(buffers or {})),
            live_before_step=own_live,
            forward_peak=own_live + live.marked_peak,
            peak=own_live + live.peak,
            loss=float("nan"),  # fake tensors have no values
            peak_method=PEAK_METHOD + (f"; {optimizer} foreach={foreach}" if optimizer else ""),
        )
    if not seen["parameters_fake"]:
        raise AssertionError("predict: parameters became real during the step")
    return profile


def predict_step(card, config, *, precision: str = "fp32", optimizer: str = "adam",
                 foreach: bool | None = None, warmup: int = 1, seed: int = 0,
                 batch: Any = None) -> MemoryProfile:
    """Predict what profile_step measures for one training step of `card` built from `config`
    (as foxlib.measure does it: Adam at the config's learning rate over all parameters), on
    the CPU, without allocating the model, its gradients, optimizer state or activations.

    Returns a MemoryProfile (device "predicted (cpu)", loss NaN). optimizer: "adam" or "sgd".
    foreach: see predict_model_step (None: torch's CPU default; True: multi-tensor, as on CUDA).
    batch: a real batch from card.example_batch(config, "cpu", seed), made here if None.
    """
    if batch is None:
        batch = card.example_batch(config, device="cpu", seed=seed)
    return predict_model_step(lambda: card.build(config), batch, card.loss, precision=precision,
                              optimizer=optimizer, lr=config_lr(config), foreach=foreach, warmup=warmup,
                              buffers=card.buffers(batch))
