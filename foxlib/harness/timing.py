"""Step times measured side by side: variants run alternately after warm-up; medians, spreads, intervals.

Each round runs every variant once, in a rotated order, so that drift hits all alike (CUDA is synchronised around
each call). A ratio of two variants comes with a bootstrap interval: round r's sample over round r's baseline,
rounds resampled with replacement by a seeded generator (a re-render gives the same interval), the percentile
interval of the median ratio. Two ratios whose intervals overlap are a tie; a ratio is under a limit only when
its interval's upper end is.

An interval of the median from n rounds can cover it with at most 1 - 2 * 0.5**n, the chance that the rounds'
smallest and largest ratios lie on either side of it: 50 % from 2 rounds, 93.75 % from 5; the bootstrap's
percentile interval is then [smallest, largest] itself. Below ROUNDS_FOR_CONFIDENCE rounds an interval states
that coverage (stated_confidence), not CONFIDENCE, and its text says so.
"""
from __future__ import annotations

import math
import resource
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from foxlib.core.progress import progress
from foxlib.core.schema import Record

NOISY = 0.10  # a relative IQR above this marks a timing as noisy


def minor_faults() -> int:
    """This process's minor page faults so far, all its threads (getrusage): mostly a first touch of anonymous
    memory since it was mapped or since the kernel took its pages back (a base page, or a transparent huge page where
    the kernel uses one), also copy-on-write and pages found in the page cache."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@dataclass(frozen=True)
class Timing:
    """Raw samples of one variant (seconds) and their summary; on the CPU also each sample's minor page faults
    (counted around the timed call; empty where not counted)."""
    name: str
    samples: tuple[float, ...] = field(repr=False)
    minor_faults_samples: tuple[int, ...] = field(default=(), repr=False)

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

    @property
    def median_minor_faults(self) -> int | None:
        """A sample's minor page faults, median; None where they were not counted."""
        return int(statistics.median(self.minor_faults_samples)) if self.minor_faults_samples else None

    def to_dict(self) -> dict:
        return {"name": self.name, "median_s": self.median_s, "iqr_s": self.iqr_s, "noisy": self.noisy,
                "samples_s": list(self.samples)} | (
            {"minor_faults_samples": list(self.minor_faults_samples)} if self.minor_faults_samples else {})

    @classmethod
    def from_dict(cls, d: dict) -> "Timing":
        """Back from to_dict(): the raw samples are the data, the summary is recomputed from them."""
        if not d.get("samples_s"):
            raise ValueError(f"timing {d.get('name')!r} holds no raw samples (samples_s); intervals need them")
        return cls(d["name"], tuple(float(x) for x in d["samples_s"]),
                   tuple(int(x) for x in d.get("minor_faults_samples", ())))


def sync_device(device: torch.device | None):
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def time_alternating(variants: dict[str, Callable[[], object]], repeats: int = 10, warmup: int = 2,
                     device: torch.device | None = None) -> dict[str, Timing]:
    """Time each zero-argument callable `repeats` times, alternating between them after `warmup` rounds; on the CPU
    (device None or cpu) count the minor page faults of each timed call too."""
    if not variants or repeats < 1:
        raise ValueError("time_alternating needs at least one variant and one repeat")
    names = list(variants)

    def run(name: str) -> None:  # a failure names its variant (a CUDA error surfaces at the sync after it)
        try:
            variants[name]()
            sync_device(device)
        except Exception as exc:
            exc.add_note(f"while timing variant {name!r} (foxlib.harness.timing.time_alternating)")
            raise

    samples: dict[str, list[float]] = {n: [] for n in names}
    faults: dict[str, list[int]] = {n: [] for n in names}
    count_faults = device is None or device.type == "cpu"
    # minutes of work on a CPU: shown (stderr; the bar updates at most once a second, outside the timed calls)
    with progress((warmup + repeats) * len(names), f"timing {len(names)} variants alternately") as bar:
        for _ in range(warmup):
            for name in names:
                run(name)
                bar.advance()
        for r in range(repeats):  # each round in a rotated order
            for name in names[r % len(names):] + names[: r % len(names)]:
                sync_device(device)
                faults_before = minor_faults() if count_faults else 0
                start = time.perf_counter()
                run(name)
                samples[name].append(time.perf_counter() - start)
                if count_faults:
                    faults[name].append(minor_faults() - faults_before)
                bar.advance()
    return {n: Timing(n, tuple(s), tuple(faults[n])) for n, s in samples.items()}


CONFIDENCE = 0.95  # the coverage every interval a report shows aims at (stated_confidence: what its rounds give)
RESAMPLES = 2000  # bootstrap resamples of the rounds
SEED = 0  # of the bootstrap's generator: the same samples give the same interval


def attainable_confidence(rounds: int) -> float:
    """The most an interval of the median from `rounds` samples can cover: 1 - 2 * 0.5**rounds, the chance
    that the smallest and the largest sample lie on either side of the median (independent samples)."""
    if rounds < 1:
        raise ValueError(f"an interval needs at least one round, got {rounds}")
    return 1 - 2 * 0.5 ** rounds


