"""Step times measured side by side: variants run alternately, after warm-up; medians and spreads.

On a noisy machine only a ratio measured in one run means anything. Each round runs every
variant once, in a rotated order, so drift hits all variants alike. On CUDA the device is
synchronised around each call. A variant's spread (interquartile range over median) is kept
with its result, so a report can say when a difference is within noise.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

NOISY = 0.10  # a relative IQR above this marks a timing as noisy


@dataclass(frozen=True)
class Timing:
    """Raw samples of one variant (seconds) and their summary."""
    name: str
    samples: tuple[float, ...] = field(repr=False)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr_s(self) -> float:
        if len(self.samples) < 4:
            return max(self.samples) - min(self.samples)
        q = statistics.quantiles(self.samples, n=4)
        return q[2] - q[0]

    @property
    def noisy(self) -> bool:
        return self.iqr_s > NOISY * self.median_s

    def to_dict(self) -> dict:
        return {"name": self.name, "median_s": self.median_s, "iqr_s": self.iqr_s, "noisy": self.noisy,
                "samples_s": list(self.samples)}


def _sync(device: torch.device | None):
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def time_alternating(variants: dict[str, Callable[[], object]], repeats: int = 10, warmup: int = 2,
                     device: torch.device | None = None) -> dict[str, Timing]:
    """Time each zero-argument callable `repeats` times, alternating between them after `warmup` rounds."""
    if not variants or repeats < 1:
        raise ValueError("time_alternating needs at least one variant and one repeat")
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            _sync(device)
            start = time.perf_counter()
            variants[name]()
            _sync(device)
            samples[name].append(time.perf_counter() - start)
    return {n: Timing(n, tuple(s)) for n, s in samples.items()}


def ratio(timings: dict[str, Timing], name: str, baseline: str) -> float:
    """Median step time of `name` over that of `baseline` (measured in the same run)."""
    return timings[name].median_s / timings[baseline].median_s
