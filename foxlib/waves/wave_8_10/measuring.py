"""Wave 8.10's measurement on a device (records.Measurement, bytes): the TFT's training step profiled (torch.profiler's
categories as a second opinion), the other models beside it, and the seed's target state (every model in fp16,
the TFT checkpointed). On a CPU without fp16 matrix-product kernels a checkpointed fp16 TFT step takes minutes:
there the target state, a memory claim, is predicted on fake tensors by default (`target_state_slow`)."""
from __future__ import annotations

import dataclasses
from typing import Any

from foxlib.core.progress import progress
from foxlib.core.results import measures
from foxlib.harness.measure_step import measure_model, predict_instead
from foxlib.harness.measure_step import second_opinion as profiler_categories
from foxlib.memory import theory
from foxlib.memory.cpu_support import kernel_speed
from foxlib.memory.cuda import bare_context
from foxlib.memory.devices import describe, environment, resolve_device
from foxlib.models import ENSEMBLE, MODELS
from foxlib.waves.wave_8_10.records import SCHEMA_VERSION, Measurement, SlowKernels

TARGET_PRECISION = "fp16"
"""The seed's target state: "FP16 + Checkpointing" (DQN 3, PPO 73, Mamba-2 82, TFT 774 MB)."""


TARGET_SLOW_CHOICES = ("predict", "measure")


def slow_target(device, choice: str) -> SlowKernels | None:
    """kernel_speed's probe of TARGET_PRECISION where the target state is predicted rather than run (a CPU
    without its kernels, `choice` "predict"); None where it is measured."""
    if choice not in TARGET_SLOW_CHOICES:
        raise ValueError(f"target_state_slow must be one of {', '.join(TARGET_SLOW_CHOICES)}, got {choice!r}")
    if device.type != "cpu" or choice == "measure":
        return None
    speed = kernel_speed(TARGET_PRECISION)
    return None if speed.fast else SlowKernels(**speed.to_dict(), reason=speed.reason())


@measures(Measurement)
def measure(*, preset: str = "seed", batch_size: int = 32, encoder_length: int = 60,
            precision: str = "fp32", device: str = "auto", seed: int = 0, ensemble: bool = True,
            ensemble_preset: str = "seed", snapshot_path: str = "", second_opinion: bool = True,
            target_state: bool = True, target_state_slow: str = "predict") -> dict[str, Any]:
    """Profile the TFT (and, with `ensemble`, the other models) on `device`; with `target_state`, also the
    seed's target configuration of the ensemble (slow_target says where it is predicted instead)."""
    dev = resolve_device(device)
    slow = slow_target(dev, target_state_slow) if target_state else None
    context = bare_context(dev)
    cfg = MODELS["tft"].config(preset, batch_size=batch_size, encoder_length=encoder_length)
    others = [m for m in ENSEMBLE if m != "tft"] if ensemble else []
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "device": describe(dev), "environment": environment(),
                           "bare_context": context, "snapshot": snapshot_path if dev.type == "cuda" else "",
                           "target_state_kernels": slow, "second_opinion": None, "target_state": {},
                           "depends_on": []}
    with progress(1 + second_opinion + len(others) + (len(others) + 1) * target_state, "wave 8.10") as bar:
        bar.describe(f"profiling tft/{preset} {precision} on {dev}")
        out["tft"] = measure_model("tft", cfg, dev, precision, seed, snapshot_path or None)
        bar.advance()
        if second_opinion:
            bar.describe("the same step through torch.profiler's memory categories")
            out["second_opinion"] = profiler_categories("tft", cfg, dev, precision, seed)
            bar.advance()
        out["ensemble"] = {}
        for name in others:
            bar.describe(f"profiling {name}/{ensemble_preset} fp32 on {dev}")
            model_cfg = MODELS[name].preset(ensemble_preset)
            out["ensemble"][name] = measure_model(name, model_cfg, dev, "fp32", seed)
            if second_opinion:
                out["ensemble"][name]["second_opinion"] = profiler_categories(name, model_cfg, dev, "fp32", seed)
            bar.advance()
        if target_state:
            for name in others + ["tft"]:
                how = "predicting" if slow else "profiling"
                checkpointed = ", checkpointed" if name == "tft" else ""
                bar.describe(f"{how} {name} in the seed's target state (fp16{checkpointed})")
                # the seed's `gradient_checkpointing: true`: every block of the TFT checkpointed
                model_cfg = (dataclasses.replace(cfg, checkpointing="all") if name == "tft" else
                             MODELS[name].preset(ensemble_preset))
                out["target_state"][name] = (
                    predict_instead(name, model_cfg, dev, TARGET_PRECISION, seed, slow.reason) if slow else
                    measure_model(name, model_cfg, dev, TARGET_PRECISION, seed, predict=False))
                bar.advance()
    out["theory"] = theory.training_step("tft", cfg, out["tft"]["profile"]["n_parameters"], precision, dev.type)
    out["theory"]["activations_by_module"] = theory.activation_theory_by_block(cfg, dev.type)
    return out
