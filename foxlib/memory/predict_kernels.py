"""Real CPU kernels' output sizes under fake mode, for foxlib/memory/predict.py: RealKernelSizes, a
TorchDispatchMode between the fake mode and predict_tracing.LiveStorages, gives the outputs of a few
CPU kernels the storage size the real kernel gives them where that is not what the meta kernel's
shape says (oneDNN's LSTM workspace, the float32 statistics of a 16-bit LayerNorm/GroupNorm, the
elementwise buffer a reducing loss keeps); each size is measured once on small real zeros and
cached (tests/test_predict.py compares the predictions with profile_step's measurements)."""
from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

_AT = torch.ops.aten
_MKLDNN_RNN = _AT.mkldnn_rnn_layer.default


# ----------------------------------------------------------------------------- oneDNN workspaces


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

    Its size is oneDNN's choice (page-aligned pieces), and the meta kernel returns an empty
    one. So it is measured: one real call of aten.mkldnn_rnn_layer on zeros of the same shapes
    and dtypes, outside every mode and autocast, on tensors that require no grad; cached per
    spec. Real memory a prediction uses beyond the batch: that layer's input, weights, output
    and workspace, freed at once."""
    # grad mode on (the kernel keeps no workspace under no_grad); the zeros require no grad
    with _disable_current_modes(), torch.enable_grad(), torch.autocast("cpu", enabled=False):
        args = [_zeros(a) for a in spec]
        out = _MKLDNN_RNN(*args)
        return out[3].untyped_storage().nbytes()


# ----------------------------------------------------------------------------- sizes the meta kernels get wrong

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
