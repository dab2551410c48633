"""Wave 8.13: production validation — the whole ensemble trained and served under a real 4 GB cap.

On a GPU the caching allocator is capped with `torch.cuda.set_per_process_memory_fraction` so
that the cap plus this process's CUDA context (the context is outside the cap) equals the card. An
out-of-memory error inside the cap is then a real one. The context grows as kernels and library
handles load lazily, so every library the run uses is warmed up first (`warm_up`: each model's
training step and inference, in its precision, on the run's streams or threads), then the context
is measured (NVML per-process used − allocator reserved) and the cap set (`cap_arithmetic`). Through
training and inference a background thread samples NVML's per-process figure (`Sampler`,
`NvmlProcessReader`), also after every step and inference round; the largest sample is checked
against the card (`nvml_peak`, NVML_CHECK). Where NVML does not list this process the check is
not applicable, and says so; on the CPU it is not applicable.
The four models train in one process, interleaved round-robin (one step of each in turn, each
with its own Adam; gradients are freed after every step), then all four serve at once.

On the CPU nothing can be capped. There the cap is checked by accounting: each model's training
step is measured on its own (`foxlib.harness.measure_step.measure_model`) and the interleaved run is walked on
paper — the stepping model's step peak plus what every other model keeps between its steps. The
real CPU run stops where that accounting says the cap would be exceeded, as a GPU run would stop
at its out-of-memory error. Every such figure is labelled "not enforced (accounting)".

Names: a model's "model peak" is its own step's tensors at their largest; the ensemble's "process
figure" is the model peaks summed + the cuBLAS workspaces once per stream + the CUDA context.

`measure(...)` does the work and returns measurement.json's data (JSON-able, bytes). `Measurement.from_dict`
checks it and types it; everything after it turns that measurement into checks, tables and charts on raw
bytes and seconds, and touches no model. "depends_on" cites
(foxlib.core.provenance) the wave 8.12 results whose recommendation the TFT took.

The modules, one idea each (what callers use is importable from this package): tft.py (the TFT's
configuration, 8.12's recommendation), account.py (the CPU's accounting), oom.py (out-of-memory
records), cap.py (the context and the cap), nvml.py (NVML's per-process figure), members.py (the
models' lifecycle), train.py (the interleaved training run), serve.py (concurrent inference),
warmup.py (the warm-up before the context), measure.py (`measure`), records.py (the typed record),
analysis.py (figures, checks, sentences), tables.py, charts.py. cards.py with card_table.py (which
card fits) and deployment.py (deployment.md) are imported by name.
"""
from __future__ import annotations

# every name below is re-exported: callers use foxlib.waves.wave_8_13.<name>
from foxlib.models import ENSEMBLE, MODELS
from foxlib.waves.wave_8_13.account import NOT_ENFORCED, account_training, resident_bytes
from foxlib.waves.wave_8_13.analysis import (
    INFERENCE_CHECK, TRAIN_CHECK, cap_text, card_class_text, checks, context_bytes, depends_on_text, figures, how, inference_figure,
    inference_limit, kept_bytes, largest_context_bytes, limit_text, model_peaks, named_figures, nvml_check,
    nvml_text, process_figure, tft_text, training_figure, workspace_bytes)
from foxlib.waves.wave_8_13.cap import cap_arithmetic, measure_context
from foxlib.waves.wave_8_13.charts import COLOURS, latency_chart, training_chart
from foxlib.waves.wave_8_13.measure import GIB, INFERENCE_MODES, check_parameters, measure
from foxlib.waves.wave_8_13.members import load_member, Member, step_member
from foxlib.waves.wave_8_13.nvml import (NVML_CHECK, SAMPLE_INTERVAL_S, NvmlPeak, NvmlProcessReader, Sampler,
                                         nvml_peak, nvml_samples)
from foxlib.waves.wave_8_13.oom import oom_where, requested_bytes
from foxlib.waves.wave_8_13.records import SCHEMA_VERSION, Cap, Citation, Measurement, NvmlSeries, Phase, Step
from foxlib.waves.wave_8_13.serve import WARMUP_ROUNDS
from foxlib.waves.wave_8_13.tables import (cap_table, configuration_table, inference_table, oom_table,
                                           totals_table, training_table)
from foxlib.waves.wave_8_13.tft import RECOMMENDING_WAVE, TFT_CONFIG_EXAMPLE, recommendation_file, resolve_tft
from foxlib.waves.wave_8_13.train import summarise_steps
from foxlib.waves.wave_8_13.warmup import WARMUP_TRAINING_STEPS, warm_up
