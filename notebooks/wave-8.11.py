# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: foxlib
#     language: python
#     name: foxlib
# ---

# %% [markdown]
# # Wave 8.11 — Mixed precision
#
# The seed planned to "enable mixed_precision = true" and expected 3,096 MB → 1,548 MB (50 %),
# "+20 % faster" and "< 2 % loss", with an accuracy gate of < 5 % degradation. Those were guesses.
# Here each precision is measured: memory by category (one training step after a warm-up), step
# time (precisions alternating in one run, medians), and accuracy (the TFT trained to a fixed step
# budget with validation early stopping, several seeds each, scored on held-out windows after 2015).
# Memory in MB = 10^6 bytes.

# %% [markdown] tags=["notebook-only"]
# *Opened in JupyterLab and run there (Run All)*, this notebook takes the defaults `make report` takes on
# this device and writes its results.json and measurement.json to `scratch/wave-8.11/`, never into
# `notebooks/` or `reports/`; the cell after the parameters says so. `make report WAVE=8.11` writes the report.

# %% tags=["parameters"]
preset: str = "seed"  # preset of every model profiled for memory and timing
batch_size: int = 32  # TFT training batch size
encoder_length: int = 60  # TFT encoder (sequence) length in trading days
precisions: str = "fp32,fp16,bf16"  # precisions to compare, comma-separated; fp32 is the baseline
candidate: str = "fp16"  # the precision the wave decides on (the seed planned fp16)
models: str = "tft,dqn,ppo,mamba2"  # models re-profiled in every precision
device: str = "auto"  # auto (CUDA if present, else CPU), cpu or cuda
seed: int = 0  # random seed of models and batches for memory and timing
timing_repeats: int = 15  # timed steps per precision (after 3 warm-up rounds), alternating
accuracy_preset: str = "auto"  # TFT preset for the accuracy runs; auto: seed on CUDA, small on the CPU
accuracy_seeds: int = 3  # training seeds per precision
accuracy_steps: int = 400  # step budget of each accuracy run
accuracy_eval_every: int = 25  # validation every this many steps
accuracy_patience: int = 10  # early stopping after this many validations without improvement
accuracy_val_windows: int = 512  # validation windows scored
accuracy_memory_efficient: bool = True  # train the accuracy runs on the batched path (numerically equal, faster)
accuracy_target: str = "return"  # what the TFT forecasts: return (next days' log returns) or abs_return
accuracy_batch_size: int = 64  # training batch of the accuracy runs
accuracy_lr: float = 0.003  # Adam learning rate of the accuracy runs
accuracy_min_skill_pct: float = 2.0  # fp32 must beat climatology's validation quantile loss by this much (power)
measurements: str = ""  # a measurement JSON from `python -m foxlib measure` to report instead of measuring
output_dir: str = ""  # where results.json goes (set by the runner)
budgets_file: str = ""  # budgets TOML; empty: the project's budgets.toml

# %%
from IPython.display import HTML, Markdown, display

from foxlib.report import reading
from foxlib.report import charts
from foxlib.run import notebook_cells as notebook
from foxlib.memory import tolerances as prediction
from foxlib.core import seed_claims
from foxlib.waves.wave_8_11 import analysis, tables

params = notebook.parameters("8.11", globals())
budgets = notebook.budgets(params)
m = notebook.measure_or_load("8.11", params)  # typed and checked
checks = analysis.checks(m, budgets)
display(HTML(notebook.verdict_banner("8.11", checks, m)))
display(reading.opening("8.11", checks, params["output_dir"] or "."))
display(Markdown(tables.speed_line(m)))

# %% [markdown]
# ## Checks
# The candidate precision must keep the TFT's validation quantile loss within the budgets file's
# tolerance of fp32 and its model peak (the step's own tensors) under the peak budget.

# %%
display(notebook.table(notebook.checks_table(checks)))
if m.accuracy_preset != m.measure_parameters.get("preset", "seed"):
    display(Markdown(f"**Note:** the accuracy runs used the `{m.accuracy_preset}` TFT preset "
                     f"(`{m.accuracy_config}`), not the one profiled for memory: on the CPU the seed preset "
                     "trains too slowly for several seeds and precisions."))

# %% [markdown]
# ## Memory per precision (TFT)
# **model peak**: the step's own tensors at their largest (the figure wave 8.10 checks); **process peak**:
# model peak + the cuBLAS workspaces (each stream's once) + the CUDA context (on the CPU, the model peak).

# %%
display(notebook.table(tables.memory_table(m)))
notebook.figure(charts.precision_memory(m.memory["tft"], budgets["tft"]["peak_training_mb"],
                                        {"fp16": seed_claims.FP16_EXPECTED_PEAK_MB},
                                        f"TFT training step by precision — {m.device.name}"))

# %% [markdown]
# ### Why mixed precision does not halve the memory

# %%
display(notebook.table(tables.why_not_half(m)))

# %% [markdown]
# ### Every model, per precision
# Each model's model peak, the same figure under the same name as wave 8.10's ensemble table.

# %%
display(notebook.table(tables.models_table(m)))

# %% [markdown]
# ## Predicted before running
# Each step above was first predicted by `foxlib.memory.predict_step` (fake tensors, nothing allocated).
# Tolerance: 5 % per category, 10 % on the peak; on CUDA,
# 15 % on the activations and the forward peak of a model with an LSTM (cuDNN's reserve is not modelled).
# A gap outside it is named, never hidden.

# %%
pairs = m.prediction_pairs()
predicted = prediction.summary(pairs, m.device.type)  # measured against predicted, per category
display(notebook.table(predicted))

# %% [markdown]
# ## Speed: the TFT's training step, precisions alternating in one run

# %%
display(notebook.table(tables.speed_table(m)))
ratios = analysis.speed_ratios(m)
notebook.figure(charts.step_time_ratios(ratios, f"TFT training step time relative to fp32 — {m.device.name}"),
                *tables.speed_figure_text(ratios))

# %% [markdown]
# ## Accuracy: skill over the naive forecast first
# The naive forecast is climatology: the training windows' empirical quantiles of the target, the same
# every day. A comparison of precisions has power only where fp32 beats it (skill score
# 1 − QL_model / QL_climatology at least the harness's threshold); the gate counts those seeds only.

# %%
display(notebook.table(tables.skill_table(m)))
display(notebook.table(tables.harness_table(m)))

# %% [markdown]
# ## Accuracy: degradation against fp32, with fp32's own seed-to-seed spread
# A difference smaller than the spread of fp32 across seeds is noise.

# %%
display(notebook.table(tables.accuracy_table(m)))
limit, rows = analysis.accuracy_limit(m, budgets), analysis.quantile_loss_rows(m)
notebook.figure(charts.accuracy_spread(rows, *tables.accuracy_lines(limit), "validation quantile loss (lower is better)",
                                       f"TFT ({m.accuracy_preset} preset) validation quantile loss per precision"),
                *tables.accuracy_figure_text(rows, limit))
display(notebook.table(tables.training_table(m)))

# %%
from foxlib.core.figures import as_dict

res = notebook.finish("8.11", params, m, checks, figures=as_dict(analysis.named_figures(m)),
                      prediction=predicted.to_dict("records"))
display(Markdown(notebook.footer(res)))

# %%
display(reading.closing(res, params["output_dir"] or "."))
