"""What a training step should need, from the model's shapes alone: the yardstick for measurements.

fp32 + Adam: 16 bytes per parameter (weights 4, gradients 4, two moments 8; autocast keeps all three in fp32),
plus the model's own count of saved activations where it has one (theory_tft). The peak bound assumes everything
is live at once, which the real step never quite reaches (gradients appear while activations are freed).
"""
from __future__ import annotations

from typing import Any

from foxlib.memory import theory_tft

FP32 = 4
ACTIVATION_COUNTS = {"tft": theory_tft.activation_theory}  # model -> (cfg, precision, device_type) -> bytes


def training_step(model: str, cfg: Any, n_parameters: int, precision: str = "fp32",
                  device_type: str = "cpu") -> dict[str, int | None]:
    """Theoretical bytes per category for one Adam training step of `model` built from `cfg`."""
    params = FP32 * n_parameters
    count = ACTIVATION_COUNTS.get(model)
    activations = count(cfg, precision, device_type) if count else None
    return {
        "parameters": params,
        "gradients": params,
        "optimizer_state": 2 * params,
        "activations": activations,
        "peak": None if activations is None else 4 * params + activations,
        "formula": "16 B/param (fp32 weights, gradients, 2 Adam moments) + the model's saved-activation count",
    }
