"""Serving the ensemble: every member resident (eval, no_grad, each in its precision), each timed
alone and then all at once, on one CUDA stream per model or one Python thread per model
(`Together`), alternating round by round; memory under the cap on CUDA, accounted on the CPU."""
from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import torch

from foxlib.harness.timing import sync_device
from foxlib.memory import accounting
from foxlib.memory.cuda import allocator_stats
from foxlib.memory.step import autocast
from foxlib.memory.timeline import cpu_allocations
from foxlib.waves.wave_8_13.cap import NOT_ENFORCED, accounting_oom, cuda_oom, end_view, is_oom, one_line, reset_peak
from foxlib.waves.wave_8_13.members import Member, free_members
from foxlib.waves.wave_8_13.nvml import Sampler

WARMUP_ROUNDS = 3


def inference_input(member: Member, device: torch.device, n: int, seed: int) -> Any:
    """One inference batch per model: TFT windows, Mamba-2 feature windows, DQN and PPO observations."""
    cfg = member.cfg
    rows = n or cfg.batch_size
    name = member.name
    if name in ("tft", "mamba2"):
        batch = (member.batch if member.batch is not None and rows == cfg.batch_size else
                 member.card.example_batch(dataclasses.replace(cfg, batch_size=rows), device=device, seed=seed))
        return {k: v for k, v in batch.items() if k != "target"} if name == "tft" else batch["x"]
    batch = member.batch if member.batch is not None else member.card.example_batch(cfg, device=device, seed=seed)
    if name == "dqn":
        return batch.replay.sample(rows, np.random.default_rng(seed), device)["observations"]
    if name == "ppo":
        obs = batch.rollout.flat("obs")
        pick = torch.as_tensor(np.random.default_rng(seed).integers(0, obs.shape[0], size=rows), device=obs.device)
        return obs[pick].to(device)
    raise ValueError(f"no inference input defined for model {name!r}")


def forward(member: Member, x: Any, device: torch.device) -> Callable[[], Any]:
    """The member's inference forward on `x` as a call: in graph mode on CUDA one captured CUDA graph
    (replayed on whichever stream calls it), else eager; `member.inference_note` says which and why."""
    model, precision = member.model, member.precision

    def run():  # no_grad and autocast are thread-local: entered in the thread that runs
        with torch.no_grad(), autocast(device, precision):
            return model(x)
    member.inference_note = None
    if member.cuda_graph and device.type == "cuda":
        try:
            return _captured(run, device, member)
        except RuntimeError as exc:
            if is_oom(exc):
                raise
            member.inference_note = f"eager: capture failed: {type(exc).__name__}: {one_line(exc, 200)}"
    return run


