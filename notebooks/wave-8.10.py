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
# # Wave 8.10 — TFT GPU memory profile
#
# Does the Temporal Fusion Transformer fit its memory budget in F32, batch 32, sequence 60, and
# where does its memory go? One training step (forward + quantile loss, backward, Adam step) is
# measured after a warm-up step. Memory is in MB = 10^6 bytes throughout; `results.json` holds bytes.

# %% [markdown] tags=["notebook-only"]
# *Opened in JupyterLab and run there (Run All)*, this notebook takes the defaults `make report` takes on
# this device and writes its results.json and measurement.json to `scratch/wave-8.10/`, never into
# `notebooks/` or `reports/`; the cell after the parameters says so. `make report WAVE=8.10` writes the report.

# %% tags=["parameters"]
preset: str = "seed"  # TFT preset: seed (the seed team's model size) or small
batch_size: int = 32  # training batch size
encoder_length: int = 60  # encoder (sequence) length in trading days
precision: str = "fp32"  # fp32, fp16 or bf16
device: str = "auto"  # auto (CUDA if present, else CPU), cpu or cuda
seed: int = 0  # random seed of the model initialisation and of the batch
ensemble: bool = True  # also profile DQN, PPO and Mamba-2 for the ensemble table
ensemble_preset: str = "seed"  # preset of DQN, PPO and Mamba-2
target_state: bool = True  # also profile the seed's target state: every model fp16, the TFT checkpointed
target_state_slow: str = "predict"  # on a CPU without fp16 kernels: predict the target state (seconds) or measure it (minutes)
snapshot_path: str = ""  # CUDA only: write the allocator's memory snapshot of the measured step here
second_opinion: bool = True  # also measure the step with torch.profiler's memory categories
measurements: str = ""  # a measurement JSON from `python -m foxlib measure` to report instead of measuring
output_dir: str = ""  # where results.json goes (set by the runner)
budgets_file: str = ""  # budgets TOML; empty: the project's budgets.toml

# %%
from IPython.display import HTML, Markdown, display

from foxlib.core.figures import mb_text
from foxlib.report import reading
from foxlib.report import charts
from foxlib.run import notebook_cells as notebook
from foxlib.memory import tolerances as prediction
from foxlib.waves.wave_8_10 import analysis, tables

params = notebook.parameters("8.10", globals())
budgets = notebook.budgets(params)
m = notebook.measure_or_load("8.10", params)  # typed and checked
checks = analysis.checks(m, budgets)
profile = m.tft.profile
display(HTML(notebook.verdict_banner("8.10", checks, m)))
display(reading.opening("8.10", checks, params["output_dir"] or "."))

# %% [markdown]
# ## Checks against the budgets
# Budgets come from `budgets.toml` (seeded with the original team's budgets). The wave is GO only if all pass.

# %%
display(notebook.table(notebook.checks_table(checks)))

# %% [markdown]
# ## The TFT's memory, category by category
# *measured*: counted from the tensors of the measured step (saved-for-backward activations through
# autograd's saved-tensor hooks, each storage once). Two peaks, named the same on every page:
# **model peak**, the largest total of the step's own live tensor bytes (what the peak budget is
# checked against), and **process peak**, the model peak + the cuBLAS workspaces (each stream's once)
# + the CUDA context, what the process needs on a card (on the CPU there is neither here: the process
# peak is the model peak). *theory*: from the model's shapes alone. *seed*: the original team's
# nvidia-smi figures, shown for comparison only.

# %%
display(notebook.table(tables.breakdown_table(m, budgets)))
display(Markdown(f"Configuration: `{m.tft.config}`, Adam at learning rate {m.tft.learning_rate}  \n"
                 f"Model peak measured by: {m.tft.profile.peak_method}."))

# %%
notebook.figure(charts.breakdown(profile, budgets["tft"], f"TFT training step, {params['precision']}, "
                                       f"batch {m.tft.config['batch_size']}, sequence {m.tft.config['encoder_length']} "
                                       f"— {m.device.name}"))

# %% [markdown]
# ## Where the activations go
# Bytes saved for backward, attributed to the TFT block that saved them ("loss": the quantile loss).

