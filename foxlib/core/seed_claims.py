"""The original team's Wave 8.10 figures, from their quick-reference write-up of 2025-10-15 (this
module is the repository's record of them; the quotes beside the values are the write-up's words).

Taken with nvidia-smi in a Rust/Candle code base. They appear in reports only in columns
labelled as the seed's, beside what foxlib measured. MB here is the seed's own unit.
"""

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
