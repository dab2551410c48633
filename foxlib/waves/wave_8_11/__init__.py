"""Wave 8.11: mixed precision — the memory and speed it buys, the accuracy it costs, all measured.

The seed expected fp16 to take the TFT from 3,096 MB to 1,548 MB (50 %), "+20 % faster" and
"< 2 % loss". Here every model is re-profiled in each precision, the TFT's step is timed with
the precisions alternating in one run, and the TFT is trained to a fixed budget of steps with
early stopping, several seeds per precision, and scored on held-out windows. The accuracy gate has
power only if fp32 beats the naive forecast (climatology, foxlib.harness.skill) by the harness's margin:
that is checked first, and the comparison counts only the seeds whose fp32 run has that skill.

measuring.py measures; records.py types its data (`Measurement`); analysis.py decides on raw values;
tables.py only formats. The names the notebook (notebooks/wave-8.11.py), foxlib/run/preflight.py and
the tests use are re-exported here.
"""
from foxlib.waves.wave_8_11.analysis import (accuracy_checks, accuracy_limit, checks, headline_degradation,
                                             named_figures, quantile_loss_rows, speed_ratio, speed_ratios)
from foxlib.waves.wave_8_11.measuring import accuracy_runs, check_precisions, measure
from foxlib.waves.wave_8_11.records import SCHEMA_VERSION, Measurement
from foxlib.waves.wave_8_11.tables import (accuracy_figure_text, accuracy_lines, accuracy_table, harness_table,
                                           memory_table, models_table, skill_table, speed_figure_text, speed_table,
                                           training_table, why_not_half)

__all__ = ["SCHEMA_VERSION", "Measurement", "accuracy_checks", "accuracy_figure_text", "accuracy_limit",
           "accuracy_lines", "accuracy_runs", "accuracy_table", "check_precisions", "checks", "harness_table",
           "headline_degradation", "measure", "memory_table", "models_table", "named_figures", "quantile_loss_rows",
           "skill_table", "speed_figure_text", "speed_ratio", "speed_ratios", "speed_table", "training_table",
           "why_not_half"]
