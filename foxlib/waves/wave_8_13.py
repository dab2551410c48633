"""Wave 8.13: production validation — the whole ensemble trained and served under a real 4 GB cap.

On a GPU the caching allocator is capped with `torch.cuda.set_per_process_memory_fraction` so
that the cap plus this process's CUDA context (measured first, as wave 8.10 does; the context
is outside the cap) equals the card. An out-of-memory error inside the cap is then a real one.
The four models train in one process, interleaved round-robin (one step of each in turn, each
with its own Adam; gradients are freed after every step), then all four serve at once.

On the CPU nothing can be capped. There the cap is checked by accounting: each model's training
step is measured on its own (`foxlib.measure.measure_model`) and the interleaved run is walked on
paper — the stepping model's step peak plus what every other model keeps between its steps. The
real CPU run stops where that accounting says the cap would be exceeded, as a GPU run would stop
at its out-of-memory error. Every such figure is labelled "not enforced (accounting)".

`measure(...)` does the work and returns plain data (JSON-able, bytes). Everything after it turns
that data into checks, tables and charts and touches no model.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from foxlib import config, results
from foxlib.budgets import Check
from foxlib.config import MB
from foxlib.devices import describe, environment, resolve_device, short_name
from foxlib.measure import measure_model
from foxlib.memory import accounting
from foxlib.memory.cuda import allocator_stats, nvml_view
from foxlib.memory.profile import autocast, check_precision
from foxlib.memory.timeline import cpu_allocations
from foxlib.models import MODELS
from foxlib.progress import progress
from foxlib.recipe import StepRecipe, build_step
from foxlib.waves.wave_8_10 import ENSEMBLE, bare_context

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
    """The TFT to validate: {"config": TFTConfig, "precision", "overrides", "source", "recommended"}.

    "auto": wave 8.12's recommendation for this device if its report exists, else the plain fp32
    TFT of the preset (and "source" says so). Otherwise a JSON object, e.g. TFT_CONFIG_EXAMPLE.
    An unknown TFT field or precision is a ValueError naming the valid ones."""
    text = (tft_config or "").strip()
    recommended = False
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
            "recommended": recommended}


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
    """The recipe's training step (foxlib.recipe; fp16 through its GradScaler); returns the loss."""

    @property
    def card(self):
        return MODELS[self.name]


def _load(member: _Member, device: torch.device, seed: int) -> None:
    """The member's model, batch, Adam (at the card's learning rate) and step, from foxlib.recipe."""
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


