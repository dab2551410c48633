"""Wave 8.13: production validation — the whole ensemble trained and served under a real 4 GB cap.

On a GPU the caching allocator is capped with `torch.cuda.set_per_process_memory_fraction` so
that the cap plus this process's CUDA context (the context is outside the cap) equals the card. An
out-of-memory error inside the cap is then a real one. The context grows as kernels and library
handles load lazily, so every library the run uses is warmed up first (`_warm_up`: each model's
training step and inference, in its precision, on the run's streams or threads), then the context
is measured (NVML per-process used − allocator reserved) and the cap set (`cap_arithmetic`). Through
training and inference a background thread samples NVML's per-process figure (`Sampler`,
`NvmlProcessReader`), also after every step and inference round; the largest sample is checked
against the card (`nvml_peak`, NVML_CHECK). Where NVML does not list this process the check is
not applicable, and says so; on the CPU it is not applicable.
The four models train in one process, interleaved round-robin (one step of each in turn, each
with its own Adam; gradients are freed after every step), then all four serve at once.

On the CPU nothing can be capped. There the cap is checked by accounting: each model's training
step is measured on its own (`foxlib.harness.measure_step.measure_model`) and the interleaved run is walked on
paper — the stepping model's step peak plus what every other model keeps between its steps. The
real CPU run stops where that accounting says the cap would be exceeded, as a GPU run would stop
at its out-of-memory error. Every such figure is labelled "not enforced (accounting)".

Names: a model's "model peak" is its own step's tensors at their largest; the ensemble's "process
figure" is the model peaks summed + the cuBLAS workspaces once per stream + the CUDA context.

`measure(...)` does the work and returns plain data (JSON-able, bytes). `record(...)` reads it (or a
measurement.json, schema 1 included) as a typed `Measurement`; everything after it turns that record
into checks, tables and charts on raw bytes and seconds, and touches no model. "depends_on" cites
(foxlib.core.provenance) the wave 8.12 results whose recommendation the TFT took.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from foxlib.core import config, provenance, results
from foxlib.core.budgets import Check
from foxlib.core.config import MB
from foxlib.core.figures import Figure
from foxlib.memory.devices import describe, environment, resolve_device, short_name
from foxlib.harness.measure_step import measure_model
from foxlib.memory import accounting
from foxlib.memory.cuda import allocator_stats, nvml_view
from foxlib.memory.profile import autocast, check_precision
from foxlib.memory.timeline import cpu_allocations
from foxlib.memory.cuda import bare_context
from foxlib.models import ENSEMBLE, MODELS
from foxlib.core.progress import progress
from foxlib.harness.recipe import StepRecipe, build_step

GIB = 2**30
RECOMMENDING_WAVE = "8.12"
INFERENCE_MODES = ("auto", "streams", "threads")
WARMUP_ROUNDS = 3
NOT_ENFORCED = "not enforced (accounting)"
TFT_CONFIG_EXAMPLE = '{"precision": "bf16", "checkpointing": "blocks", "memory_efficient": true}'
TRAIN_CHECK = "ensemble trains under the cap"
INFERENCE_CHECK = "concurrent inference fits with the headroom"


# ----------------------------------------------------------------------------- the TFT's configuration

def recommendation_file(device_short: str, reports_dir: str | Path | None = None) -> Path:
    """Where wave 8.12 writes its results (with its "recommended" configuration) for a device."""
    return Path(reports_dir or config.REPORTS_DIR) / device_short / f"wave-{RECOMMENDING_WAVE}" / results.RESULTS_FILE


def _precision_and_overrides(rec: Any, source: str) -> tuple[str, dict[str, Any]]:
    """8.12's {"precision", "tft_overrides": {...}} or the parameter's flat {"precision", field: value}."""
    if not isinstance(rec, dict):
        raise ValueError(f"tft_config from {source} must be a JSON object such as {TFT_CONFIG_EXAMPLE}, got {rec!r}")
    nested = rec.get("tft_overrides") or {}
    if not isinstance(nested, dict):
        raise ValueError(f"tft_config from {source}: tft_overrides must be an object of TFT fields, got {nested!r}")
    if "tft_overrides" in rec:  # 8.12's recommendation: its other keys (strategy, peak_bytes, reason...) describe it
        overrides = dict(nested)
    else:
        overrides = {k: v for k, v in rec.items() if k != "precision"}
    precision = rec.get("precision") or overrides.get("precision") or "fp32"
    overrides.pop("precision", None)
    try:
        check_precision(precision)
    except ValueError as exc:
        raise ValueError(f"tft_config from {source}: {exc}") from None
    return precision, overrides


def resolve_tft(tft_config: str, preset: str, device_short: str,
                reports_dir: str | Path | None = None) -> dict[str, Any]:
    """The TFT to validate: {"config": TFTConfig, "precision", "overrides", "source", "recommended", "depends_on"}.

    "auto": wave 8.12's recommendation for this device if its report exists, else the plain fp32
    TFT of the preset (and "source" says so). Otherwise a JSON object, e.g. TFT_CONFIG_EXAMPLE.
    An unknown TFT field or precision is a ValueError naming the valid ones. "depends_on" cites
    (foxlib.core.provenance.cite: path, revision, sha256) the 8.12 results file whose recommendation was taken."""
    text = (tft_config or "").strip()
    recommended = False
    depends_on: list[dict[str, Any]] = []
    if text in ("", "auto"):
        path = recommendation_file(device_short, reports_dir)
        rec: Any = {}
        if not path.is_file():
            source = (f"fallback: no wave {RECOMMENDING_WAVE} report for device {device_short!r} ({path}); "
                      f"the plain fp32 TFT of preset {preset!r}")
        else:
            res = results.read_json(path)  # ValueError when truncated: a broken file is an error, not a fallback
            rec = res.get("recommended")
            if rec:
                recommended = True
                depends_on.append(provenance.cite(path, res))
                source = (f"wave {RECOMMENDING_WAVE}'s recommendation ({path}, generated "
                          f"{res.get('generated_at', '?')}, verdict {res.get('verdict', '?')})")
            else:
                rec = {}
                source = (f"fallback: wave {RECOMMENDING_WAVE}'s report ({path}) holds no \"recommended\" "
                          f"configuration (verdict {res.get('verdict', '?')}); the plain fp32 TFT of preset {preset!r}")
    else:
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tft_config must be 'auto' or a JSON object such as {TFT_CONFIG_EXAMPLE}; "
                             f"got {text!r} ({exc})") from None
        source = "the tft_config parameter"
    precision, overrides = _precision_and_overrides(rec, source)
    try:
        cfg = MODELS["tft"].config(preset, **overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"tft_config from {source}: {exc}") from None
    return {"config": cfg, "precision": precision, "overrides": overrides, "source": source,
            "recommended": recommended, "depends_on": depends_on}


# ----------------------------------------------------------------------------- the accounting (CPU)

def resident_bytes(profile: dict[str, Any], stepped: bool) -> int:
    """What a model keeps between its steps: weights, its batch/buffers on the device and, once it
    has stepped, Adam's state (gradients are freed after each step)."""
    return profile["live_before_step"] - (0 if stepped else profile["optimizer_state"])


def account_training(profiles: dict[str, dict[str, Any]], order: list[str], steps: int, cap: int) -> dict[str, Any]:
    """The interleaved run on paper, from each model's measured step: loading the models one by one,
    then for each step of each model in turn its step peak plus what the others keep. Stops at the
    first point that would exceed `cap` ("oom", with what would have been live there)."""
    out: dict[str, Any] = {"setup_bytes": 0, "steps": [], "oom": None}
    loaded = 0
    for name in order:
        loaded += resident_bytes(profiles[name], False)
        if loaded > cap:
            out["setup_bytes"] = loaded
            out["oom"] = _accounting_oom("setup", name, None, loaded, cap)
            return out
    out["setup_bytes"] = loaded
    stepped: set[str] = set()
    for s in range(1, steps + 1):
        for name in order:
            others = sum(resident_bytes(profiles[j], j in stepped) for j in order if j != name)
            start = others + resident_bytes(profiles[name], name in stepped)
            live = others + profiles[name]["peak"]
            if live > cap:
                out["oom"] = _accounting_oom("training", name, s, live, cap)
                return out
            out["steps"].append({"model": name, "step": s, "start_bytes": start, "peak_bytes": live})
            stepped.add(name)
    return out


def _accounting_oom(phase: str, model: str | None, step: int | None, needed: int, cap: int) -> dict[str, Any]:
    where = f"loading {model}" if phase == "setup" else (f"step {step} of {model}" if step else phase)
    return {"phase": phase, "model": model, "step": step, "needed_bytes": int(needed), "requested_bytes": None,
            "error": f"{NOT_ENFORCED}: {needed / MB:,.2f} MB would be live at {where}, over the cap of "
                     f"{cap / MB:,.2f} MB", "enforced": False}


# ----------------------------------------------------------------------------- CUDA helpers

_REQUEST = re.compile(r"Tried to allocate ([\d.]+) ?(bytes|B|KiB|MiB|GiB|TiB)")
_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def requested_bytes(message: str) -> int | None:
    """The size of the allocation that failed, from PyTorch's out-of-memory message (rounded as printed)."""
    m = _REQUEST.search(message)
    return None if m is None else int(float(m.group(1)) * _UNITS[m.group(2)])


