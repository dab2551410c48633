"""predict_step: the memory of one training step, by category, predicted without running it.

The model is built, and the step runs, under `torch._subclasses.fake_tensor.FakeTensorMode`:
every tensor the model, autograd and the optimizer create is a fake tensor (shape, dtype,
strides and a storage of the right size on the meta device), so no memory is allocated for
parameters, gradients, optimizer state or activations, whatever the configuration. Only the
batch is real: `card.example_batch` reads the market data on the CPU, and fake mode converts
its tensors (once each, memoised) where the step uses them. The result is profile_step's
MemoryProfile, with device "predicted (cpu)" and loss NaN (fake tensors have no values).

How each category is counted (the definitions of profile_step, memory.md):
- parameters, gradients, optimizer state, batch: unique storages of the tensors. Every fake
  storage has data_ptr 0, so `accounting.storage_key` cannot tell them apart; here a storage
  is keyed by its identity (`untyped_storage()._cdata`, the StorageImpl, shared by every view).
- activations: `accounting.SavedTensorTracker`'s saved-tensor hooks work on fake tensors
  unchanged; only its key is replaced (`_SavedTensorTracker`). Live storages after the forward.
- peaks: `LiveStorages`, a TorchDispatchMode on top of the fake mode (the approach of
  torch.distributed._tools.mem_tracker.MemTracker). An op's output storage that is new (not
  seen before, not one of the op's inputs: views and in-place ops allocate nothing) is added
  to a running total. Frees: a weakref with a callback on the storage's Python object.
  PyTorch keeps that object alive exactly as long as the storage (PyObject preservation), so
  the callback runs when the last tensor or view of it dies -- between two ops -- and the
  total is lowered before the next op's outputs are added. forward_peak and peak are
  "live at the start + largest running total", profile_step's CPU definition.

The warm-up (profile_step runs one; the optimizer makes its state at its first step):
by default the tracked step's forward and backward run first, then an untracked optimizer
step makes the state, then the tracked optimizer step runs; the state is counted as live from
the start. warmup="full" runs a whole untracked step first instead; both give identical
results on the four cards (fp32, fp16, both Adam implementations) and "optimizer" is ~40 %
faster. A model with lazy modules always gets the full warm-up.

The optimizer. torch.optim.Adam's implementation depends on the device: on the CPU (what
profile_step's callers get there, foreach=None) the for-loop one, whose temporaries are
sqrt(v) and its quotient for ONE parameter at a time (2 x the parameter, next to the previous
parameter's denominator); on CUDA the multi-tensor ("foreach") one, whose _foreach_sqrt holds
a temporary the size of ALL parameters at once -- what one earlier prediction missed (15 %
under the measured peak, memory.md). Neither needs a formula: the real optimizer step runs on
the fake parameters and its temporaries pass through the dispatch mode like any op.
foreach=None predicts the CPU default, foreach=True the multi-tensor step (tests/test_predict.py
checks both against hand counts and measurements). fp16 uses a GradScaler like profile_step;
its inf/NaN check needs values (`.item()`), so here the optimizer step is always taken.

What a dispatch mode over fake tensors gets wrong, and how it is corrected (found by comparing
each card's op-by-op log with the CPU allocator's events):
- kernels whose output storage is not what the meta kernel's shape says (RealKernelSizes):
  the CPU LSTM's oneDNN workspace (uint8, saved for backward, 0 bytes from the meta kernel,
  209 kB = 12 % of the TFT's activations): its size is probed with one real call of the layer
  on zeros, cached per shape; LayerNorm/GroupNorm under autocast save float32 mean and rstd
  (meta: 16-bit); mse_loss, smooth_l1_loss, binary_cross_entropy, ... return the mean as a
  0-dim view of their elementwise buffer, which lives as long as the loss (4 kB for the
  Mamba-2, 512 B for the DQN);
- gradient accumulation: the autograd engine adds a second gradient into its buffer in place
  in a real step, out of place under any dispatch mode or with fake tensors
  (at::isTensorSubclassLike), which adds a transient buffer (+133 kB, 7 % of the TFT's bf16
  peak). LiveStorages recognises those adds and counts them as in place (see its docstring);
- torch.tensor(...) inside the step (allocated before dispatch) is counted when fake mode
  lifts it; torch.as_tensor(numpy) (numpy's memory, not the allocator's) is not;
- memory a CPU kernel allocates and frees inside itself, which no dispatch mode sees and
  which depends on the CPU: oneDNN's scratchpad of a 16-bit matmul (none on the AVX2 path,
  14-26 kB a call on the small presets with avx512_bf16 and with AMX, of different sizes:
  without it a bf16 DQN step was predicted 11-12 % under its measured peak there), the LSTM's
  and the convolution's scratch, the float32 accumulator of a 16-bit mean (51 kB, 3.3 % of
  the memory-efficient TFT's bf16 forward peak). For the ops in SCRATCH_OPS each call's
  argument shapes, strides and dtypes are recorded, and after the step one profiler session
  runs each distinct call once for real on zeros (probe_kernel_scratch, cached per process):
  the bytes live before the call plus the call's own high-water mark (outputs and scratch)
  can raise the peaks (LiveStorages.add_kernel_scratch). Like the LSTM workspace, this is
  this CPU's figure (its ISA, threads and oneDNN), the one the step runs on.

Prediction vs CPU measurement, the four "small" presets in fp32, bf16 and fp16, on the AVX2,
avx512_bf16 (DNNL_MAX_CPU_ISA=AVX512_CORE_BF16) and AMX paths (tests/test_predict.py,
scripts/test-isa.sh): parameters, gradients, optimizer state, batch and activations equal to
the byte; forward_peak and peak equal to within 20 bytes. What is left is what the CPU
allocator sees and no dispatch mode can:
- Python numbers passed to ops become 8-byte 0-dim tensors before dispatch (a few bytes
  when one is alive at the peak);
- scratch of kernels outside SCRATCH_OPS (the CPU flash-attention backward of the TFT's
  memory_efficient path, group_norm's backward: 164 kB, layer_norm's backward: 10 kB), away
  from the peak on these presets;
- torch.utils.checkpoint stashes the CPU RNG state (torch.get_rng_state: 5,056 bytes per
  checkpointed segment, made by no op): 10-15 kB (0.1-0.8 %) on the checkpointed presets.
So the prediction is a lower bound of profile_step's CPU peak, tight on these models; the
reports and the tests hold it to foxlib.memory.tolerances's named tolerances, not to the byte.

Limitations: the prediction models the CPU (CPU kernels, CPU autocast op lists, oneDNN);
on CUDA the cuDNN/cuBLAS workspaces (the cuDNN LSTM's reserve and workspace among them), the
allocator's 512-byte rounding and caching, and the CUDA context are outside it, and the CPU
kernels' scratch is not added (predict_step(target="cuda")). Code that reads tensor values
cannot run on fake tensors (the loss's finiteness is not checked; torch.distributions'
argument validation is switched off during a prediction). The batch and the probes (the LSTM
workspace; the kernels' scratch, one call at a time, freed at once, calls whose inputs exceed
PROBE_MAX_BYTES not probed) are the only real memory.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import weakref
from typing import Any, Callable, Iterable, Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten

from foxlib.memory import accounting
from foxlib.memory.profile import MemoryProfile, autocast, check_precision
from foxlib.memory.tolerances import LSTM_MARK

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
        super().__init__(torch.nn.Module())  # (the parent would read the fake parameters' data_ptr)
        self._model = model
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


_AT = torch.ops.aten
_LIFT_FRESH = _AT.lift_fresh.default  # the identity in eager mode; fake mode converts its real input


class LiveStorages(TorchDispatchMode):
    """Running total of the bytes of storages created by ops while the mode is active.

    An op's output storage not seen before (and not an input's: views and in-place ops
    allocate nothing) is added; a weakref callback on the storage's Python object subtracts
    it when it dies (frees happen between ops, so the total is exact at every op boundary).
    `peak` is the largest total; `mark()` remembers the peak so far (the forward's).
    Works on real and on fake tensors.

    Gradient accumulation. When two gradients flow into one input of a backward node, the
    autograd engine adds them in its InputBuffer: in place (old.add_(new)) when it holds the
    last reference to a dense `old`, out of place (old + new) otherwise -- and always out of
    place when a dispatch mode is active or the tensors are fake (at::isTensorSubclassLike).
    So under this mode every accumulation allocates a new buffer while both operands still
    live, a transient the real step does not have (seen: +133 kB, 7 % of the TFT's bf16 peak,
    from the per-variable select_backward sums of a VSN). `watch_backward(loss)` puts a
    pre-hook and a post-hook on every node of the graph: an aten.add.Tensor between a node's
    post-hook and the next node's pre-hook is such an accumulation, and when its first operand
    is dense and dies at once (the engine held the last reference) it is counted as the real
    engine does it, in place: no new bytes at that instant."""

    def __init__(self, fake_mode: FakeTensorMode | None = None):
        super().__init__()
        self.fake_mode = fake_mode
        self.live = 0
        self.peak = 0
        self.marked_peak: int | None = None
        self.ops = 0
        self.accumulations_in_place = 0
        self._storages: dict[int, list] = {}  # StorageImpl address -> [weakref, nbytes]
        self._open = True
        self._between_nodes = False
        self._in_backward = False
        self._pending = None  # (live after an accumulation, weakref to its first operand's storage)
        self._handles = []
        self._paused = False
        # calls of SCRATCH_OPS: (probe key, live bytes before the op, in the forward?)
        self.kernel_calls: list[tuple[tuple, int, bool]] = []

    # -- storages
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

    # -- gradient accumulation
    def _settle(self) -> None:
        """Decide the last accumulation: in place if its first operand died right after it."""
        if self._pending is not None:
            live_after, operand = self._pending
            self._pending = None
            if operand() is None:
                self.accumulations_in_place += 1
            else:
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
            self._handles.append(node.register_prehook(self._node_starts))
            self._handles.append(node.register_hook(self._node_ends))
            stack.extend(fn for fn, _ in node.next_functions)

    def _is_accumulation(self, func, args, kwargs, out) -> bool:
        return (self._between_nodes and func is _AT.add.Tensor and not kwargs and len(args) == 2
                and all(isinstance(a, torch.Tensor) for a in args)
                and args[0].shape == args[1].shape == out.shape and args[0].dtype == out.dtype
                and args[0].layout == torch.strided and is_non_overlapping_and_dense(args[0]))

    # -- the mode
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._paused:
            return func(*args, **(kwargs or {}))
        self._settle()
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        live_before = self.live
        out = func(*args, **kwargs)
        self.ops += 1
        if func in SCRATCH_OPS and not kwargs:
            self.kernel_calls.append(((func, _probe_spec(args)), live_before, self.marked_peak is None))
        if func is _LIFT_FRESH:
            # torch.tensor(data) / torch.as_tensor(numpy): the tensor was made before this op,
            # outside every mode. torch.tensor allocated it (a resizable storage: count it once
            # it is seen here); a tensor on numpy memory is not the allocator's (not resizable)
            source = args[0]
            if self.fake_mode is not None and not is_fake(source) and source.untyped_storage().resizable():
                self._track(out, set())
        else:
            inputs = {_storage_address(t) for t in tensors}
            if self.fake_mode is not None:
                # a real input (the batch) is converted to a fake tensor by the fake mode, once
                # (memoised): its fake storage is the input's memory, not a new allocation
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

    def add_kernel_scratch(self, inner_peaks: Mapping[tuple, int]) -> int:
        """Raise the peaks by what the real kernels of the recorded SCRATCH_OPS calls hold inside
        themselves: at such a call the allocator holds the bytes live before it plus the call's
        own high-water mark (outputs and scratch; `inner_peaks`, from probe_kernel_scratch).
        Returns how many calls raised a peak."""
        raised = 0
        for key, live_before, in_forward in self.kernel_calls:
            at = live_before + inner_peaks.get(key, 0)
            if at > self.peak:
                self.peak, raised = at, raised + 1
            if in_forward and self.marked_peak is not None and at > self.marked_peak:
                self.marked_peak = at
        return raised

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


# ----------------------------------------------------------------------------- kernel scratch

# ops whose CPU kernel may allocate memory inside itself and free it before it returns (a fake
# or meta kernel allocates nothing, and no dispatch mode sees it): oneDNN's scratchpad of the
# 16-bit matmuls (mm/addmm/bmm/baddbmm under autocast: 14-26 kB a call on these models, and
# whether there is one depends on the CPU: on the AVX2 path a 16-bit matmul has none, on the
# avx512_bf16 path and with AMX it has one, of different sizes), the LSTM's and the
# convolution's scratch, and the float32 accumulator of a 16-bit mean
SCRATCH_OPS = frozenset({_AT.mm.default, _AT.addmm.default, _AT.bmm.default, _AT.baddbmm.default,
                         _AT.mkldnn_rnn_layer.default, _AT.mkldnn_rnn_layer_backward.default,
                         _AT.convolution.default, _AT.convolution_backward.default, _AT.mean.dim})
_PROBE_MARK = "foxlib::probe_kernel_scratch"
PROBE_MAX_BYTES = 64 * 2**20
"""A call whose real inputs would exceed this many bytes is not probed (its scratch counts 0), so
that a prediction of a configuration too large for this machine allocates little. oneDNN's
scratchpads are blocking buffers, small beside such tensors."""
_inner_peaks: dict[tuple, int] = {}  # probe key -> bytes (this process's CPU, threads and libraries)


def _probe_spec(x):
    """Hashable description of an op's arguments for a probe: tensors by (shape, stride, dtype)
    (a transposed operand can make a kernel copy it), lists element-wise, the rest as it is."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), tuple(x.stride()), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_probe_spec(v) for v in x)
    if isinstance(x, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return ("const", str(x), x)
    return x


def _probe_bytes(spec) -> int:
    """Bytes of the real zeros _probe_args makes for a spec."""
    if isinstance(spec, tuple) and len(spec) == 4 and spec[0] == "tensor":
        _, shape, stride, dtype = spec
        n = 0 if 0 in shape else 1 + sum((d - 1) * st for d, st in zip(shape, stride))
        return n * dtype.itemsize
    if isinstance(spec, tuple) and not (len(spec) == 3 and spec[0] == "const"):
        return sum(_probe_bytes(v) for v in spec)
    return 0


def _probe_args(spec):
    """Real zeros for a _probe_spec: each tensor on a storage just large enough for its strides."""
    if isinstance(spec, tuple) and len(spec) == 4 and spec[0] == "tensor":
        _, shape, stride, dtype = spec
        n = 0 if 0 in shape else 1 + sum((d - 1) * st for d, st in zip(shape, stride))
        return torch.zeros(n, dtype=dtype).as_strided(shape, stride)
    if isinstance(spec, tuple) and len(spec) == 3 and spec[0] == "const":
        return spec[2]
    if isinstance(spec, tuple):
        return [_probe_args(v) for v in spec]
    return spec


def probe_kernel_scratch(keys: Iterable[tuple]) -> dict[tuple, int]:
    """For each (op, _probe_spec of its arguments): the largest total of bytes the real CPU
    kernel holds while it runs (its outputs and its scratch), measured from the CPU allocator's
    events (torch.profiler, profile_memory=True) of one call on zeros, after one call that warms
    up oneDNN's primitive cache, outside every mode and autocast. Cached per key for the process:
    the size is this CPU's (its ISA, its thread count, its oneDNN), which is the one the predicted
    step runs on. All keys not yet known are probed in one profiler session. A key whose probe
    fails, or whose inputs exceed PROBE_MAX_BYTES, counts 0; none is probed while another
    profiler runs (then the result is not cached)."""
    keys = set(keys)
    for k in keys:
        if k not in _inner_peaks and _probe_bytes(k[1]) > PROBE_MAX_BYTES:
            _inner_peaks[k] = 0
    todo = sorted((k for k in keys if k not in _inner_peaks), key=repr)
    if todo and not torch._C._autograd._profiler_enabled():
        from torch._C._profiler import _EventType
        from torch.profiler import ProfilerActivity, profile
        import warnings

        failed = set()
        with _disable_current_modes(), torch.enable_grad(), torch.autocast("cpu", enabled=False), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                for key in todo:
                    func, spec = key
                    try:
                        args = _probe_args(spec)
                        func(*args)  # warm-up: oneDNN creates and caches its primitive
                        with torch.profiler.record_function(_PROBE_MARK):
                            out = func(*args)
                        del out, args
                    except Exception:  # an argument the zeros cannot stand for: count nothing
                        failed.add(key)
                        with torch.profiler.record_function(_PROBE_MARK):
                            pass
        peaks = []

        def allocations(e, acc):
            if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu":
                acc.append((e.start_time_ns, e.extra_fields.alloc_size))
            for c in e.children:
                allocations(c, acc)
            return acc

        def walk(e):
            if e.name == _PROBE_MARK:
                total = best = 0
                for _, size in sorted(allocations(e, [])):
                    total += size
                    best = max(best, total)
                peaks.append((e.start_time_ns, best))
                return
            for c in e.children:
                walk(c)

        for root in prof.profiler.kineto_results.experimental_event_tree():
            walk(root)
        peaks.sort()
        if len(peaks) == len(todo):
            for key, (_, best) in zip(todo, peaks):
                _inner_peaks[key] = 0 if key in failed else best
    return {k: _inner_peaks.get(k, 0) for k in keys}


# elementwise losses whose CPU kernel, with a reduction, may return the scalar as a view into
# the elementwise buffer (so the buffer lives as long as the loss); checked at run time
_REDUCING_LOSSES = {_AT.mse_loss.default, _AT.smooth_l1_loss.default, _AT.huber_loss.default,
                    _AT.binary_cross_entropy.default, _AT.soft_margin_loss.default}


@functools.lru_cache(maxsize=64)
def loss_keeps_elementwise_buffer(func, spec: tuple) -> bool:
    """Does the real CPU kernel of `func` (called with these non-tensor arguments) return a
    scalar that holds the whole elementwise buffer? Measured on 2 x 3 zeros, once per spec."""
    with _disable_current_modes(), torch.no_grad(), torch.autocast("cpu", enabled=False):
        args = [torch.zeros(2, 3, dtype=a[2]) if isinstance(a, tuple) and a and a[0] == "tensor" else a
                for a in spec]
        out = func(*args)
        return out.dim() == 0 and out.untyped_storage().nbytes() >= 6 * out.element_size()


_NORMS = {_AT.native_layer_norm.default, _AT.native_group_norm.default}


@functools.lru_cache(maxsize=64)
def norm_statistics_dtype(func, input_dtype: torch.dtype, weight_dtype: torch.dtype | None,
                          normalized: tuple[int, ...]) -> torch.dtype:
    """dtype of the mean and rstd that the real CPU kernel of native_layer_norm/group_norm
    returns (and autograd saves). With a 16-bit input and float32 weights (what autocast
    makes of a LayerNorm) they are float32; the meta kernels say the input's dtype.
    Measured on a 1-row input once per (op, dtypes)."""
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
    """Under fake mode, gives the outputs of a few CPU kernels the storage size the real kernel
    gives them, where that is not what their shape says (the meta kernels follow the shape):

    - aten.mkldnn_rnn_layer (the CPU LSTM): its uint8 workspace, saved for backward, has the
      size oneDNN picks (onednn_rnn_workspace_bytes); the meta kernel returns it empty;
    - native_layer_norm / native_group_norm with a 16-bit input and float32 weights (a
      LayerNorm under autocast): the saved mean and rstd are float32, not the input's dtype;
    - mse_loss, smooth_l1_loss, binary_cross_entropy, ... with a reduction: the CPU kernel
      writes the mean into its elementwise buffer and returns a 0-dim view of it, so the
      scalar loss holds B x ... bytes until it dies (after backward).

    Sits between the fake mode and LiveStorages, so that both the live-storage count and the
    saved-tensor hooks see the real sizes. `lstm_calls` counts the LSTM layers run."""

    lstm_calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if kwargs:
            return out
        if func is _MKLDNN_RNN:
            self.lstm_calls += 1
            nbytes = onednn_rnn_workspace_bytes(tuple(_spec(a) for a in args))
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
            if loss_keeps_elementwise_buffer(func, tuple(_spec(a) for a in args)):
                shape = torch.broadcast_shapes(*(a.shape for a in args if isinstance(a, torch.Tensor)))
                buffer = torch.empty(shape, dtype=out.dtype, device=out.device)
                out = buffer.view(-1)[0]
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

    kernel_scratch: add what the CPU kernels of SCRATCH_OPS hold inside themselves (oneDNN's
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

        # mirrors profile_step's step(): same statements, so the same lifetimes
        def step(tracker=None, on_forward_end=None, make_state=False):
            opt.zero_grad(set_to_none=True)
            with autocast(device, precision), (tracker if tracker is not None else contextlib.nullcontext()):
                loss = loss_fn(model, batch)
            if on_forward_end is not None:
                on_forward_end()
                live.watch_backward(loss)
            if scaler is not None:
                scaler.scale(loss).backward()
                if make_state:
                    with live.paused():
                        opt.step()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                if make_state:
                    with live.paused():
                        opt.step()
                opt.step()

        if warmup == "full":
            step()
        elif scaler is not None:
            scaler._lazy_init_scale_growth_tracker(device)  # what the warm-up's scale() would make
        opt.zero_grad(set_to_none=True)
        gc.collect()

        tracker = _SavedTensorTracker(model)
        live = LiveStorages(fake_mode)

        def on_forward_end():
            seen["activations"], seen["by_module"] = tracker.live_bytes(), tracker.by_module()
            live.mark()

        with live:
            step(tracker, on_forward_end, make_state=warmup == "optimizer")
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


def predict_step(card, config, *, precision: str = "fp32", optimizer: str = "adam",
                 foreach: bool | None = None, warmup: str = "optimizer", seed: int = 0,
                 batch: Any = None, target: str = "cpu") -> MemoryProfile:
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
    """
    if target not in ("cpu", "cuda"):
        raise ValueError(f"unknown target {target!r}; valid: cpu, cuda")
    if target == "cuda" and foreach is None:
        foreach = True
    if batch is None:
        batch = card.example_batch(config, device="cpu", seed=seed)
    return predict_model_step(lambda: card.build(config), batch, card.loss, precision=precision,
                              optimizer=optimizer, lr=card.learning_rate(config), foreach=foreach, warmup=warmup,
                              buffers=card.buffers(batch), dropout="fused" if target == "cuda" else "cpu",
                              kernel_scratch=target == "cpu")
