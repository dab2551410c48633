"""Wave 8.12: the seed's optimisation-strategy table, measured, and the configuration to ship.

The seed guessed every cell: FP16 50 % / +20 % faster, checkpointing 75 % / −40 %, batch 32→8
75 %, sequence 60→30 50 %. Each strategy here is a TFT configuration (strategies.py): its
training-step memory is profiled, its step time measured with all strategies alternating in one run,
and — where it changes the numbers the model computes — its accuracy measured with wave 8.11's
harness (foxlib.harness.training); the strategies that compute the same function inherit the
accuracy of their precision, the claim shown as max |Δ| of outputs and gradients (measuring.py).

measuring.py measures (workspace.py: the cuBLAS workspace knob, in fresh processes); records.py types its data (`Measurement812`, intervals included); analysis.py
decides on the record; tables.py only formats. The names the notebook (notebooks/wave-8.12.py),
foxlib/core/parameters.py, foxlib/run/preflight.py, benchmarks/peer_tft.py and the tests use are
re-exported here.
"""
from foxlib.waves.wave_8_12.analysis import (accuracy_powered, checks, interval_text, lightest_at_full_speed,
                                             named_figures, pareto, recommend, recommend_per_class, slowdown_check)
from foxlib.waves.wave_8_12.measuring import (TIMELINE_CASES, accuracy_runs, measure, measure_timeline_cases,
                                              same_function_checks)
from foxlib.waves.wave_8_12.records import (FLOOR_BYTES_PER_PARAMETER, SCHEMA_VERSION, Measurement812,
                                            StrategyResult, record)
from foxlib.waves.wave_8_12.strategies import (BASELINE, GRAPH_SKIPPED, STRATEGIES, Strategy,
                                               configure, resolve_overrides, runnable, select)
from foxlib.waves.wave_8_12.workspace import knob_absent_reason, knob_error
from foxlib.waves.wave_8_12.tables import (accuracy_skill, claim_runs_table, claim_runs_text, per_class_table, figures, floors_table, lightest_text, other_kind_text, recommendation_text,
                                           same_function_table, table, targets, timeline_lines, workspace_table)

__all__ = ["BASELINE", "FLOOR_BYTES_PER_PARAMETER", "GRAPH_SKIPPED", "SCHEMA_VERSION",
           "STRATEGIES", "TIMELINE_CASES", "Measurement812", "Strategy", "StrategyResult", "accuracy_powered",
           "accuracy_runs", "accuracy_skill", "checks", "claim_runs_table", "claim_runs_text", "per_class_table", "configure", "figures", "floors_table", "interval_text", "knob_absent_reason", "knob_error",
           "lightest_at_full_speed", "lightest_text", "measure", "measure_timeline_cases", "named_figures", "other_kind_text", "pareto", "recommend", "recommend_per_class",
           "recommendation_text", "record", "resolve_overrides", "runnable", "same_function_checks",
           "same_function_table", "select", "slowdown_check", "table", "targets", "timeline_lines", "workspace_table"]