def _cuda_oom(exc: BaseException, phase: str, model: str | None, step: int | None,
              device: torch.device) -> dict[str, Any]:
    msg = str(exc)
    st = allocator_stats(device)
    req = requested_bytes(msg)
    return {"phase": phase, "model": model, "step": step, "error": " ".join(msg.split())[:400],
            "requested_bytes": req, "allocated_bytes": st["allocated_bytes"], "reserved_bytes": st["reserved_bytes"],
            "peak_allocated_bytes": st["allocated_peak_bytes"], "peak_reserved_bytes": st["reserved_peak_bytes"],
            "needed_bytes": st["reserved_bytes"] + (req or 0), "enforced": True}


def _is_oom(exc: BaseException) -> bool:
    """The caching allocator's OutOfMemoryError, or a library's failed allocation (cuBLAS/cuDNN
    ALLOC_FAILED, a driver-level "out of memory") surfacing as a RuntimeError."""
    text = str(exc)
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "ALLOC_FAILED" in text


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def measure_context(device: torch.device) -> dict[str, Any]:
    """The CUDA context (wave 8.10's bare_context: NVML process usage minus the allocator's reserve).
    Without NVML's per-process figure: device used minus reserved (all processes: an overestimate)."""
    ctx = bare_context(device) or {}
    if ctx.get("context_bytes") is not None:
        return {**ctx, "how": "NVML process used − allocator reserved, with one tiny tensor allocated"}
    free, total = torch.cuda.mem_get_info(device)
    reserved = torch.cuda.memory_reserved(device)
    return {**ctx, "context_bytes": int(total - free - reserved),
            "how": f"device used − allocator reserved (cudaMemGetInfo; every process on the GPU, an "
                   f"overestimate): NVML's per-process figure is unavailable ({ctx.get('note')})"}


# ----------------------------------------------------------------------------- the honest cap (pure parts)

NVML_CHECK = "largest NVML process figure ≤ card"
SAMPLE_INTERVAL_S = 0.015  # the background sampler's period; a sample is also taken after every step and round


def cap_arithmetic(card_bytes: int, context_bytes: int, device_total_bytes: int, cap_override: int = 0) -> dict[str, Any]:
    """The allocator cap for a card: cap = card − CUDA context (the context is outside the allocator), or
    `cap_override` bytes when given (then the limit is that cap + the context, not the card);
    fraction = cap / device memory, what `torch.cuda.set_per_process_memory_fraction` takes."""
    if card_bytes <= 0 or device_total_bytes <= 0 or context_bytes < 0 or cap_override < 0:
        raise ValueError(f"card and device memory must be positive, context and override not negative; got card "
                         f"{card_bytes}, device {device_total_bytes}, context {context_bytes}, override {cap_override}")
    cap = int(cap_override) if cap_override else max(int(card_bytes) - int(context_bytes), 0)
    return {"card_bytes": int(card_bytes), "context_bytes": int(context_bytes), "cap_bytes": cap,
            "fraction": min(cap / device_total_bytes, 1.0), "device_total_bytes": int(device_total_bytes),
            "limit_bytes": cap + int(context_bytes) if cap_override else int(card_bytes),
            "override": bool(cap_override)}


@dataclasses.dataclass(frozen=True)
class NvmlPeak:
    """The check "largest NVML process figure ≤ card" from a series of samples (bytes; None = no figure)."""
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
    """The largest of NVML's per-process figures against the card. Not applicable when no sample has a
    figure (no NVML, or NVML does not list this process): `note` says why, nothing is guessed."""
    values = [int(v) for v in samples if v is not None]
    missing = len(samples) - len(values)
    if not values:
        why = note or ("no samples were taken" if not samples else "NVML gave no per-process figure")
        return NvmlPeak(False, None, int(card_bytes), len(samples), missing, why)
    text = note + (f"; {missing} of {len(samples)} samples had no figure" if missing else "")
    return NvmlPeak(True, max(values), int(card_bytes), len(samples), missing, text.strip("; "))


class Sampler:
    """Samples `reader()` (bytes or None) every `interval_s` in a background thread, and on demand
    (`sample()` after each step or inference round). Each sample: (seconds since start, phase, bytes).
    A reader that raises stops nothing: the sample is None and the first error is kept in `error`."""

    def __init__(self, reader: Callable[[], int | None], interval_s: float = SAMPLE_INTERVAL_S,
                 clock: Callable[[], float] = time.perf_counter):
        import threading
        self.reader, self.interval_s, self.clock = reader, float(interval_s), clock
        self.samples: list[tuple[float, str, int | None]] = []
        self.phase = "start"
        self.error: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foxlib-nvml-sampler", daemon=True)
        self._t0 = clock()

    def sample(self) -> int | None:
        try:
            value = self.reader()
        except Exception as exc:  # noqa: BLE001 - a failed read is a missing sample, said once
            value = None
            if self.error is None:
                self.error = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.samples.append((self.clock() - self._t0, self.phase, None if value is None else int(value)))
        return value

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> "Sampler":
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (waits for it) and take a last sample."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def values(self, phase: str | None = None) -> list[int | None]:
        with self._lock:
            return [v for _, p, v in self.samples if phase is None or p == phase]


class NvmlProcessReader:
    """This process's used GPU memory from NVML (bytes), NVML kept open between reads. None where NVML
    does not list this process (in a container its PIDs may not be ours): `note` says so; no guess."""

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
            index = device.index if device.index is not None else torch.cuda.current_device()
            uuid = str(torch.cuda.get_device_properties(index).uuid).replace("GPU-", "")
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                u = pynvml.nvmlDeviceGetUUID(h)
                if (u.decode() if isinstance(u, bytes) else u).replace("GPU-", "") == uuid:
                    self.handle = h
                    break
            if self.handle is None:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            first = self()
            self.note = ("this process found in NVML's process list" if first is not None else
                         f"this process (pid {os.getpid()}) is not in NVML's process list (a container's PID "
                         "namespace?): NVML's per-process figure is unavailable")
        except Exception as exc:  # noqa: BLE001
            self.close()
            self.note = f"NVML query failed: {exc}"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def __call__(self) -> int | None:
        if self.handle is None:
            return None
        pid = os.getpid()
        for p in self.pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
            if p.pid == pid and p.usedGpuMemory is not None:
                return int(p.usedGpuMemory)
        return None

    def close(self) -> None:
        if self.pynvml is not None:
            try:
                self.pynvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
        self.handle = self.pynvml = None


def nvml_samples(sampler: Sampler, reader_note: str) -> dict[str, Any]:
    """The sampler's series as plain data: [seconds, phase, bytes or None] per sample, and why figures
    are missing if they are."""
    note = reader_note + (f"; a read failed: {sampler.error}" if sampler.error else "")
    return {"applicable": any(v is not None for v in sampler.values()), "note": note,
            "interval_s": sampler.interval_s, "samples": [[round(t, 4), ph, v] for t, ph, v in sampler.samples]}


# ----------------------------------------------------------------------------- the models

@dataclasses.dataclass
class _Member:
    name: str
    cfg: Any
    precision: str
    model: torch.nn.Module | None = None
    batch: Any = None
    optimizer: torch.optim.Optimizer | None = None
    step: Callable[[], torch.Tensor] | None = None
    """The recipe's training step (foxlib.harness.recipe; fp16 through its GradScaler); returns the loss."""

    @property
    def card(self):
        return MODELS[self.name]


def _load(member: _Member, device: torch.device, seed: int) -> None:
    """The member's model, batch, Adam (at the card's learning rate) and step, from foxlib.harness.recipe."""
    built = build_step(StepRecipe(member.name, member.cfg, member.precision, seed), device)
    member.model, member.batch, member.optimizer, member.step = built.model, built.batch, built.optimizer, built.step


def _step(member: _Member, device: torch.device) -> float:
    """One training step of the recipe (forward + loss, backward, Adam); gradients freed afterwards,
    because the other models step before this one steps again."""
    member.model.train()
    loss = member.step()
    member.optimizer.zero_grad(set_to_none=True)
    return float(loss.float())


def _device_bytes(obj: Any, device: torch.device) -> int:
    return accounting.unique_bytes(t for t in accounting.iter_tensors(obj) if t.device.type == device.type)


def _host_bytes(obj: Any, device: torch.device) -> int:
    """Host RAM of a batch: numpy arrays (e.g. DQN's replay buffer), and CPU tensors when training on a GPU."""
    arrays = {id(a.base if a.base is not None else a): (a.base if a.base is not None else a)
              for a in accounting.iter_arrays(obj)}
    cpu = accounting.unique_bytes(t for t in accounting.iter_tensors(obj) if t.device.type == "cpu") \
        if device.type != "cpu" else 0
    return sum(a.nbytes for a in arrays.values()) + cpu


def _static(members: list[_Member], device: torch.device) -> dict[str, dict[str, int]]:
    """Per loaded model: weights, Adam state, its batch/buffers on the device and in host RAM (exact)."""
    return {m.name: {"parameters_bytes": accounting.parameter_bytes(m.model),
                     "optimizer_state_bytes": accounting.optimizer_state_bytes(m.optimizer) if m.optimizer else 0,
                     "batch_device_bytes": _device_bytes(m.batch, device),
                     "batch_host_bytes": _host_bytes(m.batch, device)}
            for m in members if m.model is not None}


