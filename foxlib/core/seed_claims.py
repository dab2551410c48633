"""The original team's Wave 8.10 figures, from their quick-reference write-up of 2025-10-15 (this module is the
repository's record of them; quotes are the write-up's words), taken with nvidia-smi in a Rust/Candle code base.
Reports show them only in columns labelled as the seed's; MB here is the seed's own unit. Below: how the seed's
speed claims are judged.
"""
import re

from foxlib.core.pooled_runs import MIN_RUNS

TFT_8_10_MB = {
    "parameters": 72,
    "activations": 2880,  # "Forward Activations"
    "gradients": 0,       # "Backward Gradients 0MB"
    "optimizer_state": 144,
    "peak": 3096,         # "PEAK TRAINING"
}
TFT_THEORETICAL_MB = 4.8          # "4.8MB theoretical"
TFT_FORWARD_MEASURED_MB = 2952    # "2,952MB measured", the "615x overhead"
TFT_FORWARD_BUDGET_MB = 500       # "(should be <500MB)", of the forward memory

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

SPEED_BAND = 0.10  # an approximate speed claim ("-40 % slower", "no change") holds within a factor 1 ± 10 %
WIDE_INTERVAL = 1.5  # high / low of an interval past which it confirms nothing
SPEED_READING = ("\"+N % faster\" and \"-N % slower\" are read as throughput (training windows per second) N % "
                 "higher or lower: time per window x 1/(1 + N/100) or x 1/(1 - N/100) (-40 % slower = 1.67x, "
                 f"-75 % slower = 4.00x); an approximate claim holds within a factor 1 ± {100 * SPEED_BAND:g} % of that "
                 f"ratio. The verdict rests on {MIN_RUNS} or more independent timing runs pooled: the 95 % interval of "
                 "their geometric mean, with the spread between runs estimated over every claim timed in the same "
                 "runs (Student's t on the pooled spread; never narrower than the runs' own intervals allow); "
                 "\"holds\" when that interval lies inside the band, \"wrong\" when it lies outside, else inconclusive")


def speed_ratio(text: str) -> float:
    """A seed speed claim as a time ratio against fp32 (SPEED_READING): "+20% faster" -> 1/1.2, "-40% slower"
    -> 1/0.6, "no change" -> 1."""
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


def interval_verdict(low: float, high: float, band: tuple[float, float]) -> str:
    """"holds" inside the claim's band, "wrong" apart from it, "inconclusive" across an edge or when wider than
    WIDE_INTERVAL."""
    if high < band[0] or low > band[1]:
        return "wrong"
    if band[0] <= low and high <= band[1] and high / low <= WIDE_INTERVAL:
        return "holds"
    return "inconclusive"


def pooled_verdict(n_runs: int, low: float, high: float, ratio: float) -> str:
    """A claim's verdict on the pooled interval of `n_runs` runs (wave 8.12's table and the index's ledger):
    "inconclusive" with fewer than MIN_RUNS, else interval_verdict."""
    return "inconclusive" if n_runs < MIN_RUNS else interval_verdict(low, high, speed_band(ratio))