# %%
display(notebook.table(tables.activations_by_module(m)))
notebook.figure(charts.activations_by_module(profile.activations_by_module,
                                             "TFT activations saved for backward, by block"))

# %% [markdown]
# ## Predicted before running
# `foxlib.memory.predict_step` ran the same step on fake tensors (nothing allocated) before it was
# measured. Tolerance: 5 % per category, 10 % on the peak; on CUDA,
# 15 % on the activations and the forward peak of a model with an LSTM (cuDNN's reserve is not modelled).
# A gap outside it is named, never hidden.

# %%
pairs = m.prediction_pairs()
display(notebook.table(prediction.compare(*pairs["tft"], m.device.type)))
predicted = prediction.summary(pairs, m.device.type)  # measured against predicted, per category
display(notebook.table(predicted))

# %% [markdown]
# ## nvidia-smi's view against the allocator's
# On a GPU, what nvidia-smi shows for the process is the CUDA context plus everything the caching
# allocator has reserved; tensors use only the allocated part.

# %%
table = tables.cuda_reconciliation(m)
if table is None:
    display(Markdown("Measured on the CPU: there is no CUDA context, allocator reserve or NVML figure here. "
                     "The GPU report (`reports/h200/wave-8.10/`) measures them."))
else:
    display(notebook.table(table))
    display(Markdown(f"NVML: {profile.cuda['nvml'].get('note', '')}."))

# %% [markdown]
# ## A second opinion: PyTorch's own memory profiler
# The same step, categorised independently by torch.profiler's data-flow analysis, beside foxlib's
# counts; the peak split into categories, with what neither method can attribute shown as unexplained.

# %%
table = tables.second_opinion_table(m)
if table is None:
    display(Markdown("Not measured in this run (`second_opinion=False`) or torch's profiler failed: "
                     f"{m.second_opinion.note if m.second_opinion else ''}"))
else:
    display(notebook.table(table))
    display(Markdown(f"Unexplained at the peak: **{100 * analysis.unexplained_fraction(m.second_opinion):.1f} %** of "
                     f"{mb_text(m.second_opinion.peak_bytes)}. Every model:"))
    display(notebook.table(tables.unexplained_by_model(m)))

# %% [markdown]
# ## The seed's figures, explained

# %%
display(notebook.table(tables.seed_explanations(m)))

# %% [markdown]
# ## The ensemble on a 4 GB card
# Each model's model peak (its seed preset, fp32), stacked by category. Trained in one process, the
# four share the cuBLAS workspaces and the CUDA context: the ensemble's process peak is the sum of the
# model peaks + the workspaces once + the context once (on the CPU, the model peaks' sum). RL buffers
# are reported on their own, with where they live.

# %%
if m.ensemble:
    display(notebook.table(tables.ensemble_table(m, budgets)))
    totals = analysis.ensemble_totals(m)
    profiles = {k: v.profile for k, v in m.models.items()}
    notebook.figure(charts.ensemble(profiles, totals, budgets["ensemble"]["card_mb"],
                                    f"Ensemble training memory — {m.device.name}"))
else:
    display(Markdown("The ensemble was not profiled in this run (`ensemble=False`)."))

# %% [markdown]
# ## The seed's target state
# The seed expected "FP16 + Checkpointing" to bring the ensemble to 932 MB (23 % of 4 GB): DQN 3, PPO 73,
# Mamba-2 82, TFT 774 MB. Here every model trains in fp16 (autocast with a gradient scaler) and the TFT
# checkpoints every block: measured, or predicted where this CPU has no fp16 kernels (said below).

# %%
display(Markdown(tables.target_state_note(m)))
target = tables.target_state_table(m, budgets)
display(notebook.table(target) if target is not None else
        Markdown("Not measured in this run (`target_state=False`)."))

# %%
from foxlib.core.figures import as_dict

res = notebook.finish("8.10", params, m, checks, figures=as_dict(analysis.named_figures(m)),
                      prediction=predicted.to_dict("records"))
display(Markdown(notebook.footer(res)))

# %%
display(reading.closing(res, params["output_dir"] or "."))
