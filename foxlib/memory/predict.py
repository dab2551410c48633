"""predict_step: profile_step's MemoryProfile of one training step, predicted on the CPU without allocating.

The one TrainingStep runs under FakeTensorMode (only the batch is real). Activations: SavedTensorTracker keyed by
storage identity (every fake storage has data_ptr 0); peaks: live at the start + the largest running total of the
storages ops create, less those freed (LiveStorages). RealKernelSizes corrects outputs whose meta kernel's size is
not the CPU kernel's; probe_kernel_scratch measures what CPU kernels hold inside themselves. A lower bound of
profile_step's CPU peak, held to foxlib.memory.tolerances by tests/test_predict.py. With target="cuda" the
cuBLAS/cuDNN workspaces, the allocator's rounding and the CUDA context are outside it.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import weakref
from typing import Any, Iterable, Mapping

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten

from foxlib.memory import accounting
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.step import TrainingStep, check_precision, make_optimizer
from foxlib.memory.timeline import CpuTimeline, cpu_allocations
from foxlib.memory.tolerances import LSTM_MARK

DROPOUTS = ("cpu", "fused")
PEAK_METHOD = ("predicted: model, autograd and optimizer on fake tensors (FakeTensorMode, no memory "
               "allocated); tensors live at the start + largest running sum of the storages that "
               "ops create, less those freed (TorchDispatchMode, weakrefs to storages)")
_AT = torch.ops.aten
_LIFT_FRESH = _AT.lift_fresh.default  # the identity in eager mode; fake mode converts its real input
_MKLDNN_RNN = _AT.mkldnn_rnn_layer.default


# ----------------------------------------------------------------------------- storage identity

def storage_id(t: torch.Tensor) -> tuple[str, int, int]:
    """(device, StorageImpl address, nbytes): equal for every view of one storage, real or fake
    (accounting.storage_key uses data_ptr, which is 0 for every fake storage)."""
    s = t.untyped_storage()
    return (str(t.device), s._cdata, s.nbytes())


def is_fake(t: torch.Tensor) -> bool:
    """True for a tensor that holds no memory: a FakeTensor or a meta tensor."""
    return isinstance(t, FakeTensor) or t.device.type == "meta"


def _storage_address(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


# ----------------------------------------------------------------------------- live storages

class LiveStorages(TorchDispatchMode):
    """Running total of the bytes of storages created by ops while the mode is active, on real or fake tensors.

    An op's output storage not seen before (and not an input's: views and in-place ops allocate nothing) is
    added; a weakref callback subtracts it when it dies. `peak` is the largest total; `mark()` keeps the
    forward's.

    Gradient accumulation: the autograd engine adds two gradients of one input in place when it holds the last
    reference to a dense one, but always out of place under a dispatch mode or on fake tensors
    (at::isTensorSubclassLike), a transient the real step lacks (the TFT's VSNs). `watch_backward(loss)` hooks
    every node: an aten.add.Tensor between nodes whose first operand is dense and dies at once is counted as in
    place."""

    def __init__(self, fake_mode: FakeTensorMode | None = None):
        super().__init__()
        self.fake_mode = fake_mode
        self.live = 0
        self.peak = 0
        self.marked_peak: int | None = None
        self._storages: dict[int, list] = {}  # StorageImpl address -> [weakref, nbytes]
        self._open = True
        self._between_nodes = False
        self._in_backward = False
        self._pending = None  # (live after an accumulation, weakref to its first operand's storage)
        self._handles = []
        self._paused = False
        # calls of SCRATCH_OPS: (probe key, live bytes before the op, in the forward?)
        self.kernel_calls: list[tuple[tuple, int, bool]] = []

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

    def _settle(self) -> None:
        """Decide the last accumulation: in place if its first operand died right after it."""
        if self._pending is not None:
            live_after, operand = self._pending
            self._pending = None
            if operand() is not None:
                self.peak = max(self.peak, live_after)

    def _node_starts(self, *_):
        self._settle()
        self._between_nodes = False
        if not self._in_backward:  # the first node of a backward: hear of its end
            self._in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_ends)

    def _backward_ends(self):
        self._settle()
        self._in_backward = self._between_nodes = False

    def _node_ends(self, *_):
        self._between_nodes = True

    def watch_backward(self, root: torch.Tensor) -> None:
        """Hook every node of root's graph, to recognise the engine's gradient accumulations."""
        seen, stack = set(), [root.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            self._handles += (node.register_prehook(self._node_starts), node.register_hook(self._node_ends))
            stack.extend(fn for fn, _ in node.next_functions)

    def _is_accumulation(self, func, args, kwargs, out) -> bool:
        return (self._between_nodes and func is _AT.add.Tensor and not kwargs and len(args) == 2
                and all(isinstance(a, torch.Tensor) for a in args)
                and args[0].shape == args[1].shape == out.shape and args[0].dtype == out.dtype
                and args[0].layout == torch.strided and is_non_overlapping_and_dense(args[0]))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._paused:
            return func(*args, **(kwargs or {}))
        self._settle()
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        live_before = self.live
        out = func(*args, **kwargs)
        if func in SCRATCH_OPS and not kwargs:
            self.kernel_calls.append(((func, probe_spec(args)), live_before, self.marked_peak is None))
        if func is _LIFT_FRESH:
            # torch.tensor(data) made its tensor before this op, outside every mode: count it here; a tensor on
            # numpy memory (torch.as_tensor, not resizable) is not the allocator's
            source = args[0]
            if self.fake_mode is not None and not is_fake(source) and source.untyped_storage().resizable():
                self._track(out, set())
        else:
            inputs = {_storage_address(t) for t in tensors}
            if self.fake_mode is not None:
                # a real input's (the batch's) memoised fake storage is the input's memory, not a new one
                inputs |= {_storage_address(self.fake_mode.from_tensor(t)) for t in tensors if not is_fake(t)}
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self._track(t, inputs)
        if self._is_accumulation(func, args, kwargs, out):
            self.peak = max(self.peak, live_before)
            self._pending = (self.live, weakref.ref(args[0].untyped_storage()))
        else:
            self.peak = max(self.peak, self.live)
        return out

    def mark(self) -> None:
        self._settle()
        self.marked_peak = self.peak

    def add_kernel_scratch(self, inner_peak_bytes: Mapping[tuple, int]) -> None:
        """Raise the peaks by what the real kernels of the recorded SCRATCH_OPS calls hold inside themselves:
        at such a call the allocator holds the bytes live before it plus the call's own high-water mark
        (`inner_peak_bytes`, from probe_kernel_scratch)."""
        for key, live_before, in_forward in self.kernel_calls:
            at = live_before + inner_peak_bytes.get(key, 0)
            self.peak = max(self.peak, at)
            if in_forward and self.marked_peak is not None:
                self.marked_peak = max(self.marked_peak, at)

    @contextlib.contextmanager
    def paused(self):
        """Ops inside are not counted (their outputs are neither added nor, later, subtracted)."""
        self._settle()
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def __exit__(self, *exc):
        self._settle()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._open = False  # storages that die later no longer matter
        return super().__exit__(*exc)


# ----------------------------------------------------------------------------- real kernels' output sizes

def probe_spec(x):
    """Hashable description of an op's arguments: tensors by (shape, stride, dtype) (a transposed operand can
    make a kernel copy it), lists element-wise, the rest as it is."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), tuple(x.stride()), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(probe_spec(v) for v in x)
    if isinstance(x, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return ("const", str(x), x)
    return x


def _is_tensor_spec(spec) -> bool:
    return isinstance(spec, tuple) and len(spec) == 4 and spec[0] == "tensor"


def _elements(shape, stride) -> int:
    """Elements of a storage just large enough for a tensor of this shape and these strides."""
    return 0 if 0 in shape else 1 + sum((d - 1) * st for d, st in zip(shape, stride))


def _probe_bytes(spec) -> int:
    """Bytes of the real zeros _probe_args makes for a spec."""
    if _is_tensor_spec(spec):
        return _elements(spec[1], spec[2]) * spec[3].itemsize
    if isinstance(spec, tuple) and not (len(spec) == 3 and spec[0] == "const"):
        return sum(_probe_bytes(v) for v in spec)
    return 0


def _probe_args(spec):
    """Real zeros for a probe_spec."""
    if _is_tensor_spec(spec):
        _, shape, stride, dtype = spec
        return torch.zeros(_elements(shape, stride), dtype=dtype).as_strided(shape, stride)
    if isinstance(spec, tuple) and len(spec) == 3 and spec[0] == "const":
        return spec[2]
    if isinstance(spec, tuple):
        return [_probe_args(v) for v in spec]
    return spec


@functools.lru_cache(maxsize=256)
def onednn_rnn_workspace_bytes(spec: tuple) -> int:
    """Bytes of the workspace oneDNN's LSTM layer saves for backward (the meta kernel's is empty): one real call
    on zeros of the same shapes and dtypes, outside every mode and autocast."""
    # grad mode on (the kernel keeps no workspace under no_grad); the zeros require no grad
    with _disable_current_modes(), torch.enable_grad(), torch.autocast("cpu", enabled=False):
        return _MKLDNN_RNN(*_probe_args(spec))[3].untyped_storage().nbytes()


# losses whose reduced CPU result may be a view into the elementwise buffer (checked at run time)
_REDUCING_LOSSES = {_AT.mse_loss.default, _AT.smooth_l1_loss.default, _AT.huber_loss.default,
                    _AT.binary_cross_entropy.default, _AT.soft_margin_loss.default}
_NORMS = {_AT.native_layer_norm.default, _AT.native_group_norm.default}


@functools.lru_cache(maxsize=64)
def loss_keeps_elementwise_buffer(func, spec: tuple) -> bool:
    """Does the real CPU kernel of `func` return a scalar that holds the whole elementwise buffer? Measured
    on 2 x 3 zeros, once per spec."""
    with _disable_current_modes(), torch.no_grad(), torch.autocast("cpu", enabled=False):
        args = [torch.zeros(2, 3, dtype=a[3]) if _is_tensor_spec(a) else _probe_args(a) for a in spec]
        out = func(*args)
        return out.dim() == 0 and out.untyped_storage().nbytes() >= 6 * out.element_size()


@functools.lru_cache(maxsize=64)
def norm_statistics_dtype(func, input_dtype: torch.dtype, weight_dtype: torch.dtype | None,
                          normalized: tuple[int, ...]) -> torch.dtype:
    """dtype of the mean and rstd the CPU kernel of native_layer_norm/group_norm returns (float32 for a 16-bit
    input with float32 weights, where the meta kernel says the input's): measured on a 1-row input."""
    with _disable_current_modes(), torch.no_grad(), torch.autocast("cpu", enabled=False):
        if func is _AT.native_layer_norm.default:
            w = None if weight_dtype is None else torch.ones(normalized, dtype=weight_dtype)
            out = func(torch.zeros((1, *normalized), dtype=input_dtype), list(normalized), w, w, 1e-5)
        else:
            c = normalized[0]
            w = None if weight_dtype is None else torch.ones(c, dtype=weight_dtype)
            out = func(torch.zeros(1, c, 1, dtype=input_dtype), w, w, 1, c, 1, 1, 1e-5)
        return out[1].dtype


class RealKernelSizes(TorchDispatchMode):
    """Under fake mode, gives a few CPU kernels' outputs the real kernel's storage size where the meta kernel's
    differs: the LSTM's uint8 workspace (onednn_rnn_workspace_bytes); float32 mean and rstd of a norm with a
    16-bit input and float32 weights; a reduced loss that is a 0-dim view of its elementwise buffer. Sits between
    the fake mode and LiveStorages, so both the count and the saved-tensor hooks see the real sizes.
    `lstm_calls` counts the LSTM layers run."""

    lstm_calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if kwargs:
            return out
        if func is _MKLDNN_RNN:
            self.lstm_calls += 1
            nbytes = onednn_rnn_workspace_bytes(probe_spec(args))
            if out[3].untyped_storage().nbytes() != nbytes:
                out = (*out[:3], torch.empty(nbytes, dtype=torch.uint8, device=out[3].device))
        elif func in _NORMS:
            x, w = args[0], args[2 if func is _AT.native_layer_norm.default else 1]
            normalized = tuple(args[1]) if func is _AT.native_layer_norm.default else (args[4],)
            dtype = norm_statistics_dtype(func, x.dtype, None if w is None else w.dtype, normalized)
            if out[1].dtype != dtype:
                out = (out[0], *(torch.empty_strided(o.shape, o.stride(), dtype=dtype, device=o.device)
                                 for o in out[1:]))
        elif func in _REDUCING_LOSSES and isinstance(out, torch.Tensor) and out.dim() == 0:
            if loss_keeps_elementwise_buffer(func, probe_spec(args)):
                shape = torch.broadcast_shapes(*(a.shape for a in args if isinstance(a, torch.Tensor)))
                out = torch.empty(shape, dtype=out.dtype, device=out.device).view(-1)[0]
        return out


# ----------------------------------------------------------------------------- real kernels' own scratch

# ops whose CPU kernel may allocate and free memory inside itself, unseen by fake kernels and dispatch modes:
# oneDNN's scratchpads (16-bit matmuls per ISA path, the LSTM, the convolution), a 16-bit mean's accumulator
SCRATCH_OPS = frozenset({_AT.mm.default, _AT.addmm.default, _AT.bmm.default, _AT.baddbmm.default,
                         _AT.mkldnn_rnn_layer.default, _AT.mkldnn_rnn_layer_backward.default,
                         _AT.convolution.default, _AT.convolution_backward.default, _AT.mean.dim})
_PROBE_MARK = "foxlib::probe_kernel_scratch"
PROBE_MAX_BYTES = 64 * 2**20
"""A call with larger real inputs is not probed (its scratch counts 0), so that predicting a configuration too
large for this machine allocates little; oneDNN's scratchpads are small beside such tensors."""
_inner_peak_bytes: dict[tuple, int] = {}  # probe key -> bytes (this process's CPU, threads and libraries)


def probe_kernel_scratch(keys: Iterable[tuple]) -> dict[tuple, int]:
    """For each (op, probe_spec of its arguments): the most bytes the real CPU kernel holds while it runs
    (outputs and scratch), from the allocation events (cpu_allocations) of one call on zeros after a warm-up call
    (oneDNN caches its primitive), outside every mode and autocast; cached for the process (this CPU's ISA,
    threads, oneDNN). A failed probe, or inputs over PROBE_MAX_BYTES, count 0; nothing is probed (or cached)
    while another profiler runs."""
    keys = set(keys)
    _inner_peak_bytes.update({k: 0 for k in keys - _inner_peak_bytes.keys() if _probe_bytes(k[1]) > PROBE_MAX_BYTES})
    todo = sorted((k for k in keys if k not in _inner_peak_bytes), key=repr)
    if todo and not torch._C._autograd._profiler_enabled():
        failed = set()
        with _disable_current_modes(), torch.enable_grad(), torch.autocast("cpu", enabled=False), \
                cpu_allocations() as timeline:
            for key in todo:
                func, spec = key
                try:
                    args = _probe_args(spec)
                    func(*args)  # warm-up: oneDNN creates and caches its primitive
                    with torch.profiler.record_function(_PROBE_MARK):
                        _ = func(*args)  # its outputs freed after the mark's range, with the zeros
                    del _, args
                except Exception:  # an argument the zeros cannot stand for: count nothing
                    failed.add(key)
                    with torch.profiler.record_function(_PROBE_MARK):
                        pass
        marks = [(start, end) for name, start, end in timeline.ranges if name == _PROBE_MARK]
        if len(marks) == len(todo):
            for key, (start, end) in zip(todo, marks):
                inside = [a for a in timeline.allocations if start <= a[0] <= end and _PROBE_MARK in a[3]]
                _inner_peak_bytes[key] = 0 if key in failed else CpuTimeline(allocations=inside).peak_delta()
    return {k: _inner_peak_bytes.get(k, 0) for k in keys}


# ----------------------------------------------------------------------------- prediction

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


def _optimizer_label(optimizer: str, foreach: bool | None) -> str:
    if optimizer == "sgd":
        return "SGD (no state)"
    kind = {None: "for-loop (torch's CPU default)", False: "for-loop", True: "multi-tensor (foreach)"}[foreach]
    return f"Adam, {kind} implementation"


@contextlib.contextmanager
def fused_dropout():
    """F.dropout as on CUDA: the fused native_dropout, saving a 1-byte mask (the CPU composite saves the float
    noise: 4 bytes an element, 2 under autocast). In-place dropout is left as is."""
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
                       lr: float = 1e-3, foreach: bool | None = None, buffers: Mapping[str, Any] | None = None,
                       dropout: str = "cpu", kernel_scratch: bool = True) -> MemoryProfile:
    """Predict profile_step(build(), batch, loss_fn, <optimizer>, precision) without allocating.

    build: a zero-argument callable returning the model, run under FakeTensorMode. batch: real (small) data.
    foreach: None for torch's CPU choice (for-loop Adam), True for the multi-tensor one (CUDA's default).
    profile_step's warm-up, whose lasting effect is the optimizer's state, stands as an untracked optimizer step
    between the tracked backward and optimizer step ("optimizer"; about 40 % faster than a whole untracked step
    first and equal wherever the first forward leaves nothing behind); a model with a lazy module gets the whole
    step first ("full"). dropout: "cpu" (a float mask) or "fused" (CUDA's 1-byte mask: fused_dropout).
    kernel_scratch: add what SCRATCH_OPS' CPU kernels hold inside themselves, probed here (False for CUDA)."""
    check_precision(precision)
    if dropout not in DROPOUTS:
        raise ValueError(f"unknown dropout {dropout!r}; valid: {', '.join(DROPOUTS)}")
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
        lazy = any(isinstance(m, torch.nn.modules.lazy.LazyModuleMixin) for m in model.modules())
        warmup = "full" if lazy else "optimizer"
        opt = make_optimizer(optimizer, params, lr, foreach)
        scaler = _AlwaysStepScaler(device.type) if precision == "fp16" else None
        model.train()
        # the one TrainingStep (foxlib.memory.step), as profile_step runs it: the same statements, the same lifetimes
        run = TrainingStep(model, batch, loss_fn, opt, precision, device, scaler=scaler)
        if warmup == "full":
            run()
        elif scaler is not None:
            scaler._lazy_init_scale_growth_tracker(device)  # what the warm-up's scale() would make
        opt.zero_grad(set_to_none=True)
        gc.collect()

        tracker = accounting.SavedTensorTracker(model, key=storage_id)  # fake-safe: storage identity
        live = LiveStorages(fake_mode)

        def make_state():  # the optimizer's state made outside the live count, as a warm-up step would have
            with live.paused():
                opt.step()

        def on_forward_end(loss):
            seen["activations"], seen["by_module"] = tracker.live_bytes(), tracker.by_module()
            live.mark()
            live.watch_backward(loss)

        with live:
            run(tracker=tracker, on_forward_end=on_forward_end,
                before_step=make_state if warmup == "optimizer" else None)
        if kernel_scratch:
            scratch = probe_kernel_scratch(k for k, _, _ in live.kernel_calls)
            live.add_kernel_scratch(scratch)
        # live at the start of the step: weights, buffers, optimizer state, the batch
        own_live = (accounting.unique_bytes([*model.parameters(), *model.buffers(),
                                             *accounting.iter_tensors(list(opt.state.values()))], storage_id)
                    + accounting.unique_bytes(batch_tensors, storage_id))
        if not all(is_fake(p) for p in model.parameters()):
            raise AssertionError("predict: parameters became real during the step")
        return MemoryProfile(
            device=f"predicted ({device.type})",
            device_name="none: fake tensors (torch._subclasses.fake_tensor.FakeTensorMode)",
            precision=precision,
            **accounting.step_bytes(model, opt, batch, storage_id),
            activations=seen["activations"],
            activations_by_module=seen["by_module"],
            saved_tensor_saves=tracker.saves,
            buffers=accounting.buffer_bytes(dict(buffers or {})),
            live_before_step=own_live,
            forward_peak=own_live + live.marked_peak,
            peak=own_live + live.peak,
            loss=float("nan"),  # fake tensors have no values
            peak_method=f"{PEAK_METHOD}; optimizer: {_optimizer_label(optimizer, foreach)}; warm-up: {warmup}; "
                        f"dropout: {'fused, 1-byte mask (as on CUDA)' if dropout == 'fused' else 'CPU composite'}; "
                        + (f"kernels' own scratch: probed on this CPU ({len(scratch)} op shapes)" if kernel_scratch
                           else "kernels' own scratch: not counted")
                        + (f"; {LSTM_MARK} oneDNN's, workspace probed on this CPU" if kernel_sizes.lstm_calls else
                           f"; {LSTM_MARK} PyTorch's own kernel (no oneDNN workspace)"
                           if any(isinstance(mod, torch.nn.RNNBase) for mod in model.modules()) else ""),
        )


