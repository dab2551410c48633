"""Wave 8.11's measurement on a device (records.Measurement, bytes and seconds): every model profiled in each precision,
the TFT's step timed with the precisions alternating, and the TFT trained per precision and seed by the accuracy
harness (foxlib.harness.training)."""
from __future__ import annotations

import dataclasses
from typing import Any

from foxlib.core.progress import progress
from foxlib.core.results import measures
from foxlib.harness.measure_step import measure_model
from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.harness.timing import time_alternating
from foxlib.harness.training import HARNESS, accuracy_config, check_target, compare_precisions, degradation
from foxlib.memory.devices import describe, environment, resolve_device
from foxlib.memory.profile import release_memory
from foxlib.memory.step import PRECISIONS, check_precision
from foxlib.models import MODELS
from foxlib.waves.wave_8_11.records import SCHEMA_VERSION, Measurement


def _split(text: str, valid, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in valid]
    if bad or not items:
        raise ValueError(f"unknown {what} {bad or text!r}; valid: {', '.join(valid)}")
    return items


def check_precisions(precisions: list[str], candidate: str) -> None:
    """The precisions compared must include fp32 (the baseline) and the candidate."""
    check_precision(candidate)
    if "fp32" not in precisions or candidate not in precisions:
        raise ValueError(f"precisions must include fp32 (the baseline) and the candidate {candidate!r}; "
                         f"got {','.join(precisions)}")


@measures(Measurement)
def measure(*, preset: str = "seed", batch_size: int = 32, encoder_length: int = 60, precisions: str = "fp32,fp16,bf16",
            candidate: str = "fp16", models: str = "tft,dqn,ppo,mamba2", device: str = "auto", seed: int = 0,
            timing_repeats: int = 15, accuracy_preset: str = "auto", accuracy_seeds: int = 3,
            accuracy_steps: int = HARNESS["max_steps"], accuracy_eval_every: int = HARNESS["eval_every"],
            accuracy_patience: int = HARNESS["patience"], accuracy_val_windows: int = HARNESS["val_windows"],
            accuracy_memory_efficient: bool = True, accuracy_target: str = HARNESS["target"],
            accuracy_batch_size: int = HARNESS["batch_size"], accuracy_lr: float = HARNESS["lr"],
            accuracy_min_skill_pct: float = 100 * HARNESS["min_skill"]) -> dict[str, Any]:
    """Profile `models` in each of `precisions` on `device`, time the TFT's step in each (alternating, after
    3 warm-up rounds), and train the TFT `accuracy_seeds` times per precision (accuracy_runs)."""
    precs = _split(precisions, PRECISIONS, "precision(s)")
    check_precisions(precs, candidate)
    check_target(accuracy_target)
    names = _split(models, list(MODELS), "model(s)")
    dev = resolve_device(device)
    cfg = MODELS["tft"].config(preset, batch_size=batch_size, encoder_length=encoder_length)
    acc_preset = accuracy_preset if accuracy_preset != "auto" else ("seed" if dev.type == "cuda" else "small")
    acc_cfg = accuracy_config(acc_preset, batch_size=accuracy_batch_size, lr=accuracy_lr,
                              memory_efficient=accuracy_memory_efficient)
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "device": describe(dev), "environment": environment(),
                           "precisions": precs, "candidate": candidate, "tft_config": dataclasses.asdict(cfg),
                           "accuracy_config": dataclasses.asdict(acc_cfg), "accuracy_preset": acc_preset}
    with progress(len(names) * len(precs), "wave 8.11 memory") as bar:
        out["memory"] = {}
        for name in names:
            model_cfg = cfg if name == "tft" else MODELS[name].preset(preset)
            for p in precs:
                bar.describe(f"profiling {name}/{preset} {p} on {dev}")
                r = measure_model(name, model_cfg, dev, p, seed)
                out["memory"].setdefault(name, {})[p] = r["profile"]
                out.setdefault("predicted", {}).setdefault(name, {})[p] = r["predicted"]
                bar.advance()
    steps = {p: build_step(StepRecipe("tft", cfg, p, seed), dev).step for p in precs}
    timings = time_alternating(steps, repeats=timing_repeats, warmup=3, device=dev)
    out["timing"] = {p: t.to_dict() for p, t in timings.items()}
    del steps
    release_memory()
    results = compare_precisions(acc_cfg, precs, range(accuracy_seeds), device=dev, max_steps=accuracy_steps,
                                 eval_every=accuracy_eval_every, patience=accuracy_patience,
                                 val_windows=accuracy_val_windows, target=accuracy_target,
                                 min_skill=accuracy_min_skill_pct / 100)
    out.update(accuracy_runs=list(results), accuracy=degradation(results),
               accuracy_harness=results[0].harness)
    return out
