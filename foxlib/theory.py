"""What a training step should need, from the model's shapes alone: the yardstick for measurements.

fp32 + Adam: 16 bytes per parameter (weights 4, gradients 4, two moments 8; autocast keeps all
three in fp32). Activations come from each model's own shape-based count where it has one
(`activation_theory(cfg, precision)` in its module). The peak bound assumes everything is live
at once, which the real step never quite reaches: gradients appear while activations are freed.
"""
from __future__ import annotations

import importlib
from typing import Any

FP32 = 4


def training_step(model: str, cfg: Any, n_parameters: int, precision: str = "fp32") -> dict[str, int | None]:
    """Theoretical bytes per category for one Adam training step of `model` built from `cfg`."""
    params = FP32 * n_parameters
    module = importlib.import_module(f"foxlib.models.{model}")
    count = getattr(module, "activation_theory", None)
    activations = count(cfg, precision) if count else None
    return {
        "parameters": params,
        "gradients": params,
        "optimizer_state": 2 * params,
        "activations": activations,
        "peak": None if activations is None else 4 * params + activations,
        "formula": "16 B/param (fp32 weights, gradients, 2 Adam moments) + the model's saved-activation count",
    }
