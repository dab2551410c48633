"""Where an eager training step's host time goes (CUDA): the batched TFT step (bf16, fused Adam), plain and compiled,
timed per phase with a sync between phases, and its host-side ops by self CPU time (torch.profiler). A diagnosis
run on the GPU machine (scripts/h200.sh does not call it): python3 scripts/diagnose_eager_step.py [--chunk N]."""
import argparse
import dataclasses
import statistics
import time

import torch

from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.harness.step_options import StepOptions
from foxlib.memory.step import autocast
from foxlib.models import MODELS


def phases(built, n):
    dev = built.device
    out = {"zero_grad": [], "forward+loss": [], "backward": [], "optimizer": [], "step (no sync inside)": []}
    for _ in range(n):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter(); built.optimizer.zero_grad(set_to_none=True); torch.cuda.synchronize(dev)
        t1 = time.perf_counter()
        with autocast(dev, built.recipe.precision):
            loss = built.loss_fn(built.model, built.batch)
        torch.cuda.synchronize(dev); t2 = time.perf_counter()
        loss.backward(); torch.cuda.synchronize(dev); t3 = time.perf_counter()
        built.optimizer.step(); torch.cuda.synchronize(dev); t4 = time.perf_counter()
        built.step(); torch.cuda.synchronize(dev); t5 = time.perf_counter()
        for k, v in zip(out, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            out[k].append(1e3 * v)
    return {k: round(statistics.median(v), 3) for k, v in out.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--chunk", type=int, default=0)
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    tft = MODELS["tft"]
    cfg = dataclasses.replace(tft.config("seed", batch_size=32, encoder_length=60), memory_efficient=True,
                              vsn_batched=True, vsn_chunk=a.chunk)
    dev = torch.device("cuda")
    for compiled in (False, True):
        built = build_step(StepRecipe("tft", cfg, "bf16", 0, StepOptions(adam="fused", compile=compiled)), dev)
        t = time.perf_counter()
        for _ in range(5):
            built.step()
        torch.cuda.synchronize(dev)
        print(f"\n== compiled={compiled}: warm-up 5 steps {time.perf_counter() - t:.1f} s", flush=True)
        print("per phase, median ms:", phases(built, a.steps), flush=True)
        torch.cuda.synchronize(dev); t = time.perf_counter()
        for _ in range(a.steps):
            built.step()
        host = (time.perf_counter() - t) / a.steps; torch.cuda.synchronize(dev)
        print(f"host ms/step, no sync: {1e3 * host:.2f}; with the final sync: {1e3 * (time.perf_counter() - t) / a.steps:.2f}")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                built.step()
            torch.cuda.synchronize(dev)
        ka = prof.key_averages()
        launches = sum(e.count for e in ka if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))
        print(f"kernel launches per step: {launches / 5:.0f}")
        print(ka.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70))
        built.free()


if __name__ == "__main__":
    main()
