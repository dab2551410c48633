"""Fake-tensor tracing for foxlib/memory/predict.py: which storages a step's tensors use and when
ops create and free them, on real or fake tensors. Storages are keyed by identity (storage_id: the
StorageImpl, shared by every view), since every fake storage has data_ptr 0;
FakeSavedTensorTracker is foxlib.memory.accounting.SavedTensorTracker with that key; LiveStorages,
a TorchDispatchMode above the fake mode, keeps the running total of live storage bytes, its peak,
and the calls of predict_scratch.SCRATCH_OPS whose real kernels' scratch is probed afterwards
(tests/test_predict.py checks the counts against profile_step's)."""
from __future__ import annotations

import contextlib
import weakref
from typing import Iterable, Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from foxlib.memory import accounting
from foxlib.memory.predict_scratch import SCRATCH_OPS, probe_spec


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


class FakeSavedTensorTracker(accounting.SavedTensorTracker):
    """accounting.SavedTensorTracker keyed by storage identity instead of data_ptr (fake-safe).

    Same attribution to the model's direct children, same exclusion of parameters and buffers,
    same count of live storages only."""

    storage_key = staticmethod(storage_id)


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
    live, a transient the real step does not have (the TFT's VSNs sum per-variable
    select_backward gradients so). `watch_backward(loss)` puts a
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
            self.kernel_calls.append(((func, probe_spec(args)), live_before, self.marked_peak is None))
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

    def add_kernel_scratch(self, inner_peak_bytes: Mapping[tuple, int]) -> int:
        """Raise the peaks by what the real kernels of the recorded SCRATCH_OPS calls hold inside
        themselves: at such a call the allocator holds the bytes live before it plus the call's
        own high-water mark (outputs and scratch; `inner_peak_bytes`, from probe_kernel_scratch).
        Returns how many calls raised a peak."""
        raised = 0
        for key, live_before, in_forward in self.kernel_calls:
            at = live_before + inner_peak_bytes.get(key, 0)
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
