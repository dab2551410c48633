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
# # Wave 8.12 — Gradient checkpointing, and the seed's strategy table measured
#
# The seed's "Optimization Strategy Comparison" guessed every cell. Here each strategy is a TFT
# configuration whose training step is profiled (peak = largest live total during one step after a
# warm-up), timed with every strategy alternating in one run (ratios to fp32 with bootstrap intervals
# over the rounds: 95 %, or the less that fewer rounds can give, said beside them), and — where it
# changes what the model computes — trained with wave 8.11's harness (shorter runs). Memory in MB =
# 10^6 bytes.

# %% [markdown] tags=["notebook-only"]
# *Opened in JupyterLab and run there (Run All)*, this notebook takes the defaults `make report` takes on
# this device and writes its results.json and measurement.json to `scratch/wave-8.12/`, never into
# `notebooks/` or `reports/`; the cell after the parameters says so. `make report WAVE=8.12` writes the report.

# %% tags=["parameters"]
preset: str = "seed"  # TFT preset the strategies start from
batch_size: int = 32  # baseline batch size
encoder_length: int = 60  # baseline encoder (sequence) length in trading days
strategies: str = "all"  # "all", or strategy names separated by ";" (the fp32 baseline is always added)
device: str = "auto"  # auto (CUDA if present, else CPU), cpu or cuda
seed: int = 0  # random seed of models and batches for memory and timing
timing_repeats: int = 10  # timed steps per strategy, alternating
timing_warmup: int = 2  # untimed rounds first
accuracy_preset: str = "auto"  # TFT preset for accuracy runs; auto: seed on CUDA, small on the CPU
accuracy_seeds: int = 2  # training seeds per distinct function
accuracy_steps: int = 400  # step budget of each accuracy run
accuracy_eval_every: int = 25  # validation every this many steps
accuracy_patience: int = 10  # early stopping after this many validations without improvement
accuracy_val_windows: int = 512  # validation windows scored
accuracy_target: str = "return"  # what the TFT forecasts: return (next days' log returns) or abs_return
accuracy_batch_size: int = 64  # training batch of the accuracy runs (batch ÷4 trains a quarter of it)
accuracy_lr: float = 0.003  # Adam learning rate of the accuracy runs
accuracy_min_skill_pct: float = 2.0  # a run has skill when it beats climatology's validation quantile loss by this much
timelines: bool = True  # also record live memory through one step (plain, checkpointed, memory-efficient, CUDA graph)
timeline_dir: str = ""  # where the timelines' snapshot files go (a temporary folder if empty)
cublas_workspace_knob: bool = True  # on CUDA, also measure the cuBLAS workspace size as a memory knob (fresh processes)
claim_runs: int = 3  # independent runs (fresh processes) that time the strategies the seed's speed claims are about; a verdict pools them (the interval of their mean)
checkpoint_path: str = ""  # a file that keeps each finished part of the measurement; a stopped run given it again resumes
measurements: str = ""  # a measurement JSON from `python -m foxlib measure` to report instead of measuring
output_dir: str = ""  # where results.json goes (set by the runner)
budgets_file: str = ""  # budgets TOML; empty: the project's budgets.toml

# %%
from IPython.display import HTML, Markdown, display

from foxlib.report import reading
from foxlib.report import charts
from foxlib.run import notebook_cells as notebook
from foxlib.memory import tolerances as prediction
from foxlib.waves.wave_8_12 import analysis, records, tables

params = notebook.parameters("8.12", globals())
budgets = notebook.budgets(params)
m = notebook.measure_or_load("8.12", params)  # typed and checked
record = records.Measurement812.from_measurement(m)  # made once: what every decision, table and chart below reads
checks = analysis.checks(record, budgets)
recommended = analysis.recommend(record, budgets)
per_class = analysis.recommend_per_class(record, budgets)
display(HTML(notebook.verdict_banner("8.12", checks, m)))
display(reading.opening("8.12", checks, params["output_dir"] or "."))

# %% [markdown]
# ## The recommendation
# Among the configurations whose peak is under the budget, whose accuracy stays within the budgets
# file's tolerance of fp32 and whose slowdown per training window is under the limit (the upper end
# of its interval, not its median), the fastest per training window. Each ratio to fp32 is the
# median of per-round ratios (every round times all strategies alternately) with a bootstrap
# interval over the rounds; when other candidates' intervals overlap the fastest's, the difference
# is noise: a tie, and the lightest of the tied wins.

# %%
display(Markdown(tables.recommendation_text(recommended)))
display(notebook.table(notebook.checks_table(checks)))
display(Markdown("**Per card class.** The same decision among the strategies each class of device runs (a GPU "
                 "without bf16 has no TF32 either: V100, T4, RTX 20xx, the 4 GB GTX 1650). Memory holds across a "
                 "class; speeds are this device's own."))
display(notebook.table(tables.per_class_table(per_class)))
display(notebook.table(tables.targets(record, budgets)))
display(Markdown(tables.other_kind_text(record, budgets, recommended)))
display(notebook.table(tables.floors_table(record, budgets)))
display(Markdown(tables.lightest_text(record, budgets)))