def _captured(run: Callable[[], Any], device: torch.device, member: Member) -> Callable[[], Any]:
    """`run` captured as one CUDA graph after warm-up calls on a side stream; the call replays it and returns
    the graph's output tensors. Captured on the warm-up's stream: cuBLAS makes one workspace per (handle, stream)
    at its first matmul, so the warm-up makes it outside the graph's pool; on torch.cuda.graph's shared default
    capture stream it would be made in the first graph's pool and baked into every later one."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_ROUNDS):
            run()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        out = run()
    member.inference_note = "captured: each inference forward replays one CUDA graph"

    def replay():
        graph.replay()
        return out
    replay.graph = graph  # keeps the graph (and its pool) alive as long as the call
    # and what the graph reads outside its pool (`run` holds the model and the input): else an input its
    # caller dropped is freed and unmapped, and the next replay is an illegal memory access
    # (scripts/h200-graphmode-diagnose.sh)
    replay.run = run
    return replay


def _stats(samples: list[float]) -> dict[str, Any]:
    p50, p99 = map(float, np.percentile(samples, [50, 99])) if samples else (None, None)
    return {"p50_s": p50, "p99_s": p99, "mean_s": statistics.fmean(samples) if samples else None,
            "n": len(samples), "samples_s": [float(s) for s in samples]}


class Together:
    """One round of every model at once, as a call: ({model: latency from the round's start to its output}, the
    round's wall time), in seconds; streams: a CUDA stream per model, launched from one thread; threads: a Python
    thread per model (on CUDA each on its own stream). A context manager: it owns the threads."""

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
        sync_device(self.device)
        t0 = time.perf_counter()
        futures = {n: self.pool.submit(self._one, n, t0) for n in self.fns}
        return {n: f.result() for n, f in futures.items()}, time.perf_counter() - t0


def _alone(fn: Callable[[], Any], device: torch.device) -> float:
    sync_device(device)
    t0 = time.perf_counter()
    fn()
    sync_device(device)
    return time.perf_counter() - t0


def infer(members: list[Member], device: torch.device, mode: str, repeats: int, batch: int, seed: int,
           cap: int, bar, sampler: Sampler | None = None) -> dict[str, Any]:
    """All the members resident (eval, no_grad, each in its precision): each alone, then all at once."""
    is_cuda = device.type == "cuda"
    out: dict[str, Any] = {
        "mode": mode, "repeats": repeats, "warmup_rounds": WARMUP_ROUNDS, "oom": None, "models": {},
        "how": (f"one CUDA stream per model, the {len(members)} forwards launched together from one Python thread; "
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
            inputs[m.name] = inference_input(m, device, batch, seed)
        current = None
        free_members(members, device, keep_models=True)
        for m in members:
            m.model.eval()
            x = inputs[m.name]
            out["models"][m.name] = {
                "precision": m.precision,
                "batch": int(next(iter(accounting.iter_tensors(x))).shape[0]),
                "parameters_bytes": accounting.parameter_bytes(m.model),
                "input_bytes": accounting.unique_bytes(accounting.iter_tensors(x))}
            fns[m.name] = forward(m, x, device)
            if m.cuda_graph:
                out["models"][m.name]["cuda_graph"] = m.inference_note or "eager"
        sync_device(device)
        out["resident_bytes"] = (torch.cuda.memory_allocated(device) if is_cuda else
                                 sum(v["parameters_bytes"] + v["input_bytes"] for v in out["models"].values()))
        # each model alone: its forward's own peak
        for name, fn in fns.items():
            current = name
            bar.describe(f"inference of {name} alone")
            fn()  # warm-up
            if is_cuda:
                reset_peak(device)
                start = torch.cuda.memory_allocated(device)
                fn()
                sync_device(device)
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
        out["accounted_bytes"] = accounted = (out["resident_bytes"]
                                              + sum(v["solo_increment_bytes"] for v in out["models"].values()))
        if not is_cuda:
            out["peak_bytes"] = out["peak_allocated_bytes"] = accounted
            if accounted > cap:
                out["oom"] = accounting_oom("inference", None, None, accounted, cap)
                return out
        bar.describe(f"inference: each model alone, then all {len(fns)} at once ({mode}), alternating")
        reset_peak(device)
        names = list(fns)
        alone, together, walls = {n: [] for n in names}, {n: [] for n in names}, []
        with Together(fns, mode, device) as round_:
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
            out["models"][name] |= {"alone": _stats(alone[name]), "together": _stats(together[name])}
        out["round"] = _stats(walls)
        bar.advance()
        if is_cuda:
            st = allocator_stats(device)
            out["peak_allocated_bytes"], out["peak_bytes"] = st["allocated_peak_bytes"], st["reserved_peak_bytes"]
    except RuntimeError as exc:
        if not is_cuda or not is_oom(exc):
            raise
        out["oom"] = cuda_oom(exc, "inference", current, None, device)
        out["peak_allocated_bytes"] = out["oom"]["peak_allocated_bytes"]
        out["peak_bytes"] = out["oom"]["peak_reserved_bytes"]
    finally:
        fns.clear()
    if is_cuda:
        gc.collect()
        end_view(out, device)
    return out
