"""The warm-up before the CUDA context is measured: every library the run uses, once, uncapped (each
model's training steps and inference forward in its precision, one round of all at once on the run's
streams or threads). Kernels and library handles load lazily into the context, which measured
earlier would be too small to set the cap on (cap.py)."""
from __future__ import annotations

import gc
import time
from typing import Any

import torch

from foxlib.harness.timing import sync_device
from foxlib.waves.wave_8_13.members import Member, free_members, load_member, step_member
from foxlib.waves.wave_8_13.oom import is_oom
from foxlib.waves.wave_8_13.serve import Together, forward, inference_input


WARMUP_TRAINING_STEPS = 3  # fp16: the GradScaler may skip the first step, which would leave Adam's kernels unloaded


def warm_up(members: list[Member], device: torch.device, mode: str, batch: int, seed: int) -> dict[str, Any]:
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
            load_member(m, device, seed)
            for _ in range(WARMUP_TRAINING_STEPS):
                step_member(m, device)
            x = inference_input(m, device, batch, seed)
            m.batch = m.optimizer = None
            m.model.eval()
            fns[m.name] = forward(m, x, device)
            fns[m.name]()
            del x
            sync_device(device)
            done.append(f"{m.name} ({m.precision}): {WARMUP_TRAINING_STEPS} training steps, one inference forward")
            gc.collect()
            torch.cuda.empty_cache()
        with Together(fns, mode, device) as round_:
            round_()
        sync_device(device)
        done.append(f"one round of all {len(fns)} models at once ({mode})")
    except RuntimeError as exc:  # OutOfMemoryError is one: the run itself will meet it under the cap
        if not is_oom(exc):
            raise
        oom = " ".join(str(exc).split())[:300]
    fns.clear()
    free_members(members, device)
    return {"seconds": time.perf_counter() - t0, "oom": oom,
            "what": done + ["NVML opened", "CUDA graphs captured as the run captures them" if any(m.cuda_graph for m in members)
                            else "no CUDA graph (this run's steps are eager)"]
            + ([f"stopped by an out-of-memory error, the context may be measured short: {oom}"] if oom else []),
            "allocated_after_bytes": torch.cuda.memory_allocated(device),
            "how": "allocated after the warm-up, everything freed: the cuBLAS workspaces, one per stream used "
                   "(held by the caching allocator, inside the cap)"}