# %% [markdown]
# ## The cuBLAS workspace: a memory knob set before the process starts
# cuBLAS keeps a workspace per stream, sized by `CUBLAS_WORKSPACE_CONFIG` when the process first uses
# it: it counts in the allocator peak, not in the model peak. Each row was measured in fresh processes,
# one at the default size and one at the small one per round (rounds alternating which runs first):
# memory from the first round, step times as each round's median with the ratio paired by round.

# %%
display(notebook.table(tables.workspace_table(record)) if record.workspace_knob else
        Markdown(f"Not measured in this run: {record.knob_absent}."))

# %% [markdown]
# ## The strategy table, measured, with the seed's guesses beside
# *step time ratio*: median of the per-round ratios of step times to the fp32 baseline's, measured
# alternately in one run (*step spread*: the interquartile range of a strategy's steps);
# *time per window ratio*: the same per training window (smaller batches need more steps), with its
# bootstrap interval over the rounds; *accuracy impact*: validation quantile loss against fp32
# (positive = worse), with fp32's own seed-to-seed spread for scale; *allocator peak*: the peak + the
# step's own cuBLAS workspaces, "—" for an eager step profiled after a CUDA graph in the same process (what
# its start held then includes the graphs' workspaces; wave 8.12 now profiles its eager steps first). The
# table is rounded for reading; the decisions above use the unrounded record.

# %%
display(notebook.table(tables.table(record)))
if faults := tables.faults_text(record, recommended["strategy"]):
    display(Markdown(faults))
if record.skipped:
    display(Markdown("Not measured here: " + "; ".join(f"{n} ({why})" for n, why in record.skipped.items()) + "."))
if record.accuracy_preset != record.preset:
    display(Markdown(f"Accuracy runs used the `{record.accuracy_preset}` TFT preset (batch and sequence scaled "
                     "by the same fractions): the seed preset trains too slowly on the CPU."))

# %% [markdown]
# ## The seed's speed claims in independent runs
# One alternating run's interval is narrower than the spread between runs of the same code, so the
# strategies the seed's speed claims are about are timed again in independent runs (fresh processes, fp32
# beside them in each). The runs are pooled: a claim holds, or is wrong, only when the interval of their mean
# lies inside, or outside, the claim's band; else it is inconclusive.

# %%
display(Markdown(tables.claim_runs_text(m.claim_runs.absent_reason)))
claims = tables.claim_runs_table(record)
if claims is not None:
    display(notebook.table(claims))

# %% [markdown]
# ## Accuracy: skill over the naive forecast, and "same function" as numbers
# An accuracy impact means something only where the fp32 runs beat climatology (the training windows'
# empirical quantiles of the target). Strategies that claim the same function as the plain step of
# their precision are checked on this device: same weights and batch, dropout off, max |Δ| of outputs
# and gradients.

# %%
display(notebook.table(tables.accuracy_skill(record)))
if not analysis.accuracy_powered(record):
    display(Markdown("**No power:** an fp32 accuracy run does not beat climatology by the harness's threshold; "
                     "the accuracy impacts above say nothing about the strategies."))
display(notebook.table(tables.same_function_table(record.same_function, record.same_function_errors)))

# %% [markdown]
# ## Memory against time per training window

# %%
front = analysis.pareto(record)
display(Markdown("Pareto front (no other strategy is both lighter and faster per training window, by median): "
                 + ", ".join(front)))
notebook.figure(charts.pareto(record, front, budgets["tft"]["peak_training_mb"], budgets["speed"]["max_slowdown"],
                              recommended["strategy"], f"TFT strategies — {record.device.name}"))

# %% [markdown]
# ## Where the peak is: live memory through one step
# The step's own live tensor bytes through forward, backward and the optimizer step (CUDA: the allocator's
# snapshot less what the process held that is not the step's; CPU: the profiler's allocation events), the
# peak marked and its largest owners named: each line's peak is the model peak of the tables above. Checkpointing
# empties what the forward keeps for backward, but the recompute and the backward's temporaries come back
# when gradients already exist, so the step's peak moves into backward instead of falling. The CUDA
# graph's line (CUDA only) is its capture: every replay reuses the graph's private pool and allocates
# nothing. A line recorded without call stacks (where recording them failed) names no owners.

# %%
chart, text = tables.timeline_section(m.timelines, f"TFT step, its own live memory — {record.device.name}",
                                      int(budgets["tft"]["peak_training_mb"] * 10**6),
                                      params["output_dir"] or ".", notebook.measurement_dirs(params))
if chart:
    notebook.figure(chart.figure, chart.caption, chart.alt_text)
display(Markdown(text))

# %% [markdown]
# ## Predicted before running
# Each step above was first predicted by `foxlib.memory.predict_step` (fake tensors, nothing allocated).
# Tolerance: 5 % per category, 10 % on the peak; on CUDA,
# 15 % on the activations and the forward peak of a model with an LSTM (cuDNN's reserve is not modelled).
# A gap outside it is named, never hidden.

# %%
pairs = m.prediction_pairs()
predicted = prediction.summary(pairs, record.device.type)  # measured against predicted, per category
display(notebook.table(predicted))

# %%
from foxlib.core.figures import as_dict

res = notebook.finish("8.12", params, m, checks, recommended=recommended, recommended_per_class=per_class,
                      record=record.to_dict(),
                      figures=as_dict(analysis.named_figures(record)),
                      prediction=predicted.to_dict("records"))
display(Markdown(notebook.footer(res)))

# %%
display(reading.closing(res, params["output_dir"] or "."))