def _train_cuda(members: list[_Member], steps: int, device: torch.device, seed: int, bar) -> dict[str, Any]:
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
           cap: int, bar) -> dict[str, Any]:
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
    """Check a wave 8.13 parameter set before anything runs (for foxlib.preflight): the values
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
        "device": describe(dev), "environment": environment(), "order": order, "steps": steps,
        "tft": {k: v for k, v in tft.items() if k != "config"},
        "models": {m.name: {"title": m.card.title, "precision": m.precision, "config": dataclasses.asdict(m.cfg),
                            "preset": preset} for m in members},
    }
    units = len(order) * (steps + (0 if is_cuda else 1) + 1) + 1
    with progress(units, "wave 8.13") as bar:
        if is_cuda:
            out["context"] = measure_context(dev)
            torch.cuda.empty_cache()
            total = torch.cuda.get_device_properties(dev).total_memory
            ctx = out["context"]["context_bytes"]
            cap = cap_bytes or max(card - ctx, 0)
            fraction = min(cap / total, 1.0)
            out["cap"] = {"card_bytes": card, "context_bytes": ctx, "cap_bytes": cap, "fraction": fraction,
                          "device_total_bytes": total, "limit_bytes": cap + ctx if cap_bytes else card,
                          "override": bool(cap_bytes),
                          "reserved_at_cap_bytes": torch.cuda.memory_reserved(dev), "enforced": True,
                          "how": f"torch.cuda.set_per_process_memory_fraction({fraction:.6f}) = cap / device memory; "
                                 f"the CUDA context ({out['context']['how']}) is outside the cap"}
            torch.cuda.set_per_process_memory_fraction(fraction, dev)
            try:
                out["training"] = _train_cuda(members, steps, dev, seed, bar)
                out["inference"] = _infer(members, dev, mode, inference_repeats, inference_batch, seed, cap, bar)
            finally:
                _free(members, dev)
                torch.cuda.set_per_process_memory_fraction(1.0, dev)
                torch.cuda.empty_cache()
        else:
            cap = cap_bytes or card
            out["context"] = None
            out["cap"] = {"card_bytes": card, "context_bytes": 0, "cap_bytes": cap, "fraction": None,
                          "override": bool(cap_bytes),
                          "device_total_bytes": None, "limit_bytes": cap, "enforced": False,
                          "how": f"{NOT_ENFORCED}: the CPU has no allocator cap and no CUDA context; each model's "
                                 "training step measured alone (foxlib.measure.measure_model), the interleaved run "
                                 "accounted from those measurements"}
            profiles = {}
            for m in members:
                bar.describe(f"measuring one {m.name} step alone ({m.precision})")
                profiles[m.name] = measure_model(m.name, m.cfg, dev, m.precision, seed)["profile"]
                bar.advance()
            out["step_profiles"] = profiles
            plan = account_training(profiles, order, steps, cap)
            try:
                out["training"] = _train_cpu(members, plan, steps, dev, seed, bar)
                out["inference"] = _infer(members, dev, mode, inference_repeats, inference_batch, seed, cap, bar)
            finally:
                _free(members, dev)
    out["training"]["per_model"] = summarise_steps(out["training"]["steps"], order)
    out["training"]["enforced"] = out["inference"]["enforced"] = is_cuda
    return out


# ----------------------------------------------------------------------------- analysis

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


def context_bytes(m: dict[str, Any], phase: str) -> int:
    """The CUDA context to add to a phase's figure: the larger of the one measured at the start (which
    set the cap) and the one implied by NVML at the phase's end; 0 on the CPU."""
    end = m[phase].get("context_end_bytes")
    return max(m["cap"]["context_bytes"], end or 0)


def training_figure(m: dict[str, Any]) -> int:
    """Bytes the card must hold for training: the peak against the cap (CUDA: reserved; CPU: accounted),
    or what was needed where it ran out, plus the context."""
    t = m["training"]
    needed = (t["oom"] or {}).get("needed_bytes") or 0
    return max(t["peak_bytes"], needed) + context_bytes(m, "training")


def inference_figure(m: dict[str, Any]) -> int:
    i = m["inference"]
    needed = (i["oom"] or {}).get("needed_bytes") or 0
    return max(i.get("peak_bytes") or 0, needed) + context_bytes(m, "inference")


def limit_text(m: dict[str, Any]) -> str:
    cap = m["cap"]
    if cap["override"]:
        return (f"limit = the allocator cap {cap['cap_bytes'] / MB:,.2f} MB set by cap_bytes"
                + (f" + the CUDA context {cap['context_bytes'] / MB:,.1f} MB" if cap["enforced"] else ""))
    return (f"limit = the {cap['card_bytes'] / MB:,.1f} MB card"
            + (" (cap + CUDA context)" if cap["enforced"] else ""))


