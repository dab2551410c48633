"""Where an eager training step's host time goes, and what cuts it (CUDA). The batched TFT step (all variables at
once, bf16, fused Adam; seed preset) plain and compiled (torch.compile) in the ways that could cut the host's
time: inductor's Python wrapper, its C++ wrapper (`cpp_wrapper`: the kernels launched from C++), combo kernels
(independent kernels fused side by side: fewer launches), and compiled autograd (the backward one compiled graph). Each is warmed up (compiled),
then all are timed alternating, one step per sample (foxlib.harness.timing: medians with 95 % bootstrap intervals,
ratios to the plain step paired by round); then per phase (a sync between phases) and 5 steps under torch.profiler
(kernel launches per step, host ops by self CPU time). A diagnosis for the GPU machine (DIAG_EAGER=1 in
scripts/h200.sh runs it): python3 scripts/diagnose_eager_step.py [--rounds N] [--out FILE.json] > FILE.txt"""
import argparse
import contextlib
import json
import statistics
import time

import torch
import torch._inductor.config

from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.harness.step_options import StepOptions
from foxlib.harness.timing import median_interval, ratio_interval, sync_device, time_alternating
from foxlib.models import MODELS
from foxlib.waves.wave_8_12.strategies import BATCHED

# name: (the step's options: foxlib.harness.step_options, as wave 8.12's strategies take them; inductor options
# of a variant the strategies lack, given to torch.compile here (its options then leave compile off, so the model is
# compiled once) and held while the first steps compile; compiled autograd on: the backward, with its gradient
# accumulation, traced and compiled as one graph instead of run by autograd's engine node by node)
FUSED, COMPILED = StepOptions(adam="fused"), StepOptions(adam="fused", compile=True)
VARIANTS = {
    "batched": (FUSED, {}, False),
    "batched, torch.compile": (COMPILED, {}, False),
    "batched, torch.compile, C++ wrapper": (FUSED, {"cpp_wrapper": True}, False),
    # wave 8.12's "+ torch.compile (C++ wrapper)" strategy: CPP_WRAPPER's C++ wrapper and combo kernels
    "batched, torch.compile, C++ wrapper, combo kernels": (StepOptions(adam="fused", compile=True, cpp_wrapper=True),
                                                           {}, False),
    "batched, torch.compile, compiled autograd": (COMPILED, {}, True),
}
assert not any(o.compile for o, inductor, _ in VARIANTS.values() if inductor), "a variant would be compiled twice"


def held(compiled_autograd: bool):
    """A context for the built step: compiled autograd when asked (torch._dynamo.compiled_autograd: the backward
    compiled by inductor on the first step, the graph replayed after), else nothing."""
    if not compiled_autograd:
        return contextlib.nullcontext()
    import torch._dynamo.compiled_autograd as ca
    return ca._enable(torch.compile(backend="inductor", options={"fallback_random": True}))


def stepper(built, compiled_autograd: bool):
    def step():
        with held(compiled_autograd):
            built.step()
    return step


def phases(built, n):
    """Median ms of each phase of `n` of the built step's own steps (foxlib.memory.step.TrainingStep, its hooks
    marking the phases), a sync at each mark."""
    dev, out = built.device, {"forward+loss": [], "backward": [], "optimizer": []}
    marks: list[float] = []

    def mark(*_):
        sync_device(dev)
        marks.append(time.perf_counter())

    for _ in range(n):
        marks.clear()
        mark()
        built.step(on_forward_end=mark, before_step=mark)
        mark()
        for k, a, b in zip(out, marks, marks[1:]):
            out[k].append(1e3 * (b - a))
    return {k: round(statistics.median(v), 3) for k, v in out.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--out", default="")
    p.add_argument("--device", default="cuda")
    p.add_argument("--preset", default="seed")
    p.add_argument("--only", default="", help="one variant's name (a smoke run: --device cpu --preset small --only batched)")
    a = p.parse_args()
    tft = MODELS["tft"]
    cfg = tft.config(a.preset, **BATCHED)
    dev = torch.device(a.device)
    built, result = {}, {"torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "rounds": a.rounds,
                         "variants": {}}
    steps = {}
    for name, (options, inductor, compiled_autograd) in VARIANTS.items():
        if a.only and name != a.only:
            continue
        try:
            b = build_step(StepRecipe("tft", cfg, "bf16", 0, options), dev)
            if inductor:  # another backend, so compiled anew, not given dynamo's cached graph of another variant
                b.model.compile(options={"fallback_random": True, **inductor})
            t = time.perf_counter()
            # held while the first steps compile the forward and, lazily, the backward: options given to
            # torch.compile miss the backward (pytorch/pytorch#178845); StepOptions.cpp_wrapper's step holds its own
            step = stepper(b, compiled_autograd)
            with torch._inductor.config.patch(**inductor):
                for _ in range(3):
                    step()
            sync_device(dev)
            result["variants"][name] = {"warmup_s": round(time.perf_counter() - t, 1)}
            built[name], steps[name] = b, step
        except Exception as exc:  # noqa: BLE001 - a variant that cannot compile here is named, the others go on
            result["variants"][name] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        print(name, result["variants"][name], flush=True)
    timings = time_alternating(steps, repeats=a.rounds, warmup=2, device=dev)
    for n, t in timings.items():
        med, low, high = median_interval(t.samples)
        v = result["variants"][n]
        v.update(step_ms=[round(1e3 * x, 3) for x in (med, low, high)])
        if "batched" in timings and n != "batched":
            v["ratio_to_batched"] = ratio_interval(timings, n, "batched").to_dict()
    for n, b in built.items():
        v = result["variants"][n]
        print(f"\n== {n}: timing per phase and profiling", flush=True)
        with held(VARIANTS[n][2]):
            v["phases_ms"] = phases(b, 20)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                steps[n]()
            sync_device(dev)
        ka = prof.key_averages()
        v["kernel_launches_per_step"] = sum(e.count for e in ka if "LaunchKernel" in e.key) / 5
        print(f"\n== {n}: {json.dumps(v)}")
        print(ka.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=60), flush=True)
    print(json.dumps(result, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
