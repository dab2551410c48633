"""The floors a training step cannot go under: bytes per parameter, and time at the device's published peaks.

Bytes: fp32 weights (4), gradients (4) and Adam's two moments (8): 16 B per parameter; with Adam in backward
(step_options.OptimizerInBackward) the gradients never all exist: 12 B plus the largest gradients alive together.
Time: the step's FLOPs (FlopCounterMode over forward + backward: matrix products, attention; not elementwise work)
over the published dense peak for the precision, and the optimizer's least traffic (read weights, gradients, both
moments; write weights and moments: 28 B per fp32 parameter) over the published bandwidth; the larger is the floor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from foxlib.core.schema import Record
from foxlib.memory.theory import ADAM_FP32_BYTES_PER_PARAMETER

FLOOR_BYTES_PER_PARAMETER = ADAM_FP32_BYTES_PER_PARAMETER  # fp32 weights + gradients + two Adam moments
FLOOR_BYTES_PER_PARAMETER_IN_BACKWARD = 12  # the gradients freed as each is applied
OPTIMIZER_TRAFFIC_BYTES_PER_PARAMETER = 28  # read w, g, m, v (16) + write w, m, v (12)

# published dense peaks (no sparsity) and memory bandwidth: vendors' data sheets, not measured here
PUBLISHED_PEAKS = {
    "H200": {"fp32_flops": 67e12, "tf32_flops": 494.7e12, "bf16_flops": 989.4e12, "fp16_flops": 989.4e12,
             "bandwidth_bytes_per_s": 4.8e12, "source": "NVIDIA H200 SXM data sheet (dense, without sparsity)"},
    "H100": {"fp32_flops": 67e12, "tf32_flops": 494.7e12, "bf16_flops": 989.4e12, "fp16_flops": 989.4e12,
             "bandwidth_bytes_per_s": 3.35e12, "source": "NVIDIA H100 SXM data sheet (dense, without sparsity)"},
    "A100": {"fp32_flops": 19.5e12, "tf32_flops": 156e12, "bf16_flops": 312e12, "fp16_flops": 312e12,
             "bandwidth_bytes_per_s": 2.039e12, "source": "NVIDIA A100 80GB SXM data sheet (dense, without sparsity)"},
}


def step_flops(model: torch.nn.Module, batch: Any, loss_fn) -> int:
    """Floating-point operations of one forward + backward (FlopCounterMode's count: matrix products,
    convolutions, attention)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        loss_fn(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


@dataclass(frozen=True)
class Floors(Record):
    n_parameters: int
    flops: int | None
    bytes_floor: int
    bytes_floor_in_backward: int
    time_floor_s: dict[str, float] | None  # per precision label ("fp32", "tf32", "bf16")
    traffic_floor_s: float | None
    peaks_source: str | None


def floors(n_parameters: int, flops: int | None, device_name: str) -> Floors:
    """The step's floors for `n_parameters` fp32 parameters and `flops` per step on the device named (e.g.
    "NVIDIA H200"; no time floor for one PUBLISHED_PEAKS does not list)."""
    peaks = next((p for key, p in PUBLISHED_PEAKS.items() if key in device_name), None)
    time_floor = traffic = None
    if peaks and flops is not None:
        time_floor = {p: flops / peaks[f"{p}_flops"] for p in ("fp32", "tf32", "bf16")}
        traffic = OPTIMIZER_TRAFFIC_BYTES_PER_PARAMETER * n_parameters / peaks["bandwidth_bytes_per_s"]
    return Floors(n_parameters, flops, FLOOR_BYTES_PER_PARAMETER * n_parameters,
                  FLOOR_BYTES_PER_PARAMETER_IN_BACKWARD * n_parameters, time_floor, traffic,
                  peaks["source"] if peaks else None)
