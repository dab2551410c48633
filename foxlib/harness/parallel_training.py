"""Several accuracy runs (training.train_tft) at once, each in its own process.

An eager TFT run on a GPU is bound by one CPU thread launching kernels; runs in separate processes overlap that
work. Each run is seeded and computes the steps it would alone; only its wall time reflects the company it had
(the harness records "concurrent_runs"). On the CPU runs stay in this process, one after another.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Sequence

import torch

from foxlib.core.progress import progress
from foxlib.harness.training import train_tft

MAX_GPU_WORKERS = 8
WORKER_THREADS = 2  # intra-op threads per worker process (the runs are launch-bound, not CPU-bound)


def auto_workers(n_jobs: int, device: torch.device | str) -> int:
    """Processes for n_jobs runs: up to MAX_GPU_WORKERS on CUDA (and the host's cores allow), one on the CPU."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(n_jobs, MAX_GPU_WORKERS, (os.cpu_count() or 2) // WORKER_THREADS))


def _init_worker() -> None:
    torch.set_num_threads(WORKER_THREADS)


def _run(job: dict[str, Any]) -> dict[str, Any]:
    return train_tft(**job, show_progress=False).to_dict()


def train_many(jobs: Sequence[dict[str, Any]], device: torch.device | str, workers: int = 0,
               what: str = "accuracy runs") -> list[dict[str, Any]]:
    """train_tft(**job, device=device, concurrent_runs=workers) for every (picklable) job; TrainResult.to_dict()s
    in the jobs' order. workers: processes (0: auto_workers); with one, the runs go one after another here."""
    if workers < 0:
        raise ValueError(f"workers must be 0 (auto) or more, not {workers}")
    device = torch.device(device)
    workers = min(workers or auto_workers(len(jobs), device), max(1, len(jobs)))
    jobs = [{**job, "device": str(device), "concurrent_runs": workers} for job in jobs]
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    with progress(len(jobs), what) as bar:
        if workers == 1:
            for i, job in enumerate(jobs):
                bar.describe(f"{what}: {job.get('precision', 'fp32')} seed {job.get('seed', 0)}")
                results[i] = _run(job)
                bar.advance()
        else:
            bar.describe(f"{what}: {len(jobs)} runs in {workers} processes")
            # spawn: a forked child cannot use CUDA once the parent has
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker) as pool:
                futures = {pool.submit(_run, job): i for i, job in enumerate(jobs)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.advance()
    return results  # type: ignore[return-value]
