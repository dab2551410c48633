"""The original team's Wave 8.10 figures, from their quick-reference write-up of 2025-10-15 (this
module is the repository's record of them; the quotes beside the values are the write-up's words).

Taken with nvidia-smi in a Rust/Candle code base. They appear in reports only in columns
labelled as the seed's, beside what foxlib measured. MB here is the seed's own unit.
"""
import re

TFT_8_10_MB = {
    "parameters": 72,
    "activations": 2880,  # "Forward Activations"
    "gradients": 0,       # "Backward Gradients 0MB"
    "optimizer_state": 144,
    "peak": 3096,         # "PEAK TRAINING"
}
TFT_THEORETICAL_MB = 4.8          # "4.8MB theoretical"
TFT_FORWARD_MEASURED_MB = 2952    # "2,952MB measured", the "615x overhead"

ENSEMBLE_CURRENT_MB = {"dqn": 6, "ppo": 145, "mamba2": 164, "tft": 3096}
ENSEMBLE_TARGET_MB = {"dqn": 3, "ppo": 73, "mamba2": 82, "tft": 774}   # "FP16 + Checkpointing"
ENSEMBLE_CARD_MB = 4096           # the seed's "4GB GPU" (3,411 MB = 83 %, 685 MB free)

# "Optimization Strategy Comparison": guesses, never measured
STRATEGY_GUESSES = {
    "fp16": {"memory_reduction_pct": 50, "speed": "+20% faster", "accuracy": "<2% loss"},
    "checkpointing": {"memory_reduction_pct": 75, "speed": "-40% slower", "accuracy": "none"},
    "batch_8": {"memory_reduction_pct": 75, "speed": "-75% slower", "accuracy": "none"},
    "sequence_30": {"memory_reduction_pct": 50, "speed": "no change", "accuracy": "model degradation"},
}
FP16_EXPECTED_PEAK_MB = 1548

# ------------------------------------------------------------------ reading the seed's speed claims, once
MIN_RUNS = 3
"""Independent timing runs (fresh processes) a speed verdict needs: one run's interval is narrower than the
spread between runs of the same code (foxlib.waves.wave_8_12.claim_runs)."""
SPEED_BAND = 0.10
"""An approximate speed claim ("-40 % slower", "no change") holds within a factor 1 ± 10 % of its ratio."""
WIDE_INTERVAL = 1.5
"""high / low of a timing interval past which it confirms nothing."""
SPEED_READING = ("\"+N % faster\" and \"-N % slower\" are read as throughput (training windows per second) N % "
                 "higher or lower: time per window x 1/(1 + N/100) or x 1/(1 - N/100) (-40 % slower = 1.67x, "
                 f"-75 % slower = 4.00x); an approximate claim holds within a factor 1 ± {100 * SPEED_BAND:g} % of that "
                 f"ratio, and a verdict needs {MIN_RUNS} independent timing runs that agree (else inconclusive)")


def speed_ratio(text: str) -> float:
    """A seed speed claim as a time ratio against fp32, read as SPEED_READING says: "+20% faster" -> 1/1.2,
    "-40% slower" -> 1/0.6, "no change" -> 1."""
    t = text.strip().lower()
    if t == "no change":
        return 1.0
    m = re.fullmatch(r"([+-]?)(\d+(?:\.\d+)?)\s*%\s*(faster|slower)", t)
    if not m:
        raise ValueError(f"no reading for the speed claim {text!r}: '+N % faster', '-N % slower' or 'no change'")
    pct = float(m.group(2))
    if m.group(3) == "faster":
        return 1 / (1 + pct / 100)
    if pct >= 100:
        raise ValueError(f"a slowdown of {pct} % has no time ratio")
    return 1 / (1 - pct / 100)


def speed_band(ratio: float) -> tuple[float, float]:
    """The ratios within SPEED_BAND of a claim's."""
    return ratio / (1 + SPEED_BAND), ratio * (1 + SPEED_BAND)


def run_verdict(low: float, high: float, band: tuple[float, float]) -> str:
    """One run's interval against a claim's band: "wrong" when they are apart, "holds" when they meet and the
    interval is narrow enough to confirm anything (WIDE_INTERVAL), else "inconclusive"."""
    if high < band[0] or low > band[1]:
        return "wrong"
    return "holds" if high / low <= WIDE_INTERVAL else "inconclusive"


def speed_verdict(runs: list[tuple[float, float, float]], ratio: float) -> str:
    """The claim's verdict over independent runs ((median, low, high) each): "holds" or "wrong" when at least
    MIN_RUNS runs all say so, else "inconclusive"."""
    if len(runs) < MIN_RUNS:
        return "inconclusive"
    verdicts = {run_verdict(lo, hi, speed_band(ratio)) for _, lo, hi in runs}
    return verdicts.pop() if len(verdicts) == 1 else "inconclusive"