def stated_confidence(rounds: int, confidence: float = CONFIDENCE) -> float:
    """The coverage an interval from `rounds` rounds states: `confidence`, or less where the rounds cannot give it."""
    return min(confidence, attainable_confidence(rounds))


ROUNDS_FOR_CONFIDENCE = next(n for n in range(1, 64) if attainable_confidence(n) >= CONFIDENCE)  # 6


def short_coverage(confidence: float | None) -> str:
    """" (50 % interval)" after an interval whose coverage falls short of CONFIDENCE; "" otherwise."""
    return f" ({100 * confidence:g} % interval)" if confidence is not None and confidence < CONFIDENCE else ""


@dataclass(frozen=True)
class RatioInterval(Record):
    """A ratio of step times (median over paired rounds) and its bootstrap confidence interval."""
    median: float
    low: float
    high: float
    confidence: float = CONFIDENCE

    def __post_init__(self):
        if not self.low <= self.high:
            raise ValueError(f"a ratio interval needs low <= high, got [{self.low}, {self.high}]")

    def overlaps(self, other: "RatioInterval") -> bool:
        return self.low <= other.high and other.low <= self.high

    tie = overlaps  # the difference is inside the intervals: neither is shown faster

    def under(self, limit: float) -> bool:
        return self.high < limit

    def holds(self, value: float) -> bool:
        """`value` inside the interval: a limit it holds is neither met nor missed (a tie)."""
        return self.low <= value <= self.high

    def scaled(self, factor: float) -> "RatioInterval":
        if not factor > 0:
            raise ValueError(f"a ratio interval scales by a positive factor, got {factor}")
        return RatioInterval(self.median * factor, self.low * factor, self.high * factor, self.confidence)

    def range_text(self) -> str:
        """E.g. "1.55x [1.50, 1.60]", for a table whose header states the coverage (shared_confidence)."""
        return f"{self.median:.2f}x [{self.low:.2f}, {self.high:.2f}]"

    def __str__(self) -> str:  # the coverage is said where it falls short of CONFIDENCE (too few rounds)
        return self.range_text() + short_coverage(self.confidence)


def shared_confidence(intervals) -> float:
    """The coverage one header or caption states for intervals timed in the same rounds: the least of theirs
    (CONFIDENCE where there is none)."""
    return min((i.confidence for i in intervals), default=CONFIDENCE)


def median_interval(samples) -> tuple[float, float, float, float]:
    """(median, low, high, confidence) of one variant's step times: the median, its bootstrap percentile interval
    and the coverage it states (stated_confidence)."""
    a = np.asarray(samples, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("a median interval needs at least one sample")
    median, low, high = bootstrap_median(a)
    return median, min(low, median), max(high, median), stated_confidence(a.size)


def bootstrap_median(values: np.ndarray, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float, float]:
    """(median, low, high): the median of `values` and the percentile interval of the resamples' medians."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng(seed)
    boot = np.median(values[rng.integers(0, values.size, size=(resamples, values.size))], axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return float(np.median(values)), float(min(low, high)), float(max(low, high))


def paired_ratios(samples: tuple[float, ...] | list[float], baseline: tuple[float, ...] | list[float]) -> np.ndarray:
    """Round r's sample over round r's baseline sample, for every round."""
    a, b = np.asarray(samples, dtype=float), np.asarray(baseline, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"paired ratios need the same number of rounds on both sides, got {a.size} and {b.size}")
    if (b <= 0).any() or (a <= 0).any():
        raise ValueError("step times must be positive to form ratios")
    return a / b


def interval_of_samples(samples, baseline, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                        seed: int = SEED) -> RatioInterval:
    """`ratio_interval` on raw samples (one per alternating round, in round order); its confidence is what the
    rounds can give (stated_confidence)."""
    ratios = paired_ratios(samples, baseline)
    median, low, high = bootstrap_median(ratios, confidence, resamples, seed)
    # the percentile interval of the median can miss its point estimate by a rounding error when
    # every round has the same ratio: the interval then is that ratio, exactly
    if math.isclose(low, high, rel_tol=1e-12):
        low = high = median
    return RatioInterval(median, low, high, stated_confidence(ratios.size, confidence))


def ratio_interval(timings: dict[str, Timing], name: str, baseline: str, confidence: float = CONFIDENCE,
                   resamples: int = RESAMPLES, seed: int = SEED) -> RatioInterval:
    """Step time of `name` over `baseline`'s in the same alternating run: the median of the per-round ratios and
    its bootstrap percentile interval."""
    if missing := [n for n in (name, baseline) if n not in timings]:
        raise ValueError(f"no timing for {missing}; timed variants: {', '.join(timings)}")
    return interval_of_samples(timings[name].samples, timings[baseline].samples, confidence, resamples, seed)
