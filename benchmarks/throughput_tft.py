"""Training throughput of foxlib's TFT at the configuration NVIDIA's DeepLearningExamples TFT
publishes for electricity, beside NVIDIA's published figures.

Published (NVIDIA DeepLearningExamples, PyTorch TFT, electricity, one A100-80GB; quoted, not
measured here): 12,435 items/s with TF32, 17,608 items/s with AMP. Their configuration: hidden 128,
4 attention heads, 168 encoder + 24 decoder steps, batch 1024.

Measured here: foxlib's TFT at hidden 128, 4 heads, 168 + 24 steps, batch 1024, on foxlib's market
data (what differs is listed in the output's "differences"). Variants alternate in rounds in one
process (foxlib.harness.timing.time_alternating); items/s = batch ÷ the median step time, with the
rounds' interquartile range. Peak (eager variants): max_memory_allocated over one
step after its build, absolute: the variants built before it are alive and counted (a comparison
across variants reads allocated_before_bytes beside it).

    python benchmarks/throughput_tft.py --device cuda --out throughput.json
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from foxlib.core.provenance import git_revision  # noqa: E402
from foxlib.harness.recipe import StepRecipe, build_step, capture_step  # noqa: E402
from foxlib.harness.step_options import StepOptions  # noqa: E402
from foxlib.harness.timing import time_alternating  # noqa: E402
from foxlib.memory.devices import describe, environment, resolve_device  # noqa: E402
from foxlib.models import MODELS  # noqa: E402

PUBLISHED = {
    "source": "NVIDIA DeepLearningExamples, PyTorch/Forecasting/TFT README, electricity, training performance, "
              "1x A100 80GB (published figures, not measured here)",
    "items_per_s": {"TF32": 12435, "AMP": 17608},
    "config": {"hidden_size": 128, "num_heads": 4, "encoder_length": 168, "decoder_length": 24, "batch_size": 1024},
}
DIFFERENCES = [
    "data: foxlib's S&P 500 / NASDAQ daily features (2 series), not the electricity data set (369 customers' hourly use)",
    "inputs: foxlib's TFT has 1 static input (the series id), 5 known inputs (calendar features and the horizon "
    "index) and --n-observed observed inputs (default 1); electricity has 1 static (customer id), 3 known (hour, "
    "day of week, hours from start) and 1 observed (the power usage)",
    "AMP: NVIDIA's is fp16 autocast with a GradScaler; here bf16 autocast (no scaler), the H200's fast 16-bit type",
    "GPU: an H200 here (HBM3e, Hopper tensor cores), an A100-80GB in NVIDIA's table",
    "NVIDIA's figure is a multi-step training loop with its data loader; here the steady-state training step on one "
    "batch kept on the GPU (no data loading), eager and as one CUDA graph",
]


def variants(quick: bool) -> dict[str, tuple[str, StepOptions, bool, bool]]:
    """name -> (precision, options, memory-efficient path, CUDA graph)."""
    out = {
        "fp32 (TF32 off), eager": ("fp32", StepOptions(), False, False),
        "TF32, eager": ("fp32", StepOptions(tf32=True), False, False),
        "AMP (bf16), eager": ("bf16", StepOptions(), False, False),
        "TF32, memory-efficient path, eager": ("fp32", StepOptions(tf32=True), True, False),
        "AMP (bf16), memory-efficient path, eager": ("bf16", StepOptions(), True, False),
        "TF32, memory-efficient path, CUDA graph": ("fp32", StepOptions(tf32=True, adam="fused"), True, True),
        "AMP (bf16), memory-efficient path, CUDA graph": ("bf16", StepOptions(adam="fused"), True, True),
    }
    return dict(list(out.items())[:3]) if quick else out


def build(cfg, precision: str, options: StepOptions, graph: bool, device: torch.device):
    """The step callable (eager, or a captured CUDA graph's replay)."""
    recipe = StepRecipe("tft", cfg, precision, 0, options)
    if not graph:
        return build_step(recipe, device).step
    return capture_step(recipe, device)[1]


def peak_bytes(fn, device: torch.device, before: dict | None = None) -> int | None:
    """max_memory_allocated over one call of fn (absolute); `before` gets what was allocated at its start."""
    if device.type != "cuda":
        return None
    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    if before is not None:
        before["bytes"] = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--n-observed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="a tiny configuration and three variants (tests)")
    p.add_argument("--out", default="throughput.json")
    a = p.parse_args(argv)
    device = resolve_device(a.device)
    conf = dict(PUBLISHED["config"])
    if a.quick:
        conf = {"hidden_size": 16, "num_heads": 2, "encoder_length": 12, "decoder_length": 3, "batch_size": 8}
    cfg = MODELS["tft"].config("seed", n_observed=a.n_observed, **conf)
    chosen = {n: v for n, v in variants(a.quick).items() if device.type == "cuda" or not (v[3] or v[1].tf32)}
    steps, peaks, starts, errors = {}, {}, {}, {}
    for name, (precision, options, efficient, graph) in chosen.items():
        print(f"[throughput] building {name}", flush=True)
        try:
            steps[name] = build(dataclasses.replace(cfg, memory_efficient=efficient), precision, options, graph, device)
            # a captured step's replay allocates nothing (its pool was filled at capture): no peak to read
            start: dict = {}
            peaks[name] = None if graph else peak_bytes(steps[name], device, start)
            starts[name] = start.get("bytes")
        except (RuntimeError, ValueError) as exc:  # a variant that cannot run here: named, the others go on
            errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
            steps.pop(name, None)
    timings = time_alternating(steps, repeats=a.repeats, warmup=2, device=device)
    rows = []
    for name, t in timings.items():
        precision, options, efficient, graph = chosen[name]
        q = statistics.quantiles(t.samples, n=4) if len(t.samples) >= 2 else [t.median_s] * 3
        rows.append({"variant": name, "precision": precision, "options": options.to_dict(),
                     "memory_efficient": efficient, "cuda_graph": graph, "step_s_median": t.median_s,
                     "step_s_samples": list(t.samples), "items_per_s": cfg.batch_size / t.median_s,
                     "items_per_s_low": cfg.batch_size / q[2], "items_per_s_high": cfg.batch_size / q[0],
                     "allocator_peak_bytes": peaks.get(name), "allocated_before_bytes": starts.get(name)})
        print(f"  {name}: {cfg.batch_size / t.median_s:,.0f} items/s (step {1e3 * t.median_s:.1f} ms)", flush=True)
    out = {"benchmark": "throughput_tft", "device": describe(device).to_dict(), "environment": environment().to_dict(),
           "measured_at_revision": git_revision(), "config": dataclasses.asdict(cfg), "repeats": a.repeats,
           "published": PUBLISHED, "differences": DIFFERENCES, "rows": rows, "errors": errors}
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