_PREDICTED: dict[tuple, MemoryProfile] = {}
"""predict_step's predictions made in this process from the card's own batch, by their arguments."""


def predict_step(card, config, *, precision: str = "fp32", optimizer: str = "adam",
                 foreach: bool | None = None, seed: int = 0, batch: Any = None, target: str = "cpu",
                 kernel_scratch: bool | None = None) -> MemoryProfile:
    """predict_model_step for `card` at `config` with Adam at the card's learning rate (as
    foxlib.harness.measure_step measures it): a MemoryProfile, device "predicted (cpu)", loss NaN.

    batch: card.example_batch(config, "cpu", seed) if None. target: "cpu" or "cuda" (then multi-tensor Adam
    unless foreach says otherwise, and the fused dropout mask). kernel_scratch: None probes on a "cpu" target;
    False where the kernels are the slow conversion path (foxlib.memory.cpu_support). A prediction from the
    card's own batch is kept for the process (the preflight, the measurement and 8.13 predict the same steps),
    unless another profiler runs."""
    if target not in ("cpu", "cuda"):
        raise ValueError(f"unknown target {target!r}; valid: cpu, cuda")
    if target == "cuda" and foreach is None:
        foreach = True
    scratch = target == "cpu" if kernel_scratch is None else kernel_scratch
    key = (card.name, id(card), repr(config), precision, optimizer, foreach, seed, target, scratch)
    if batch is None and key in _PREDICTED:
        return _PREDICTED[key]
    keep = batch is None and not torch._C._autograd._profiler_enabled()
    batch = card.example_batch(config, device="cpu", seed=seed) if batch is None else batch
    profile = predict_model_step(lambda: card.build(config), batch, card.loss, precision=precision,
                                 optimizer=optimizer, lr=card.learning_rate(config), foreach=foreach,
                                 buffers=card.buffers(batch), dropout="fused" if target == "cuda" else "cpu",
                                 kernel_scratch=scratch)
    if keep:
        _PREDICTED[key] = profile
    return profile