def inference_limit(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> float:
    return m["cap"]["limit_bytes"] - budgets["ensemble"]["min_headroom_mb"] * MB


def how(m: dict[str, Any]) -> str:
    """"enforced (...)" or "not enforced (accounting)": the label of every memory figure of this run."""
    cap = m["cap"]
    if cap["enforced"]:
        return (f"enforced: allocator capped at {cap['cap_bytes'] / MB:,.1f} MB + CUDA context "
                f"{cap['context_bytes'] / MB:,.1f} MB")
    return NOT_ENFORCED


def checks(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> list[Check]:
    t, i, cap = m["training"], m["inference"], m["cap"]
    label = how(m)
    n = len(m["order"])
    train = training_figure(m)
    ran = len(t["steps"])
    t_note = (f"{label}; {ran} of {n * m['steps']} interleaved steps ran"
              + (f"; OUT OF MEMORY {_where(t['oom'])}: {t['oom']['error']}" if t["oom"] else "")
              + f"; {limit_text(m)}")
    inf = inference_figure(m)
    limit = inference_limit(m, budgets)
    i_note = (f"{label}; {i['mode']}; all {n} models resident, leaving at least "
              f"{budgets['ensemble']['min_headroom_mb']:,.0f} MB of the card free (budgets.toml)"
              + (f"; OUT OF MEMORY {_where(i['oom'])}: {i['oom']['error']}" if i["oom"] else ""))
    return [
        Check(TRAIN_CHECK, train, cap["limit_bytes"], "bytes", bool(not t["oom"] and train <= cap["limit_bytes"]), t_note),
        Check(INFERENCE_CHECK, inf, limit, "bytes", bool(not i["oom"] and inf <= limit), i_note),
    ]


def cap_table(m: dict[str, Any]) -> pd.DataFrame:
    cap, ctx = m["cap"], m.get("context") or {}
    rows = [
        ("target card", cap["card_bytes"], f"card_gb × 2^30 bytes ({cap['card_bytes']:,} bytes)"),
        ("CUDA context (outside the cap)", cap["context_bytes"],
         ctx.get("how", "none on the CPU") if cap["enforced"] else "none on the CPU"),
        ("allocator cap", cap["cap_bytes"], cap["how"]),
        ("limit the run is checked against", cap["limit_bytes"], "cap + context = the card" if cap["enforced"]
         else NOT_ENFORCED),
    ]
    if cap["enforced"]:
        rows.append(("device memory (the cap's denominator)", cap["device_total_bytes"],
                     f"fraction {cap['fraction']:.6f}"))
    return pd.DataFrame([{"quantity": q, "MB": _mb(v), "how": h} for q, v, h in rows])


def configuration_table(m: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name in m["order"]:
        info = m["models"][name]
        cfg = info["config"]
        keys = [k for k in ("hidden_size", "num_heads", "encoder_length", "batch_size", "checkpointing",
                            "memory_efficient", "d_model", "n_layers", "seq_len", "buffer_size", "buffer_device",
                            "n_envs", "n_steps", "window", "n_features") if k in cfg]
        rows.append({"model": name, "title": info["title"], "precision": info["precision"],
                     "preset": info["preset"], "key settings": ", ".join(f"{k}={cfg[k]}" for k in keys)})
    return pd.DataFrame(rows)


def training_table(m: dict[str, Any]) -> pd.DataFrame:
    t, label = m["training"], how(m)
    rows = []
    for name in m["order"]:
        p, st = t["per_model"][name], t["models"].get(name, {})
        resident = (st.get("parameters_bytes", 0) + st.get("optimizer_state_bytes", 0)
                    + st.get("batch_device_bytes", 0)) if st else None
        rows.append({
            "model": name, "precision": m["models"][name]["precision"],
            "steps run": f"{p['steps_run']} of {m['steps']}",
            "loss first → last": "—" if p["first_loss"] is None else f"{p['first_loss']:.4g} → {p['last_loss']:.4g}",
            "median step (ms)": _ms(p["median_step_s"]),
            "kept between steps (MB)": _mb(resident),
            "own step increment (MB)": _mb(p["step_increment_bytes"]),
            "process peak during its steps (MB)": _mb(p["peak_bytes"]),
            "how": label,
        })
    return pd.DataFrame(rows)


def inference_table(m: dict[str, Any]) -> pd.DataFrame:
    i, label = m["inference"], how(m)
    rows = []
    for name in m["order"]:
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


def totals_table(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The figures the checks use, their parts, the card and the headroom."""
    cap, t, i = m["cap"], m["training"], m["inference"]
    card = cap["card_bytes"]
    head = budgets["ensemble"]["min_headroom_mb"] * MB
    label = how(m)
    train, inf = training_figure(m), inference_figure(m)
    rows = [
        ("training: peak allocated (live tensors)", t["peak_allocated_bytes"], label),
        ("training: peak " + ("reserved (what the process took from the card)" if cap["enforced"] else "accounted"),
         t["peak_bytes"], t["peak_how"]),
        ("training: + CUDA context = on the card", train, "checked against the card"),
        ("training: headroom on the card", card - train, f"{100 * train / card:.1f} % of the card used"),
        ("inference: weights + inputs resident", i.get("resident_bytes"), label),
        ("inference: peak " + ("reserved" if cap["enforced"] else "accounted"), i.get("peak_bytes"), i["memory_how"]),
        ("inference: + CUDA context = on the card", inf, f"must leave {head / MB:,.0f} MB free"),
        ("inference: headroom on the card", card - inf, f"{100 * inf / card:.1f} % of the card used"),
    ]
    if cap["enforced"]:
        rows.append(("CUDA context at the start (sets the cap)", cap["context_bytes"], (m.get("context") or {}).get("how")))
    for phase, data in (("training", t), ("inference", i)):
        nv = (data.get("nvml_end") or {})
        if nv.get("process_used_bytes") is not None:
            rows.append((f"{phase}: NVML process used at the end", nv["process_used_bytes"],
                         "what nvidia-smi shows ≈ context + reserved"))
            rows.append((f"{phase}: CUDA context at the end", data.get("context_end_bytes"),
                         "NVML process used − reserved; grows with lazily loaded kernels and library handles"))
        elif cap["enforced"]:
            rows.append((f"{phase}: NVML process used at the end", None, nv.get("note", "unavailable")))
    return pd.DataFrame([{"quantity": q, "MB": _mb(v), "how": h} for q, v, h in rows])


def oom_table(m: dict[str, Any]) -> pd.DataFrame | None:
    rows = []
    for phase in ("training", "inference"):
        oom = m[phase]["oom"]
        if oom:
            rows.append({"phase": phase, "where": _where(oom), "needed (MB)": _mb(oom.get("needed_bytes")),
                         "failed allocation (MB)": _mb(oom.get("requested_bytes")),
                         "reserved when it failed (MB)": _mb(oom.get("reserved_bytes")),
                         "enforced": oom["enforced"], "error": oom["error"]})
    return pd.DataFrame(rows) if rows else None


# ----------------------------------------------------------------------------- charts

COLOURS = {"dqn": "#4c72b0", "ppo": "#55a868", "mamba2": "#c44e52", "tft": "#8172b2"}


def training_chart(m: dict[str, Any]):
    import matplotlib.pyplot as plt

    """Every step of the interleaved run: the process's peak during it, against the cap and the card."""
    t, cap = m["training"], m["cap"]
    ctx = cap["context_bytes"]
    fig, ax = plt.subplots(figsize=(9, 4))
    for name in m["order"]:
        xs = [k for k, s in enumerate(t["steps"], 1) if s["model"] == name]
        ys = [(s["peak_bytes"] + ctx) / MB for s in t["steps"] if s["model"] == name]
        ax.scatter(xs, ys, s=18, color=COLOURS.get(name), label=f"{name} step peak" + (" + context" if ctx else ""))
        res = [(s["reserved_peak_bytes"] + ctx) / MB for s in t["steps"]
               if s["model"] == name and s.get("reserved_peak_bytes") is not None]
        if res:
            ax.scatter(xs, res, s=18, marker="_", color=COLOURS.get(name))
    ax.axhline(cap["limit_bytes"] / MB, color="black", ls="--", lw=1.2)
    ax.text(0.5, cap["limit_bytes"] / MB, f" card {cap['limit_bytes'] / MB:,.0f} MB", va="bottom", fontsize=8)
    if ctx:
        ax.axhline(ctx / MB, color="#999", ls=":", lw=1)
        ax.text(0.5, ctx / MB, f" CUDA context {ctx / MB:,.0f} MB (outside the cap)", va="bottom", fontsize=8)
    if t["oom"]:
        x = len(t["steps"]) + 1
        y = min(training_figure(m), 1.05 * cap["limit_bytes"]) / MB
        ax.scatter([x], [y], marker="X", s=90, color="red", label=f"out of memory {_where(t['oom'])}")
    ax.set_xlabel("step of the interleaved run (round-robin: " + " → ".join(m["order"]) + ")")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")  # a small model's step and the card on one chart
    ax.set_ylabel("MB (10^6 bytes), log scale")
    ax.set_title(f"Ensemble training under the cap — {m['device']['name']} — {how(m)}", fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    return fig


def latency_chart(m: dict[str, Any]):
    import matplotlib.pyplot as plt

    i = m["inference"]
    names = [n for n in m["order"] if (i["models"].get(n) or {}).get("together")]
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
