"""What CPU kernels allocate and free inside themselves, which no fake or meta kernel and no
dispatch mode sees, for foxlib/memory/predict.py: SCRATCH_OPS lists the ops concerned (oneDNN's
16-bit matmuls, the LSTM, convolutions, a 16-bit mean), and probe_kernel_scratch runs each
recorded call once for real on zeros under torch.profiler and returns its high-water mark, cached
per process (the figure is this CPU's: its ISA, threads and oneDNN). tests/test_predict.py
checks a probe and the PROBE_MAX_BYTES limit."""
from __future__ import annotations

from typing import Iterable

import torch
from torch.utils._python_dispatch import _disable_current_modes

_AT = torch.ops.aten

# ops whose CPU kernel may allocate memory inside itself and free it before it returns (a fake
# or meta kernel allocates nothing, and no dispatch mode sees it): oneDNN's scratchpad of the
# 16-bit matmuls (mm/addmm/bmm/baddbmm under autocast; whether there is one, and its size,
# depends on the CPU: on the AVX2 path a 16-bit matmul has none, on the avx512_bf16 path and
# with AMX it has one, of different sizes), the LSTM's and the
# convolution's scratch, and the float32 accumulator of a 16-bit mean
SCRATCH_OPS = frozenset({_AT.mm.default, _AT.addmm.default, _AT.bmm.default, _AT.baddbmm.default,
                         _AT.mkldnn_rnn_layer.default, _AT.mkldnn_rnn_layer_backward.default,
                         _AT.convolution.default, _AT.convolution_backward.default, _AT.mean.dim})
_PROBE_MARK = "foxlib::probe_kernel_scratch"
PROBE_MAX_BYTES = 64 * 2**20
"""A call whose real inputs would exceed this many bytes is not probed (its scratch counts 0), so
that a prediction of a configuration too large for this machine allocates little. oneDNN's
scratchpads are blocking buffers, small beside such tensors."""
_inner_peak_bytes: dict[tuple, int] = {}  # probe key -> bytes (this process's CPU, threads and libraries)


def probe_spec(x):
    """Hashable description of an op's arguments for a probe: tensors by (shape, stride, dtype)
    (a transposed operand can make a kernel copy it), lists element-wise, the rest as it is."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), tuple(x.stride()), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(probe_spec(v) for v in x)
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
    """Real zeros for a probe_spec: each tensor on a storage just large enough for its strides."""
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
    """For each (op, probe_spec of its arguments): the largest total of bytes the real CPU
    kernel holds while it runs (its outputs and its scratch), measured from the CPU allocator's
    events (torch.profiler, profile_memory=True) of one call on zeros, after one call that warms
    up oneDNN's primitive cache, outside every mode and autocast. Cached per key for the process:
    the size is this CPU's (its ISA, its thread count, its oneDNN), which is the one the predicted
    step runs on. All keys not yet known are probed in one profiler session. A key whose probe
    fails, or whose inputs exceed PROBE_MAX_BYTES, counts 0; none is probed while another
    profiler runs (then the result is not cached)."""
    keys = set(keys)
    for k in keys:
        if k not in _inner_peak_bytes and _probe_bytes(k[1]) > PROBE_MAX_BYTES:
            _inner_peak_bytes[k] = 0
    todo = sorted((k for k in keys if k not in _inner_peak_bytes), key=repr)
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
                _inner_peak_bytes[key] = 0 if key in failed else best
    return {k: _inner_peak_bytes.get(k, 0) for k in keys}