def _free(members: list[_Member], device: torch.device, keep_models: bool = False) -> None:
    for m in members:
        if m.model is not None:
            m.model.zero_grad(set_to_none=True)
        m.batch = m.optimizer = m.step = None
        if not keep_models:
            m.model = None
    if device.type == "cuda":  # on the CPU reference counting frees the tensors; a full collection is slow
        gc.collect()
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- training

def summarise_steps(steps: list[dict[str, Any]], order: list[str]) -> dict[str, dict[str, Any]]:
    """Per model, from the interleaved run's step records: steps run, losses, step time, peaks."""
    out = {}
    for name in order:
        mine = [s for s in steps if s["model"] == name]
        losses = [s["loss"] for s in mine if s.get("loss") is not None]
        out[name] = {
            "steps_run": len(mine),
            "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None,
            "non_finite_losses": sum(1 for v in losses if not math.isfinite(v)),
            "median_step_s": statistics.median(s["seconds"] for s in mine) if mine else None,
            "peak_bytes": max((s["peak_bytes"] for s in mine), default=None),
            "reserved_peak_bytes": max((s["reserved_peak_bytes"] for s in mine
                                        if s.get("reserved_peak_bytes") is not None), default=None),
            "step_increment_bytes": max((s["peak_bytes"] - s["start_bytes"] for s in mine), default=None),
        }
    return out


