"""NVML's figure of this process: read (`NvmlProcessReader`), sampled by a background thread and after every
step and round (`Sampler`), its largest sample checked against the card (`nvml_peak`). Where NVML does not
list this process nothing is guessed: the check is not applicable and says why."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any, Callable

import torch

from foxlib.memory.cuda import nvml_handle

NVML_CHECK = "largest NVML process figure ≤ card"
SAMPLE_INTERVAL_S = 0.015  # the background sampler's period; a sample is also taken after every step and round


@dataclasses.dataclass(frozen=True)
class NvmlPeak:
    """NVML_CHECK from a series of samples (bytes; None = no figure)."""
    applicable: bool
    max_bytes: int | None
    card_bytes: int
    n_samples: int
    n_missing: int
    note: str

    @property
    def passed(self) -> bool | None:
        return None if not self.applicable else bool(self.max_bytes <= self.card_bytes)

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.max_bytes is None else self.card_bytes - self.max_bytes


def nvml_peak(samples: list[int | None], card_bytes: int, note: str = "") -> NvmlPeak:
    """The largest sample against the card; not applicable when no sample has a figure (`note` says why)."""
    values = [int(v) for v in samples if v is not None]
    missing = len(samples) - len(values)
    if not values:
        why = note or ("no samples were taken" if not samples else "NVML gave no per-process figure")
        return NvmlPeak(False, None, int(card_bytes), len(samples), missing, why)
    text = note + (f"; {missing} of {len(samples)} samples had no figure" if missing else "")
    return NvmlPeak(True, max(values), int(card_bytes), len(samples), missing, text.strip("; "))


class Sampler:
    """Samples `reader()` every `interval_s` in a background thread (running inside `with`, a sample taken on entry
    and exit) and on `sample()`: (seconds, phase, bytes). A read that raises is a None sample; the first error is
    kept in `error`."""

    def __init__(self, reader: Callable[[], int | None], interval_s: float = SAMPLE_INTERVAL_S):
        import threading
        self.reader, self.interval_s = reader, float(interval_s)
        self.samples: list[tuple[float, str, int | None]] = []
        self.phase = "start"
        self.error: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foxlib-nvml-sampler", daemon=True)
        self._t0 = time.perf_counter()

    def sample(self) -> int | None:
        try:
            value = self.reader()
        except Exception as exc:  # noqa: BLE001 - a failed read is a missing sample, said once
            value = None
            if self.error is None:
                self.error = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.samples.append((time.perf_counter() - self._t0, self.phase, None if value is None else int(value)))
        return value

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "Sampler":
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def values(self) -> list[int | None]:
        with self._lock:
            return [v for _, _, v in self.samples]


class NvmlProcessReader:
    """This process's used GPU memory from NVML (bytes); None where NVML does not list this process (in a
    container its PIDs may not be ours): `note` says so."""

    def __init__(self, device: torch.device):
        self.handle, self.pynvml, self.note = None, None, ""
        try:
            import pynvml
        except ImportError:
            self.note = "pynvml (nvidia-ml-py) is not installed"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - pynvml.NVMLError and driver-library errors
            self.note = f"NVML could not start: {exc}"
            return
        self.pynvml = pynvml
        try:
            self.handle = nvml_handle(pynvml, device)
            self.note = ("this process found in NVML's process list" if self() is not None else
                         f"this process (pid {os.getpid()}) is not in NVML's process list (a container's PID "
                         "namespace?): NVML's per-process figure is unavailable")
        except Exception as exc:  # noqa: BLE001
            self.close()
            self.note = f"NVML query failed: {exc}"

    def __call__(self) -> int | None:
        if self.handle is None:
            return None
        pid = os.getpid()
        return next((int(p.usedGpuMemory) for p in self.pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
                     if p.pid == pid and p.usedGpuMemory is not None), None)

    def close(self) -> None:
        if self.pynvml is not None:
            with contextlib.suppress(Exception):
                self.pynvml.nvmlShutdown()
        self.handle = self.pynvml = None


def nvml_samples(sampler: Sampler, reader_note: str) -> dict[str, Any]:
    """The series as plain data ([seconds, phase, bytes or None] per sample), and why figures are missing."""
    note = reader_note + (f"; a read failed: {sampler.error}" if sampler.error else "")
    return {"applicable": any(v is not None for v in sampler.values()), "note": note,
            "interval_s": sampler.interval_s, "samples": [[round(t, 4), ph, v] for t, ph, v in sampler.samples]}
