"""Independent timing runs pooled into one interval. One alternating run's interval (foxlib.harness.timing) is
narrower than the spread between runs of the same code: a speed verdict on it flips from run to run. So a verdict
rests on MIN_RUNS or more runs, each in a fresh process, pooled: the geometric mean of their medians with a 95 %
interval from Student's t on the spread between them. Used by the seed's speed claims
(foxlib.core.seed_claims.pooled_verdict, foxlib.waves.wave_8_12.claim_runs) and the peer benchmark's step-time
targets (foxlib.report.peer_figures).
"""
import math
from typing import Iterable

MIN_RUNS = 3  # independent timing runs (fresh processes) a speed verdict needs
CONFIDENCE = 0.95  # the coverage of pooled_interval's interval
# Student's t, 97.5th percentile, for 1 .. 10 degrees of freedom (more: the last): a 95 % interval of a mean
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def t_975(df: int) -> float:
    if df < 1:
        raise ValueError(f"an interval needs at least one degree of freedom, got {df}")
    return T_975[min(df, len(T_975)) - 1]


def run_spread(claims: Iterable[list[tuple[float, float, float]]]) -> tuple[float, int]:
    """(sd, df): the spread between independent runs on the log scale (each claim's runs' medians around their
    mean), pooled over every claim timed in the same runs: their noise is the machine's, shared by every strategy
    timed in them, so pooling estimates it with more degrees of freedom (the sum of runs - 1)."""
    ss, df = 0.0, 0
    for runs in claims:
        logs = [math.log(m) for m, _, _ in runs]
        if len(logs) > 1:
            mean = sum(logs) / len(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    if df == 0:
        raise ValueError("a spread between runs needs a claim with two runs or more")
    return math.sqrt(ss / df), df


def pooled_interval(runs: list[tuple[float, float, float]],
                    spread: tuple[float, int] | None = None) -> tuple[float, float, float]:
    """(centre, low, high): the geometric mean of independent runs' medians ((median, low, high) each) with its
    95 % interval, Student's t on `spread` (run_spread's; the runs' own where None), never narrower than the
    median run's own half-width on the log scale / sqrt(runs)."""
    if not runs:
        raise ValueError("no runs to pool")
    n = len(runs)
    logs = [math.log(m) for m, _, _ in runs]
    centre = sum(logs) / n
    sd, df = spread if spread is not None else run_spread([runs])
    halves = sorted(math.log(hi / lo) / 2 for _, lo, hi in runs)
    half = max(t_975(df) * sd / math.sqrt(n), halves[n // 2] / math.sqrt(n))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)