def _train_cuda(members: list[_Member], steps: int, device: torch.device, seed: int, bar,
                sampler: Sampler | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": [], "oom": None}
    _reset_peak(device)
    current = None
    try:
        for m in members:
            current = m.name
            bar.describe(f"loading {m.name} on {device} under the cap")
            _load(m, device, seed)
        _sync(device)
    except RuntimeError as exc:  # OutOfMemoryError is one
        if not _is_oom(exc):
            raise
        out["oom"] = _cuda_oom(exc, "setup", current, None, device)
    st = allocator_stats(device)
    out["setup"] = {"bytes": st["allocated_bytes"], "peak_bytes": st["allocated_peak_bytes"],
                    "reserved_peak_bytes": st["reserved_peak_bytes"]}
    peak_alloc, peak_res = st["allocated_peak_bytes"], st["reserved_peak_bytes"]
    by_name = {m.name: m for m in members}
    if out["oom"] is None:
        for s in range(1, steps + 1):
            for name in (m.name for m in members):
                bar.describe(f"training step {s}/{steps} of {name} (interleaved, capped)")
                _reset_peak(device)
                start = torch.cuda.memory_allocated(device)
                t0 = time.perf_counter()
                try:
                    loss = _step(by_name[name], device)
                    _sync(device)
                except RuntimeError as exc:
                    if not _is_oom(exc):
                        raise
                    out["oom"] = _cuda_oom(exc, "training", name, s, device)
                    break
                seconds = time.perf_counter() - t0
                if sampler is not None:
                    sampler.sample()
                st = allocator_stats(device)
                peak_alloc, peak_res = max(peak_alloc, st["allocated_peak_bytes"]), max(peak_res, st["reserved_peak_bytes"])
                out["steps"].append({"model": name, "step": s, "loss": loss, "seconds": seconds, "start_bytes": start,
                                     "peak_bytes": st["allocated_peak_bytes"],
                                     "reserved_peak_bytes": st["reserved_peak_bytes"]})
                bar.advance()
            if out["oom"] is not None:
                break
    if out["oom"] is not None:
        gc.collect()  # the failed step's tensors were held by the exception's frames
        peak_alloc = max(peak_alloc, out["oom"]["peak_allocated_bytes"])
        peak_res = max(peak_res, out["oom"]["peak_reserved_bytes"])
    out["models"] = _static(members, device)
    out["peak_allocated_bytes"], out["peak_bytes"] = peak_alloc, peak_res
    out["peak_how"] = "CUDA allocator, capped: largest reserved (the figure against the cap); allocated beside it"
    _end_view(out, device)
    return out


def _end_view(out: dict[str, Any], device: torch.device) -> None:
    """NVML's process figure and the allocator's at the end of a phase, and the context they imply
    (it grows after the start: CUDA loads kernels lazily, cuDNN makes its handle at first use)."""
    out["nvml_end"] = nvml_view(device)
    out["allocator_end"] = allocator_stats(device)
    used = out["nvml_end"].get("process_used_bytes")
    out["context_end_bytes"] = None if used is None else used - out["allocator_end"]["reserved_bytes"]


def _train_cpu(members: list[_Member], plan: dict[str, Any], steps: int, device: torch.device, seed: int,
               bar) -> dict[str, Any]:
    """The real interleaved run on the CPU; memory from the accounting `plan`, the run stopping where it does."""
    out: dict[str, Any] = {"steps": [], "oom": plan["oom"],
                           "setup": {"bytes": plan["setup_bytes"], "peak_bytes": plan["setup_bytes"],
                                     "reserved_peak_bytes": None}}
    if plan["oom"] is None or plan["oom"]["phase"] != "setup":
        for m in members:
            bar.describe(f"loading {m.name} on the CPU")
            _load(m, device, seed)
        by_name = {m.name: m for m in members}
        for ev in plan["steps"]:
            bar.describe(f"training step {ev['step']}/{steps} of {ev['model']} (interleaved)")
            t0 = time.perf_counter()
            loss = _step(by_name[ev["model"]], device)
            out["steps"].append({**ev, "loss": loss, "seconds": time.perf_counter() - t0, "reserved_peak_bytes": None})
            bar.advance()
    out["models"] = _static(members, device)
    peaks = [plan["setup_bytes"]] + [s["peak_bytes"] for s in plan["steps"]]
    out["peak_allocated_bytes"] = out["peak_bytes"] = max(peaks)
    out["peak_how"] = (f"{NOT_ENFORCED}: each model's measured step peak plus what the other models keep "
                       "between their steps (weights, device batch/buffers, Adam state once stepped)")
    return out


# ----------------------------------------------------------------------------- inference

def _inference_input(member: _Member, device: torch.device, n: int, seed: int) -> Any:
    """One inference batch per model: TFT windows, Mamba-2 feature windows, DQN and PPO observations."""
    cfg = member.cfg
    rows = n or cfg.batch_size
    name = member.name
    if name in ("tft", "mamba2"):
        if member.batch is not None and rows == cfg.batch_size:
            batch = member.batch
        else:
            batch = member.card.example_batch(dataclasses.replace(cfg, batch_size=rows), device=device, seed=seed)
        if name == "tft":
            return {k: v for k, v in batch.items() if k != "target"}
        return batch["x"]
    batch = member.batch if member.batch is not None else member.card.example_batch(cfg, device=device, seed=seed)
    if name == "dqn":
        return batch.replay.sample(rows, np.random.default_rng(seed), device)["observations"]
    if name == "ppo":
        obs = batch.rollout.flat("obs")
        pick = torch.as_tensor(np.random.default_rng(seed).integers(0, obs.shape[0], size=rows), device=obs.device)
        return obs[pick].to(device)
    raise ValueError(f"no inference input defined for model {name!r}")


def _forward(member: _Member, x: Any, device: torch.device) -> Callable[[], Any]:
    model, precision = member.model, member.precision

    def run():  # no_grad and autocast are thread-local: entered in the thread that runs
        with torch.no_grad(), autocast(device, precision):
            return model(x)
    return run


def _stats(samples: list[float]) -> dict[str, Any]:
    p50, p99 = np.percentile(samples, [50, 99]) if samples else (None, None)
    return {"p50_s": None if p50 is None else float(p50), "p99_s": None if p99 is None else float(p99),
            "mean_s": statistics.fmean(samples) if samples else None, "n": len(samples),
            "samples_s": [float(s) for s in samples]}


class _Together:
    """One round of every model at once, as a call: ({model: latency from the round's start to its
    output}, the round's wall time), in seconds. streams: one CUDA stream per model, the forwards
    launched together from one thread; threads: one Python thread per model (on CUDA each on its own
    stream). Use as a context manager (it owns the threads)."""

    def __init__(self, fns: dict[str, Callable[[], Any]], mode: str, device: torch.device):
        self.fns, self.mode, self.device = fns, mode, device
        self.streams = {n: torch.cuda.Stream(device) for n in fns} if device.type == "cuda" else {}
        self.pool = ThreadPoolExecutor(max_workers=len(fns), thread_name_prefix="foxlib-infer") \
            if mode == "threads" else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def __call__(self) -> tuple[dict[str, float], float]:
        return self._streams() if self.mode == "streams" else self._threads()

    def _streams(self):
        cur = torch.cuda.current_stream(self.device)
        begin = torch.cuda.Event(enable_timing=True)
        ends, outs = {}, []
        t0 = time.perf_counter()
        begin.record(cur)
        for n, fn in self.fns.items():
            s = self.streams[n]
            s.wait_stream(cur)
            with torch.cuda.stream(s):
                outs.append(fn())
                ends[n] = torch.cuda.Event(enable_timing=True)
                ends[n].record(s)
        torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - t0
        del outs
        return {n: begin.elapsed_time(e) / 1e3 for n, e in ends.items()}, wall

    def _one(self, n: str, t0: float) -> float:
        if self.streams:
            with torch.cuda.stream(self.streams[n]):
                self.fns[n]()
            self.streams[n].synchronize()
        else:
            self.fns[n]()
        return time.perf_counter() - t0

    def _threads(self):
        _sync(self.device)
        t0 = time.perf_counter()
        futures = {n: self.pool.submit(self._one, n, t0) for n in self.fns}
        lat = {n: f.result() for n, f in futures.items()}
        return lat, time.perf_counter() - t0


def _alone(fn: Callable[[], Any], device: torch.device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def _infer(members: list[_Member], device: torch.device, mode: str, repeats: int, batch: int, seed: int,
           cap: int, bar, sampler: Sampler | None = None) -> dict[str, Any]:
    """All four models resident (eval, no_grad, each in its precision): each alone, then all at once."""
    is_cuda = device.type == "cuda"
    out: dict[str, Any] = {
        "mode": mode, "repeats": repeats, "warmup_rounds": WARMUP_ROUNDS, "oom": None, "models": {},
        "how": ("one CUDA stream per model, the four forwards launched together from one Python thread; "
                "latency = from the round's start (an event on the launching stream) to the model's end event"
                if mode == "streams" else
                "one Python thread per model" + (", each on its own CUDA stream" if is_cuda else
                                                 f" sharing the CPU's {torch.get_num_threads()} intra-op threads")
                + "; latency = from the round's start to the model's output (wall clock)")
               + f"; each of the {repeats} rounds (after {WARMUP_ROUNDS} warm-up rounds) times every model alone, "
                 "then all at once",
        "memory_how": ("CUDA allocator, capped: reserved peak during the concurrent rounds (+ context)" if is_cuda else
                       f"{NOT_ENFORCED}: every model's weights and input plus every model's own forward peak "
                       "(measured alone) at the same time"),
    }
    current = None
    fns: dict[str, Callable[[], Any]] = {}
    try:
        inputs = {}
        for m in members:  # the inputs first, from the training batches, which are freed next
            current = m.name
            if m.model is None:
                torch.manual_seed(seed)
                m.model = m.card.build(m.cfg).to(device)
            inputs[m.name] = _inference_input(m, device, batch, seed)
        current = None
        _free(members, device, keep_models=True)
        for m in members:
            m.model.eval()
            x = inputs[m.name]
            out["models"][m.name] = {
                "precision": m.precision,
                "batch": int(next(iter(accounting.iter_tensors(x))).shape[0]),
                "parameters_bytes": accounting.parameter_bytes(m.model),
                "input_bytes": accounting.unique_bytes(accounting.iter_tensors(x))}
            fns[m.name] = _forward(m, x, device)
        _sync(device)
        out["resident_bytes"] = (torch.cuda.memory_allocated(device) if is_cuda else
                                 sum(v["parameters_bytes"] + v["input_bytes"] for v in out["models"].values()))
        # each model alone: its forward's own peak
        for name, fn in fns.items():
            current = name
            bar.describe(f"inference of {name} alone")
            fn()  # warm-up
            if is_cuda:
                _reset_peak(device)
                start = torch.cuda.memory_allocated(device)
                fn()
                _sync(device)
                if sampler is not None:
                    sampler.sample()
                inc = torch.cuda.max_memory_allocated(device) - start
            else:
                with cpu_allocations() as timeline:
                    fn()
                inc = timeline.peak_delta()
            out["models"][name]["solo_increment_bytes"] = int(inc)
            bar.advance()
        current = None
        accounted = out["resident_bytes"] + sum(v["solo_increment_bytes"] for v in out["models"].values())
        out["accounted_bytes"] = accounted
        if not is_cuda and accounted > cap:
            out["oom"] = _accounting_oom("inference", None, None, accounted, cap)
            out["peak_bytes"] = out["peak_allocated_bytes"] = accounted
            return out
        bar.describe(f"inference: each model alone, then all {len(fns)} at once ({mode}), alternating")
        _reset_peak(device)
        names = list(fns)
        alone: dict[str, list[float]] = {n: [] for n in names}
        together: dict[str, list[float]] = {n: [] for n in names}
        walls: list[float] = []
        with _Together(fns, mode, device) as round_:
            for r in range(WARMUP_ROUNDS + repeats):
                # every round: each model alone (in a rotated order), then all at once, so that drift
                # on a noisy machine hits both alike
                times = {n: _alone(fns[n], device) for n in names[r % len(names):] + names[:r % len(names)]}
                lat, wall = round_()
                if sampler is not None:
                    sampler.sample()
                if r >= WARMUP_ROUNDS:
                    for n in names:
                        alone[n].append(times[n])
                        together[n].append(lat[n])
                    walls.append(wall)
        for name in names:
            out["models"][name]["alone"] = _stats(alone[name])
            out["models"][name]["together"] = _stats(together[name])
        out["round"] = _stats(walls)
        bar.advance()
        if is_cuda:
            st = allocator_stats(device)
            out["peak_allocated_bytes"], out["peak_bytes"] = st["allocated_peak_bytes"], st["reserved_peak_bytes"]
        else:
            out["peak_bytes"] = out["peak_allocated_bytes"] = accounted
    except RuntimeError as exc:
        if not is_cuda or not _is_oom(exc):
            raise
        out["oom"] = _cuda_oom(exc, "inference", current, None, device)
        out["peak_allocated_bytes"] = out["oom"]["peak_allocated_bytes"]
        out["peak_bytes"] = out["oom"]["peak_reserved_bytes"]
    finally:
        fns.clear()
    if is_cuda:
        gc.collect()
        _end_view(out, device)
    return out


# ----------------------------------------------------------------------------- warming up before the context is measured

WARMUP_TRAINING_STEPS = 3  # fp16: the GradScaler may skip the first step, which would leave Adam's kernels unloaded


def _warm_up(members: list[_Member], device: torch.device, mode: str, batch: int, seed: int) -> dict[str, Any]:
    """Everything the run will use, once, uncapped, before the CUDA context is measured: one model at a
    time, its training step (cuBLAS's matmul paths, cuDNN's LSTM forward and backward, autocast in its precision,
    Adam's kernels; a few steps, so that fp16's GradScaler steps too), each model's inference forward
    alone and one round of all at once in `mode` (the streams or threads the run uses, with their cuBLAS
    workspaces). CUDA kernels and library handles load lazily, into the context: measured before this,
    the context is too small and a cap of card − context lets the process outgrow the card. No CUDA
    graph is captured by this wave (its steps are eager), so none is warmed up. Everything is freed
    afterwards; what stays allocated are the cuBLAS workspaces, one per stream used."""
    t0 = time.perf_counter()
    done, fns, oom = [], {}, None
    try:
        for m in members:  # one model trained at a time: the warm-up never holds more than the run does
            _load(m, device, seed)
            for _ in range(WARMUP_TRAINING_STEPS):
                _step(m, device)
            x = _inference_input(m, device, batch, seed)
            m.batch = m.optimizer = m.scaler = None
            m.model.eval()
            fns[m.name] = _forward(m, x, device)
            fns[m.name]()
            del x
            _sync(device)
            done.append(f"{m.name} ({m.precision}): {WARMUP_TRAINING_STEPS} training steps, one inference forward")
            gc.collect()
            torch.cuda.empty_cache()
        with _Together(fns, mode, device) as round_:
            round_()
        _sync(device)
        done.append(f"one round of all {len(fns)} models at once ({mode})")
    except RuntimeError as exc:  # OutOfMemoryError is one: the run itself will meet it under the cap
        if not _is_oom(exc):
            raise
        oom = " ".join(str(exc).split())[:300]
    fns.clear()
    _free(members, device)
    return {"seconds": time.perf_counter() - t0, "oom": oom,
            "what": done + ["NVML opened", "no CUDA graph (this wave's steps are eager)"]
            + ([f"stopped by an out-of-memory error, the context may be measured short: {oom}"] if oom else []),
            "allocated_after_bytes": torch.cuda.memory_allocated(device),
            "how": "allocated after the warm-up, everything freed: the cuBLAS workspaces, one per stream used "
                   "(held by the caching allocator, inside the cap)"}


# ----------------------------------------------------------------------------- measure

def _checked(*, preset: str, tft_config: str, steps: int, card_gb: float, cap_bytes: int, inference_repeats: int,
             inference_batch: int, inference_mode: str, ensemble_precision: str, device: str):
    """The parameters' values checked: (device, inference mode, resolved TFT); ValueError naming the valid ones."""
    if steps < 1 or inference_repeats < 1:
        raise ValueError(f"steps and inference_repeats must be at least 1, got {steps} and {inference_repeats}")
    if not card_gb > 0 or cap_bytes < 0 or inference_batch < 0:
        raise ValueError(f"card_gb must be positive and cap_bytes, inference_batch not negative; "
                         f"got {card_gb}, {cap_bytes}, {inference_batch}")
    if inference_mode not in INFERENCE_MODES:
        raise ValueError(f"unknown inference_mode {inference_mode!r}; valid: {', '.join(INFERENCE_MODES)}")
    check_precision(ensemble_precision)
    for card in MODELS.values():
        card.preset(preset)
    dev = resolve_device(device)
    is_cuda = dev.type == "cuda"
    mode = inference_mode if inference_mode != "auto" else ("streams" if is_cuda else "threads")
    if mode == "streams" and not is_cuda:
        raise ValueError("inference_mode 'streams' needs CUDA; on the CPU use threads (or auto)")
    return dev, mode, resolve_tft(tft_config, preset, short_name(dev))


def check_parameters(params: dict[str, Any]) -> None:
    """Check a wave 8.13 parameter set before anything runs (for foxlib.run.preflight): the values
    `measure` would reject, the TFT configuration included. Run parameters are ignored."""
    keys = ("preset", "tft_config", "steps", "card_gb", "cap_bytes", "inference_repeats", "inference_batch",
            "inference_mode", "ensemble_precision", "device")
    if params.get("measurements"):
        return  # nothing is measured: the file's own parameters were checked when it was made
    _checked(**{k: params[k] for k in keys})


def measure(*, preset: str = "seed", tft_config: str = "auto", steps: int = 20, card_gb: float = 4.0,
            cap_bytes: int = 0, inference_repeats: int = 100, inference_batch: int = 0,
            inference_mode: str = "auto", ensemble_precision: str = "fp32", device: str = "auto",
            seed: int = 0) -> dict[str, Any]:
    """Train the four models interleaved under the card's cap, then serve them concurrently.

    card_gb: the card in GiB; the cap is that minus the CUDA context (measured). cap_bytes > 0 sets
    the allocator's cap directly (the context still comes on top): a tiny one forces an out-of-memory
    error, which is recorded ("oom"), never raised."""
    dev, mode, tft = _checked(preset=preset, tft_config=tft_config, steps=steps, card_gb=card_gb, cap_bytes=cap_bytes,
                              inference_repeats=inference_repeats, inference_batch=inference_batch,
                              inference_mode=inference_mode, ensemble_precision=ensemble_precision, device=device)
    is_cuda = dev.type == "cuda"
    order = [n for n in ENSEMBLE if n in MODELS]
    members = [_Member(n, tft["config"] if n == "tft" else MODELS[n].preset(preset),
                       tft["precision"] if n == "tft" else ensemble_precision) for n in order]
    card = int(round(card_gb * GIB))
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "device": describe(dev), "environment": environment(), "order": order, "steps": steps,
        "tft": {k: v for k, v in tft.items() if k not in ("config", "depends_on")},
        "depends_on": tft["depends_on"],
        "models": {m.name: {"title": m.card.title, "precision": m.precision, "config": dataclasses.asdict(m.cfg),
                            "preset": preset} for m in members},
    }
    units = len(order) * (steps + (0 if is_cuda else 1) + 1) + 1
    with progress(units, "wave 8.13") as bar:
        if is_cuda:
            bar.describe("warming up every library the run uses, then measuring the CUDA context")
            out["context_before_warmup"] = measure_context(dev)
            reader = NvmlProcessReader(dev)  # NVML opened before the context is measured
            try:
                out["warmup"] = _warm_up(members, dev, mode, inference_batch, seed)
                out["context"] = measure_context(dev)
                total = torch.cuda.get_device_properties(dev).total_memory
                arith = cap_arithmetic(card, out["context"]["context_bytes"], total, cap_bytes)
                out["cap"] = {**arith, "reserved_at_cap_bytes": torch.cuda.memory_reserved(dev), "enforced": True,
                              "how": f"torch.cuda.set_per_process_memory_fraction({arith['fraction']:.6f}) = cap / "
                                     f"device memory; the CUDA context ({out['context']['how']}, after the warm-up) "
                                     "is outside the cap"}
                torch.cuda.set_per_process_memory_fraction(arith["fraction"], dev)
                sampler = Sampler(reader)
                try:
                    with sampler:
                        sampler.phase = "training"
                        out["training"] = _train_cuda(members, steps, dev, seed, bar, sampler)
                        sampler.phase = "inference"
                        out["inference"] = _infer(members, dev, mode, inference_repeats, inference_batch, seed,
                                                  arith["cap_bytes"], bar, sampler)
                finally:
                    _free(members, dev)
                    torch.cuda.set_per_process_memory_fraction(1.0, dev)
                    torch.cuda.empty_cache()
                out["nvml"] = nvml_samples(sampler, reader.note)
            finally:
                reader.close()
        else:
            cap = cap_bytes or card
            out["context"] = None
            out["cap"] = {"card_bytes": card, "context_bytes": 0, "cap_bytes": cap, "fraction": None,
                          "override": bool(cap_bytes),
                          "device_total_bytes": None, "limit_bytes": cap, "enforced": False,
                          "how": f"{NOT_ENFORCED}: the CPU has no allocator cap and no CUDA context; each model's "
                                 "training step measured alone (foxlib.harness.measure_step.measure_model), the interleaved run "
                                 "accounted from those measurements"}
            profiles = {}
            for m in members:
                bar.describe(f"measuring one {m.name} step alone ({m.precision})")
                profiles[m.name] = measure_model(m.name, m.cfg, dev, m.precision, seed)["profile"]
                bar.advance()
            out["step_profiles"] = profiles
            out["nvml"] = {"applicable": False, "note": "not applicable on the CPU: no NVML, no CUDA context",
                           "interval_s": None, "samples": []}
            plan = account_training(profiles, order, steps, cap)
            try:
                out["training"] = _train_cpu(members, plan, steps, dev, seed, bar)
                out["inference"] = _infer(members, dev, mode, inference_repeats, inference_batch, seed, cap, bar)
            finally:
                _free(members, dev)
    out["training"]["per_model"] = summarise_steps(out["training"]["steps"], order)
    out["training"]["enforced"] = out["inference"]["enforced"] = is_cuda
    return out


# ----------------------------------------------------------------------------- the typed record

SCHEMA_VERSION = 2
"""2: the warm-up before the context, NVML's per-process figure sampled through the run, depends_on.
1 (files without "schema_version"): neither; they load with an empty NVML series and no citation."""

_PHASE_FIELDS = ("peak_bytes", "peak_allocated_bytes", "oom", "context_end_bytes", "nvml_end", "allocator_end")


@dataclasses.dataclass(frozen=True)
class Citation:
    """A results file this measurement read (foxlib.core.provenance.cite): path, revision, sha256 of its bytes."""
    path: str
    revision: str | None
    sha256: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Citation":
        return cls(str(d["path"]), d.get("revision"), str(d["sha256"]))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Cap:
    """The allocator cap (bytes): cap = card − CUDA context (or cap_bytes), the limit the run is checked against."""
    card_bytes: int
    context_bytes: int
    cap_bytes: int
    limit_bytes: int
    enforced: bool
    override: bool
    how: str
    fraction: float | None = None
    device_total_bytes: int | None = None
    reserved_at_cap_bytes: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Cap":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["reserved_at_cap_bytes"] is None:  # none on the CPU
            del out["reserved_at_cap_bytes"]
        return out


@dataclasses.dataclass(frozen=True)
class NvmlSeries:
    """NVML's per-process figure sampled through training and inference: (seconds, phase, bytes or None)."""
    applicable: bool
    note: str
    interval_s: float | None = None
    samples: tuple[tuple[float, str, int | None], ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "NvmlSeries":
        if d is None:
            return cls(False, "not sampled: measured before NVML's per-process figure was sampled through the run "
                              "(schema 1); re-measure for this check")
        return cls(bool(d["applicable"]), d.get("note", ""), d.get("interval_s"),
                   tuple((float(t), str(p), None if v is None else int(v)) for t, p, v in d.get("samples") or ()))

    def to_dict(self) -> dict[str, Any]:
        return {"applicable": self.applicable, "note": self.note, "interval_s": self.interval_s,
                "samples": [list(s) for s in self.samples]}

    def values(self, phase: str | None = None) -> list[int | None]:
        return [v for _, p, v in self.samples if phase is None or p == phase]


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the interleaved training run (bytes, seconds). CUDA: allocated at its start and at its
    peak (all models), reserved peak; CPU: the accounting walk's figures, reserved None."""
    model: str
    step: int
    loss: float | None
    seconds: float
    start_bytes: int
    peak_bytes: int
    reserved_peak_bytes: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Step":
        return cls(d["model"], int(d["step"]), d.get("loss"), float(d["seconds"]), int(d["start_bytes"]),
                   int(d["peak_bytes"]), d.get("reserved_peak_bytes"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def rise_bytes(self) -> int:
        """What the step added at its peak over what was allocated at its start."""
        return self.peak_bytes - self.start_bytes


@dataclasses.dataclass(frozen=True)
class Phase:
    """Training or inference: the figures the checks use (bytes), the training steps, the rest as
    measured (`detail`: per-model summaries, inference latencies, how each figure was taken)."""
    peak_bytes: int | None
    peak_allocated_bytes: int | None
    oom: dict[str, Any] | None
    context_end_bytes: int | None
    nvml_end: dict[str, Any] | None
    allocator_end: dict[str, Any] | None
    detail: dict[str, Any]
    steps: tuple[Step, ...] | None = None
    """Training: every step run, in order; inference: None."""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Phase":
        steps = None if "steps" not in d else tuple(Step.from_dict(s) for s in d["steps"])
        return cls(*(d.get(k) for k in _PHASE_FIELDS),
                   {k: v for k, v in d.items() if k not in _PHASE_FIELDS and k != "steps"}, steps)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.detail)
        if self.steps is not None:
            out["steps"] = [s.to_dict() for s in self.steps]
        for k in _PHASE_FIELDS:
            value = getattr(self, k)
            if value is not None or k in ("oom", "peak_bytes"):
                out[k] = value
        return out

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in _PHASE_FIELDS else self.detail.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key) if key in _PHASE_FIELDS else self.detail[key]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Wave 8.13's measurement: what `measure` returns (with the notebook's wave, measured_at and
    measure_parameters), typed. JSON through to_dict / from_dict; unknown keys are kept in `extra`;
    `schema_version` stays the one it was measured with (a schema-1 file keeps 1, its missing parts
    filled as "not measured")."""
    wave: str
    device: dict[str, Any]
    environment: dict[str, Any]
    order: tuple[str, ...]
    steps: int
    tft: dict[str, Any]
    models: dict[str, dict[str, Any]]
    cap: Cap
    training: Phase
    inference: Phase
    nvml: NvmlSeries
    depends_on: tuple[Citation, ...] = ()
    measured_at: str | None = None
    measure_parameters: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    context_before_warmup: dict[str, Any] | None = None
    warmup: dict[str, Any] | None = None
    step_profiles: dict[str, dict[str, Any]] | None = None
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        version = int(d.get("schema_version", 1))
        if version > SCHEMA_VERSION:
            raise ValueError(f"measurement schema_version {version} is newer than this foxlib's {SCHEMA_VERSION}; "
                             "update foxlib to read it")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(wave=str(d.get("wave", "8.13")), device=d["device"], environment=d.get("environment") or {},
                   order=tuple(d["order"]), steps=int(d["steps"]), tft=d["tft"], models=d["models"],
                   cap=Cap.from_dict(d["cap"]), training=Phase.from_dict(d["training"]),
                   inference=Phase.from_dict(d["inference"]),
                   nvml=NvmlSeries.from_dict(d.get("nvml")),
                   depends_on=tuple(Citation.from_dict(c) for c in d.get("depends_on") or ()),
                   measured_at=d.get("measured_at"), measure_parameters=d.get("measure_parameters"),
                   context=d.get("context"), context_before_warmup=d.get("context_before_warmup"),
                   warmup=d.get("warmup"), step_profiles=d.get("step_profiles"), schema_version=version,
                   extra={k: v for k, v in d.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": self.schema_version, "wave": self.wave}
        for k in ("measured_at", "measure_parameters"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        out.update({"device": self.device, "environment": self.environment, "order": list(self.order),
                    "steps": self.steps, "tft": self.tft, "models": self.models,
                    "depends_on": [c.to_dict() for c in self.depends_on], "context": self.context})
        for k in ("context_before_warmup", "warmup"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        out["cap"] = self.cap.to_dict()
        if self.step_profiles is not None:
            out["step_profiles"] = self.step_profiles
        out.update({"training": self.training.to_dict(), "inference": self.inference.to_dict(),
                    "nvml": self.nvml.to_dict(), **self.extra})
        return out

    @property
    def enforced(self) -> bool:
        return self.cap.enforced

    def phase(self, name: str) -> Phase:
        if name not in ("training", "inference"):
            raise ValueError(f"unknown phase {name!r}; valid: training, inference")
        return getattr(self, name)


def record(m: "Measurement | dict[str, Any]") -> Measurement:
    """The typed record of a measurement (a dict as `measure` returns it or measurement.json holds it)."""
    return m if isinstance(m, Measurement) else Measurement.from_dict(m)


def citations(m: "Measurement | dict[str, Any]") -> list[dict[str, Any]]:
    """The measurement's depends_on, as foxlib.core.provenance.verify takes it."""
    return [c.to_dict() for c in record(m).depends_on]


# ----------------------------------------------------------------------------- analysis (on the record's bytes and seconds)

def _mb(x: float | None) -> float | None:
    return None if x is None else round(x / MB, 2)


def _ms(x: float | None) -> float | None:
    return None if x is None else round(1e3 * x, 3)


def _where(oom: dict[str, Any] | None) -> str:
    if not oom:
        return ""
    if oom["phase"] == "setup":
        return f"while loading {oom['model']}"
    if oom["phase"] == "training":
        return f"at step {oom['step']} of {oom['model']}"
    model = oom.get("model")
    return f"during inference ({model})" if model else "during inference"


def context_bytes(m: Measurement | dict[str, Any], phase: str) -> int:
    """The CUDA context to add to a phase's figure: the larger of the one measured at the start (which
    set the cap) and the one implied by NVML at the phase's end; 0 on the CPU."""
    r = record(m)
    end = r.phase(phase).context_end_bytes
    return max(r.cap.context_bytes, end or 0)


def largest_context_bytes(m: Measurement | dict[str, Any]) -> int:
    """The largest CUDA context seen: at the start (after the warm-up) or at the end of either phase."""
    return max(context_bytes(m, "training"), context_bytes(m, "inference"))


def training_figure(m: Measurement | dict[str, Any]) -> int:
    """Bytes the card must hold for the interleaved training run: the allocator's reserved peak under the
    cap (CPU: accounted), or what was needed where it ran out, plus the CUDA context."""
    t = record(m).training
    needed = (t.oom or {}).get("needed_bytes") or 0
    return max(t.peak_bytes, needed) + context_bytes(m, "training")


def inference_figure(m: Measurement | dict[str, Any]) -> int:
    i = record(m).inference
    needed = (i.oom or {}).get("needed_bytes") or 0
    return max(i.peak_bytes or 0, needed) + context_bytes(m, "inference")


def model_peaks(m: Measurement | dict[str, Any]) -> dict[str, int | None]:
    """Each model's "model peak": the largest total of its own step's tensors (weights, Adam state, its
    device batch, and what its step adds), from the interleaved run's records: per step, the step's
    rise (peak − start) plus what the model held at the step's start, over the steps after its first
    (its first also creates Adam's state, as profile_step's warm-up does); its only step if it ran one.
    None for a model that never stepped. On CUDA the cuBLAS workspaces are not in it (allocated before)."""
    r = record(m)
    out: dict[str, int | None] = {}
    for name in r.order:
        st = r.training.detail.get("models", {}).get(name)
        mine = [s for s in r.training.steps or () if s.model == name]
        if not st or not mine:
            out[name] = None
            continue
        base = st["parameters_bytes"] + st["batch_device_bytes"]
        later = [s for s in mine if s.step > 1]
        if later:
            out[name] = max(s.rise_bytes for s in later) + base + st["optimizer_state_bytes"]
        else:
            out[name] = max(s.rise_bytes for s in mine) + base
    return out


def workspace_bytes(m: Measurement | dict[str, Any]) -> int | None:
    """The cuBLAS workspaces, once per stream used: what stays allocated after the warm-up has freed
    everything else. 0 on the CPU; None for a CUDA measurement made before the warm-up existed."""
    r = record(m)
    if not r.enforced:
        return 0
    return None if r.warmup is None else r.warmup.get("allocated_after_bytes")


def process_figure(m: Measurement | dict[str, Any]) -> int | None:
    """The ensemble's "process figure" on the card: the sum of the model peaks + the cuBLAS workspaces
    (once per stream) + the CUDA context (the largest seen). None when a model never stepped or the
    workspaces were not measured."""
    peaks, ws = model_peaks(m), workspace_bytes(m)
    if ws is None or any(v is None for v in peaks.values()):
        return None
    return sum(peaks.values()) + ws + largest_context_bytes(m)


def nvml_check(m: Measurement | dict[str, Any]) -> NvmlPeak:
    """Largest NVML per-process figure sampled through training and inference, against the card."""
    r = record(m)
    if not r.enforced:
        return NvmlPeak(False, None, r.cap.card_bytes, 0, 0, "not applicable on the CPU: no NVML, no CUDA context")
    return nvml_peak(r.nvml.values(), r.cap.card_bytes, r.nvml.note)


def limit_text(m: Measurement | dict[str, Any]) -> str:
    cap = record(m).cap
    if cap.override:
        return (f"limit = the allocator cap {cap.cap_bytes / MB:,.2f} MB set by cap_bytes"
                + (f" + the CUDA context {cap.context_bytes / MB:,.1f} MB" if cap.enforced else ""))
    return f"limit = the {cap.card_bytes / MB:,.1f} MB card" + (" (cap + CUDA context)" if cap.enforced else "")


def inference_limit(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> float:
    return record(m).cap.limit_bytes - budgets["ensemble"]["min_headroom_mb"] * MB


def how(m: Measurement | dict[str, Any]) -> str:
    """"enforced (...)" or "not enforced (accounting)": the label of every memory figure of this run."""
    cap = record(m).cap
    if cap.enforced:
        return (f"enforced: allocator capped at {cap.cap_bytes / MB:,.1f} MB + CUDA context "
                f"{cap.context_bytes / MB:,.1f} MB")
    return NOT_ENFORCED


def checks(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> list[Check]:
    """Training under the cap, inference with the headroom and, where NVML sees this process, the
    largest NVML process figure against the card (not applicable on the CPU, left out of the verdict)."""
    r = record(m)
    t, i, cap = r.training, r.inference, r.cap
    label = how(r)
    n = len(r.order)
    train = training_figure(r)
    ran = len(t.steps or ())
    t_note = (f"{label}; {ran} of {n * r.steps} interleaved steps ran; allocator reserved peak + CUDA context"
              + (f"; OUT OF MEMORY {_where(t.oom)}: {t.oom['error']}" if t.oom else "")
              + f"; {limit_text(r)}")
    inf = inference_figure(r)
    limit = inference_limit(r, budgets)
    i_note = (f"{label}; {i.detail.get('mode')}; all {n} models resident, leaving at least "
              f"{budgets['ensemble']['min_headroom_mb']:,.0f} MB of the card free (budgets.toml)"
              + (f"; OUT OF MEMORY {_where(i.oom)}: {i.oom['error']}" if i.oom else ""))
    out = [
        Check(TRAIN_CHECK, train, cap.limit_bytes, "bytes", bool(not t.oom and train <= cap.limit_bytes), t_note),
        Check(INFERENCE_CHECK, inf, limit, "bytes", bool(not i.oom and inf <= limit), i_note),
    ]
    nv = nvml_check(r)
    if nv.applicable:
        out.append(Check(NVML_CHECK, nv.max_bytes, nv.card_bytes, "bytes", bool(nv.passed),
                         f"largest of {nv.n_samples} NVML samples of this process's used memory (every "
                         f"{r.nvml.interval_s * 1e3:.0f} ms and after every step and inference round), training "
                         f"and inference; {nv.note}"))
    return out


def nvml_text(m: Measurement | dict[str, Any]) -> str:
    """One sentence: the NVML check's result, or why it is not applicable."""
    nv = nvml_check(m)
    if not nv.applicable:
        return f"{NVML_CHECK}: " + (nv.note if nv.note.startswith("not applicable") else f"not applicable: {nv.note}") + "."
    return (f"{NVML_CHECK}: {nv.max_bytes / MB:,.1f} MB ≤ {nv.card_bytes / MB:,.1f} MB: "
            f"{'PASS' if nv.passed else 'FAIL'} ({nv.n_samples} samples, {nv.headroom_bytes / MB:,.1f} MB to spare).")


def depends_on_text(m: Measurement | dict[str, Any]) -> str:
    """The cited 8.12 results (path, revision, short sha256), for the report's first screen."""
    r = record(m)
    if not r.depends_on:
        return (f"Depends on: no wave {RECOMMENDING_WAVE} results cited ({r.tft.get('source', '?')}"
                + ("; measured before citations were recorded" if r.tft.get("recommended") else "") + ").")
    return "Depends on: " + "; ".join(f"wave {RECOMMENDING_WAVE} results `{c.path}` at revision {c.revision}, "
                                      f"sha256 {c.sha256[:12]}" for c in r.depends_on) + " (verified before rendering)."


def cap_text(m: Measurement | dict[str, Any]) -> str:
    """One sentence of cap arithmetic for the first screen."""
    r = record(m)
    cap = r.cap
    if not cap.enforced:
        return f"Cap: {NOT_ENFORCED} (the CPU has no allocator cap); limit {cap.limit_bytes / MB:,.1f} MB."
    ends = [r.phase(p).context_end_bytes for p in ("training", "inference")]
    ends = [e for e in ends if e is not None]
    at_end = f"{max(ends) / MB:,.1f} MB at the end" if ends else "not measurable at the end (no NVML figure)"
    first = (f"allocator cap {cap.cap_bytes / MB:,.1f} MB (cap_bytes)" if cap.override else
             f"allocator cap = card {cap.card_bytes / MB:,.1f} MB − CUDA context {cap.context_bytes / MB:,.1f} MB = "
             f"{cap.cap_bytes / MB:,.1f} MB")
    warm = "measured after warming up every library the run uses" if r.warmup else "measured before any model ran"
    grown = cap.cap_bytes + largest_context_bytes(r)
    over = (f" Cap + largest context = {grown / MB:,.1f} MB: OVER the {cap.card_bytes / MB:,.1f} MB card "
            "(the context grew after it was measured)." if grown > cap.card_bytes else "")
    return f"Cap: {first}; the context {warm}, {at_end}.{over}"


def figures(m: Measurement | dict[str, Any]) -> dict[str, Any]:
    """The headline figures for results.json (bytes; None where not measured)."""
    r = record(m)
    nv = nvml_check(r)
    return {"card_bytes": r.cap.card_bytes, "context_bytes": r.cap.context_bytes, "cap_bytes": r.cap.cap_bytes,
            "context_end_bytes": max([e for e in (r.training.context_end_bytes, r.inference.context_end_bytes)
                                      if e is not None], default=None),
            "training_bytes": training_figure(r), "inference_bytes": inference_figure(r),
            "model_peak_bytes": model_peaks(r), "workspace_bytes": workspace_bytes(r),
            "process_bytes": process_figure(r), "nvml_max_process_bytes": nv.max_bytes}


def named_figures(m: Measurement | dict[str, Any]) -> list[Figure]:
    """figures() as named figures (foxlib.core.figures): `deployment/<quantity>` (the validated configuration)."""
    f = figures(m)
    prefix = "deployment"
    peaks = f["model_peak_bytes"] or {}
    values = {"card": f["card_bytes"], "cap": f["cap_bytes"], "context": f["context_bytes"],
              "context_end": f["context_end_bytes"], "training_peak": f["training_bytes"],
              "inference_peak": f["inference_bytes"], "workspace": f["workspace_bytes"],
              "process_peak": f["process_bytes"], "nvml_max_process": f["nvml_max_process_bytes"],
              "model_peaks_sum": None if any(v is None for v in peaks.values()) else sum(peaks.values())}
    return [Figure(f"{prefix}/{q}", v, "bytes") for q, v in values.items() if v is not None]


def cap_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """The cap arithmetic, the context at the start and at the end, and the largest NVML process figure."""
    r = record(m)
    cap, ctx = r.cap, r.context or {}
    if not cap.enforced:
        rows = [("target card", cap.card_bytes, f"card_gb × 2^30 bytes ({cap.card_bytes:,} bytes)"),
                ("CUDA context", None, "none on the CPU"),
                ("allocator cap", cap.cap_bytes, cap.how),
                ("limit the run is checked against", cap.limit_bytes, NOT_ENFORCED),
                ("largest NVML process figure", None, nvml_check(r).note)]
        return pd.DataFrame([{"quantity": q, "MB": _mb(v), "how": h} for q, v, h in rows])
    before = (r.context_before_warmup or {}).get("context_bytes")
    rows = [("target card", cap.card_bytes, f"card_gb × 2^30 bytes ({cap.card_bytes:,} bytes)")]
    if r.warmup is not None:
        rows.append(("CUDA context before the warm-up", before, "NVML process used − allocator reserved, "
                     "before any model ran: too small to set the cap on"))
    rows += [
        ("CUDA context at the start (sets the cap)", cap.context_bytes,
         (ctx.get("how", "") + ("; after the warm-up: " + "; ".join(r.warmup["what"]) if r.warmup else
                                "; measured before the models ran (no warm-up: schema 1)"))),
        ("allocator cap", cap.cap_bytes,
         (f"cap_bytes = {cap.cap_bytes:,} bytes" if cap.override else
          f"card − context = {cap.card_bytes:,} − {cap.context_bytes:,} = {cap.cap_bytes:,} bytes")
         + f"; {cap.how}"),
        ("limit the run is checked against", cap.limit_bytes,
         "cap + context" if cap.override else "cap + context = the card"),
        ("device memory (the cap's denominator)", cap.device_total_bytes,
         f"fraction = cap / device memory = {cap.fraction:.6f}"),
    ]
    for phase in ("training", "inference"):
        p = r.phase(phase)
        rows.append((f"CUDA context at the end of {phase}", p.context_end_bytes,
                     "NVML process used − allocator reserved" if p.context_end_bytes is not None else
                     (p.nvml_end or {}).get("note", "unavailable")))
    grown = cap.cap_bytes + largest_context_bytes(r)
    rows.append(("cap + largest CUDA context seen", grown,
                 f"what the process could reach if the allocator filled its cap: "
                 f"{'≤' if grown <= cap.card_bytes else 'OVER'} the {cap.card_bytes / MB:,.1f} MB card"
                 + ("" if grown <= cap.card_bytes else " (the context grew after it was measured)")))
    nv = nvml_check(r)
    rows.append(("largest NVML process figure (training and inference)", nv.max_bytes,
                 f"{nv.n_samples} samples; {nv.note}" if nv.applicable else f"not applicable: {nv.note}"))
    if nv.applicable:
        rows.append(("card − largest NVML process figure", nv.headroom_bytes,
                     f"{NVML_CHECK}: {'PASS' if nv.passed else 'FAIL'}"))
    return pd.DataFrame([{"quantity": q, "MB": _mb(v), "how": h} for q, v, h in rows])


def configuration_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    r = record(m)
    rows = []
    for name in r.order:
        info = r.models[name]
        cfg = info["config"]
        keys = [k for k in ("hidden_size", "num_heads", "encoder_length", "batch_size", "checkpointing",
                            "memory_efficient", "d_model", "n_layers", "seq_len", "buffer_size", "buffer_device",
                            "n_envs", "n_steps", "window", "n_features") if k in cfg]
        rows.append({"model": name, "title": info["title"], "precision": info["precision"],
                     "preset": info["preset"], "key settings": ", ".join(f"{k}={cfg[k]}" for k in keys)})
    return pd.DataFrame(rows)


def kept_bytes(m: Measurement | dict[str, Any], name: str) -> int | None:
    """What a model keeps between its steps: weights, Adam state, its device batch/buffers."""
    st = record(m).training.detail.get("models", {}).get(name)
    return None if not st else st["parameters_bytes"] + st["optimizer_state_bytes"] + st["batch_device_bytes"]


def training_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    r = record(m)
    t, label, peaks = r.training.detail, how(r), model_peaks(r)
    rows = []
    for name in r.order:
        p = t["per_model"][name]
        rows.append({
            "model": name, "precision": r.models[name]["precision"],
            "steps run": f"{p['steps_run']} of {r.steps}",
            "loss first → last": "—" if p["first_loss"] is None else f"{p['first_loss']:.4g} → {p['last_loss']:.4g}",
            "median step (ms)": _ms(p["median_step_s"]),
            "kept between steps (MB)": _mb(kept_bytes(r, name)),
            "model peak (MB)": _mb(peaks[name]),
            "allocated during its steps, all models (MB)": _mb(p["peak_bytes"]),
            "how": label,
        })
    return pd.DataFrame(rows)


def inference_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    r = record(m)
    i, label = r.inference.detail, how(r)
    rows = []
    for name in r.order:
        v = i["models"].get(name)
        if not v:
            continue
        alone, together = v.get("alone") or {}, v.get("together") or {}
        rows.append({
            "model": name, "precision": v["precision"], "batch": v["batch"],
            "weights + input (MB)": _mb(v["parameters_bytes"] + v["input_bytes"]),
            "forward peak alone (MB)": _mb(v.get("solo_increment_bytes")),
            "alone p50 (ms)": _ms(alone.get("p50_s")), "together p50 (ms)": _ms(together.get("p50_s")),
            "together p99 (ms)": _ms(together.get("p99_s")), "how": label,
        })
    return pd.DataFrame(rows)


def totals_table(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The figures the checks use, their parts, the process figure, the card and the headroom."""
    r = record(m)
    cap, t, i = r.cap, r.training, r.inference
    card = cap.card_bytes
    head = budgets["ensemble"]["min_headroom_mb"] * MB
    label = how(r)
    train, inf = training_figure(r), inference_figure(r)
    peaks, ws, proc = model_peaks(r), workspace_bytes(r), process_figure(r)
    rows = [
        ("model peaks, summed", None if any(v is None for v in peaks.values()) else sum(peaks.values()),
         " + ".join(f"{n} {_mb(v)}" for n, v in peaks.items()) + " MB (each step's own tensors)"),
        ("cuBLAS workspaces (once per stream)", ws,
         "none on the CPU" if not cap.enforced else
         ("allocated after the warm-up, everything else freed" if ws is not None else
          "not measured (measured before the warm-up: schema 1)")),
        ("CUDA context (largest: start or end)", largest_context_bytes(r) if cap.enforced else None,
         "NVML process used − allocator reserved" if cap.enforced else "none on the CPU"),
        ("process figure = model peaks + workspaces + context", proc,
         "the ensemble as if every model were at its peak at once" + (f"; {label}" if not cap.enforced else "")
         + ("" if proc is None else f"; {100 * proc / card:.1f} % of the card")),
        ("training, interleaved: peak allocated (live tensors)", t.peak_allocated_bytes, label),
        ("training, interleaved: peak " + ("reserved (what the cap limits)" if cap.enforced else "accounted"),
         t.peak_bytes, t.detail.get("peak_how")),
        ("training: + CUDA context = on the card", train, "checked against the card"),
        ("training: headroom on the card", card - train, f"{100 * train / card:.1f} % of the card used"),
        ("inference: weights + inputs resident", i.detail.get("resident_bytes"), label),
        ("inference: peak " + ("reserved" if cap.enforced else "accounted"), i.peak_bytes, i.detail.get("memory_how")),
        ("inference: + CUDA context = on the card", inf, f"must leave {head / MB:,.0f} MB free"),
        ("inference: headroom on the card", card - inf, f"{100 * inf / card:.1f} % of the card used"),
    ]
    nv = nvml_check(r)
    for phase in ("training", "inference"):
        vals = [v for v in r.nvml.values(phase) if v is not None]
        if vals:
            rows.append((f"{phase}: largest NVML process figure", max(vals),
                         f"{len(vals)} samples; what nvidia-smi shows ≈ context + reserved"))
    rows.append(("largest NVML process figure", nv.max_bytes, nvml_text(r)))
    for phase in ("training", "inference"):
        p = r.phase(phase)
        nvend = p.nvml_end or {}
        if nvend.get("process_used_bytes") is not None:
            rows.append((f"{phase}: NVML process used at the end", nvend["process_used_bytes"],
                         "what nvidia-smi shows ≈ context + reserved"))
    return pd.DataFrame([{"quantity": q, "MB": _mb(v), "how": h} for q, v, h in rows])


def oom_table(m: Measurement | dict[str, Any]) -> pd.DataFrame | None:
    r = record(m)
    rows = []
    for phase in ("training", "inference"):
        oom = r.phase(phase).oom
        if oom:
            rows.append({"phase": phase, "where": _where(oom), "needed (MB)": _mb(oom.get("needed_bytes")),
                         "failed allocation (MB)": _mb(oom.get("requested_bytes")),
                         "reserved when it failed (MB)": _mb(oom.get("reserved_bytes")),
                         "enforced": oom["enforced"], "error": oom["error"]})
    return pd.DataFrame(rows) if rows else None


# ----------------------------------------------------------------------------- charts

COLOURS = {"dqn": "#4c72b0", "ppo": "#55a868", "mamba2": "#c44e52", "tft": "#8172b2"}


def training_chart(m: Measurement | dict[str, Any]):
    """Every step of the interleaved run: allocated during it (all models) + context, against the card;
    NVML's process samples of the training phase beside it where there are any."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    r = record(m)
    steps, cap = r.training.steps or (), r.cap
    ctx = cap.context_bytes
    fig, ax = plt.subplots(figsize=(9, 4))
    for name in r.order:
        xs = [k for k, s in enumerate(steps, 1) if s.model == name]
        ys = [(s.peak_bytes + ctx) / MB for s in steps if s.model == name]
        ax.scatter(xs, ys, s=18, color=COLOURS.get(name),
                   label=f"{name} step: allocated, all models" + (" + context" if ctx else ""))
        res = [(s.reserved_peak_bytes + ctx) / MB for s in steps
               if s.model == name and s.reserved_peak_bytes is not None]
        if res:
            ax.scatter(xs, res, s=18, marker="_", color=COLOURS.get(name))
    nv = [v for v in r.nvml.values("training") if v is not None]
    if nv:
        ax.axhline(max(nv) / MB, color="#d62728", ls="-.", lw=1)
        ax.text(0.5, max(nv) / MB, f" largest NVML process figure {max(nv) / MB:,.0f} MB", va="bottom", fontsize=8)
    ax.axhline(cap.limit_bytes / MB, color="black", ls="--", lw=1.2)
    ax.text(0.5, cap.limit_bytes / MB, f" card {cap.limit_bytes / MB:,.0f} MB", va="bottom", fontsize=8)
    if ctx:
        ax.axhline(ctx / MB, color="#999", ls=":", lw=1)
        ax.text(0.5, ctx / MB, f" CUDA context {ctx / MB:,.0f} MB (outside the cap)", va="bottom", fontsize=8)
    if r.training.oom:
        x = len(steps) + 1
        y = min(training_figure(r), 1.05 * cap.limit_bytes) / MB
        ax.scatter([x], [y], marker="X", s=90, color="red", label=f"out of memory {_where(r.training.oom)}")
    ax.set_xlabel("step of the interleaved run (round-robin: " + " → ".join(r.order) + ")")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")  # a small model's step and the card on one chart
    ax.set_ylabel("MB (10^6 bytes), log scale")
    ax.set_title(f"Ensemble training under the cap — {r.device['name']} — {how(r)}", fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    return fig


def latency_chart(m: Measurement | dict[str, Any]):
    import matplotlib.pyplot as plt

    r = record(m)
    i = r.inference.detail
    names = [n for n in r.order if (i["models"].get(n) or {}).get("together")]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if not names:
        ax.text(0.5, 0.5, "no concurrent inference ran (out of memory)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    x = np.arange(len(names))
    alone = [1e3 * i["models"][n]["alone"]["p50_s"] for n in names]
    p50 = [1e3 * i["models"][n]["together"]["p50_s"] for n in names]
    p99 = [1e3 * i["models"][n]["together"]["p99_s"] for n in names]
    ax.bar(x - 0.2, alone, 0.4, color="#bbb", label="alone, p50")
    ax.bar(x + 0.2, p50, 0.4, color=[COLOURS.get(n) for n in names], label="together, p50 (model colours)")
    ax.errorbar(x + 0.2, p50, yerr=[[0] * len(names), [b - a for a, b in zip(p50, p99)]], fmt="none",
                ecolor="black", capsize=4, label="together, p99")
    ax.set_xticks(x, names)
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Inference latency, {len(names)} models at once ({i['mode']}), {i['repeats']} rounds", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
