"""Wave 8.10: the TFT's memory profile, the ensemble beside it, and the seed's figures explained.

measuring.py does the work on a device and returns plain data (JSON-able, bytes); records.py types it
(`Measurement`, with a schema version); analysis.py turns a Measurement into checks and figures on raw
bytes; tables.py only formats. Nothing after measuring.py touches a model. The names the notebook
(notebooks/wave-8.10.py), the runner and the tests use are re-exported here.
"""
from foxlib.waves.wave_8_10.analysis import (MODEL_PEAK, MODEL_PEAK_DEFINITION, PROCESS_PEAK,
                                             PROCESS_PEAK_DEFINITION, UNEXPLAINED_TARGET_PCT, EnsembleTotals,
                                             checks, ensemble_totals, named_figures, unexplained_share)
from foxlib.waves.wave_8_10.measuring import TARGET_PRECISION, TARGET_TFT, measure
from foxlib.waves.wave_8_10.records import SCHEMA_VERSION, Measurement
from foxlib.waves.wave_8_10.tables import (activations_by_module, breakdown_table, cuda_reconciliation,
                                           ensemble_table, second_opinion_table, seed_explanations,
                                           target_state_note, target_state_table, unexplained_by_model)

__all__ = ["MODEL_PEAK", "MODEL_PEAK_DEFINITION", "PROCESS_PEAK", "PROCESS_PEAK_DEFINITION", "SCHEMA_VERSION",
           "TARGET_PRECISION", "TARGET_TFT", "UNEXPLAINED_TARGET_PCT", "EnsembleTotals", "Measurement",
           "activations_by_module", "breakdown_table", "checks", "cuda_reconciliation", "ensemble_table",
           "ensemble_totals", "measure", "named_figures", "second_opinion_table", "seed_explanations",
           "target_state_note", "target_state_table", "unexplained_by_model", "unexplained_share"]
