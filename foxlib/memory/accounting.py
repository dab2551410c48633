"""Exact byte accounting of tensors, keyed by storage so that views and re-saves count once.

Every function here knows nothing about models: it is handed tensors, modules or optimizers.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

StorageKey = Callable[[torch.Tensor], tuple]  # tells storages apart: storage_key, or predict.py's storage_id


def storage_key(t: torch.Tensor) -> tuple[str, int, int]:
    """(device, data_ptr, nbytes) of the tensor's untyped storage: equal for every view of it."""
    s = t.untyped_storage()
    return (str(t.device), s.data_ptr(), s.nbytes())


def unique_bytes(tensors: Iterable[torch.Tensor | None], key: StorageKey = storage_key) -> int:
    """Bytes of the distinct storages behind `tensors` (views and repeats counted once), told apart by `key`."""
    return sum(k[2] for k in {key(t) for t in tensors if t is not None})


def _leaves(obj: Any, kind: type) -> Iterator:
    """Every `kind` inside nested dicts, lists, tuples and objects with __dict__ (modules and classes excluded)."""
    if isinstance(obj, kind):
        yield obj
    elif isinstance(obj, (dict, list, tuple)):
        for v in obj.values() if isinstance(obj, dict) else obj:
            yield from _leaves(v, kind)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (torch.nn.Module, type, torch.Tensor)):
        yield from _leaves(vars(obj), kind)


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    return _leaves(obj, torch.Tensor)


def iter_arrays(obj: Any) -> Iterator[np.ndarray]:
    """Every numpy array inside nested containers (host-memory buffers)."""
    return _leaves(obj, np.ndarray)


def array_bytes(obj: Any) -> int:
    """The numpy arrays inside `obj` (host memory), each base array once."""
    bases = (a if a.base is None else a.base for a in iter_arrays(obj))
    return sum(a.nbytes for a in {id(a): a for a in bases}.values())


def parameter_bytes(model: torch.nn.Module, key: StorageKey = storage_key) -> int:
    """Weights and registered buffers, each storage once."""
    return unique_bytes(list(model.parameters()) + list(model.buffers()), key)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer, key: StorageKey = storage_key) -> int:
    return unique_bytes(iter_tensors(list(optimizer.state.values())), key)


def step_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Any,
               key: StorageKey = storage_key) -> dict[str, int]:
    """A step's persistent categories and its batch in bytes (n_parameters: elements), under ProfiledStep's names."""
    return {"n_parameters": sum(p.numel() for p in model.parameters()), "parameters": parameter_bytes(model, key),
            "gradients": unique_bytes((p.grad for p in model.parameters()), key),
            "optimizer_state": optimizer_state_bytes(optimizer, key), "batch": unique_bytes(iter_tensors(batch), key)}


def buffer_bytes(buffers: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per named RL buffer: its bytes and where it lives ("device" or "host")."""
    out = {}
    for name, obj in buffers.items():
        tensors = list(iter_tensors(obj))
        device_bytes = unique_bytes(t for t in tensors if t.device.type != "cpu")
        host_bytes = unique_bytes(t for t in tensors if t.device.type == "cpu") + array_bytes(obj)
        lives_in = "+".join(where for where, n in (("device", device_bytes), ("host", host_bytes)) if n) or "none"
        out[name] = {"bytes": device_bytes + host_bytes, "lives_in": lives_in,
                     "device_bytes": device_bytes, "host_bytes": host_bytes}
    return out


class SavedTensorTracker:
    """The storages autograd saves for backward (parameters and buffers excluded), by the model's direct child
    that saved them: a context around forward + loss; read live_bytes() and by_module() while the graph is held.
    `key` tells storages apart (predict.py's storage_id tells fake ones apart by identity)."""

    def __init__(self, model: torch.nn.Module, key: StorageKey = storage_key):
        self.key = key
        self._exclude = {self.key(t) for t in list(model.parameters()) + list(model.buffers())}
        self._saved: dict[tuple[str, int, int], tuple[StorageWeakRef, str]] = {}
        self._where = ["loss"]  # label of the code now running
        self._handles = []
        self._model = model
        self.saves = 0  # how many times something was saved (before de-duplication)

    def _pack(self, t: torch.Tensor):
        self.saves += 1
        if t.layout in (torch.strided, torch.sparse_coo):
            try:
                key = self.key(t)
            except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
                return t
            if key not in self._exclude:
                old = self._saved.get(key)
                if old is None or old[0].expired():
                    self._saved[key] = (StorageWeakRef(t.untyped_storage()), self._where[-1])
        return t

    def __enter__(self):
        self._where = ["loss"]  # outside the model's forward: the loss function
        for name, module in [("(model body)", self._model), *self._model.named_children()]:
            self._handles.append(module.register_forward_pre_hook(lambda m, a, name=name: self._where.append(name)))
            self._handles.append(module.register_forward_hook(lambda m, a, o: (self._where.pop(), None)[1]))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def live(self) -> dict[tuple[str, int, int], str]:
        return {k: where for k, (ref, where) in self._saved.items() if not ref.expired()}

    def live_bytes(self) -> int:
        return sum(k[2] for k in self.live())

    def by_module(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for key, where in self.live().items():
            out[where] += key[2]
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))
