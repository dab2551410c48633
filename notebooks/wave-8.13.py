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
# # Wave 8.13 — Production validation
#
# Does the whole ensemble (DQN, PPO, Mamba-2 and the TFT in wave 8.12's recommended configuration)
# train and serve on a 4 GB card? On a GPU the CUDA caching allocator is capped
# (`torch.cuda.set_per_process_memory_fraction`) so that the cap plus this process's CUDA context —
# measured first; it is outside the cap — equals the card: running out of memory inside it is real.
# Before the context is measured, every library the run uses is warmed up (each model's training
# step and inference, in its precision and on its streams): kernels and library handles load lazily
# into the context, which would otherwise grow past the figure the cap was set from. NVML's
# per-process figure is sampled through training and inference, and its maximum is checked against
# the card. The four models then train in one process, interleaved (one step of each in turn, each
# with its own Adam), and afterwards serve all at once. On the CPU no cap exists: there the run is checked by
# accounting, and every memory figure says so. The verdict is the go/no-go for ensemble deployment
# (8.14); `deployment.md`, written beside this report, is the deployment document.
# Memory in MB = 10^6 bytes; `results.json` holds bytes.

# %% [markdown] tags=["notebook-only"]
# *Opened in JupyterLab and run there (Run All)*, this notebook takes the defaults `make report` takes on
# this device and writes its results.json and measurement.json to `scratch/wave-8.13/`, never into
# `notebooks/` or `reports/`; the cell after the parameters says so. `make report WAVE=8.13` writes the report.

# %% tags=["parameters"]
preset: str = "seed"  # preset of every model: seed (the production sizes) or small (fast, for tests)
tft_config: str = "auto"  # TFT: auto (wave 8.12's recommendation for this device, else plain fp32) or JSON, e.g. {"precision": "bf16", "checkpointing": "blocks", "memory_efficient": true}
steps: int = 20  # training steps per model, interleaved round-robin (one step of each model in turn)
card_gb: float = 4.0  # the target card in GiB ("4 GB" is 4 GiB: 4,294,967,296 bytes, as budgets.toml's card_mb); the cap is the card minus the CUDA context
cap_bytes: int = 0  # allocator cap in bytes, CUDA context excluded; 0: card_gb minus the measured context (a tiny value forces an out-of-memory error)
inference_repeats: int = 100  # timed rounds of inference, each model alone and all at once (after 3 warm-up rounds)
inference_batch: int = 0  # rows (windows or observations) per inference batch; 0: each model's training batch size
inference_mode: str = "auto"  # how the models run at once: streams (one CUDA stream each, launched together), threads (one thread each), auto (streams on CUDA, threads on the CPU)
ensemble_precision: str = "fp32"  # precision of DQN, PPO and Mamba-2 in training and inference (the TFT's comes from tft_config)
device: str = "auto"  # auto (CUDA if present, else CPU), cpu or cuda
seed: int = 0  # random seed of the models and their batches
card_class: str = "auto"  # card class to validate: auto (this device's own: bf16 on an H200), bf16, fp16 (no bf16, no TF32: V100, T4, GTX 1650; emulated on a newer GPU) or cpu
measurements: str = ""  # a measurement JSON from `python -m foxlib measure` to report instead of measuring
output_dir: str = ""  # where results.json goes (set by the runner)
budgets_file: str = ""  # budgets TOML; empty: the project's budgets.toml

# %%
from IPython.display import HTML, Markdown, display

from foxlib.report import reading
from foxlib.run import notebook_cells as notebook
from foxlib.core import provenance
from foxlib.core.budgets import verdict
from foxlib.waves.wave_8_13 import analysis, cards, charts, deployment, tables
from foxlib.waves.wave_8_13.cap import NOT_ENFORCED

params = notebook.parameters("8.13", globals())
budgets = notebook.budgets(params)
m = notebook.measure_or_load("8.13", params)  # typed and checked
provenance.verify(m.citations())  # the cited 8.12 results must be the published ones: else this fails here
checks = analysis.checks(m, budgets)
display(HTML(notebook.verdict_banner("8.13", checks, m)))
display(reading.opening("8.13", checks, params["output_dir"] or "."))
display(Markdown(analysis.card_class_text(m) + "  \n" + analysis.depends_on_text(m) + "  \n" + analysis.nvml_text(m) + "  \n"
                 + analysis.cap_text(m)))

# %% [markdown]
# ## Checks
# The ensemble must train under the cap without running out of memory, and serve all four models at
# once leaving the free memory the budgets file asks (`[ensemble] min_headroom_mb`); on a GPU the
# largest NVML process figure sampled through the run must be at most the card (not applicable on the
# CPU). GO here is GO for ensemble deployment (8.14).

# %%
display(notebook.table(notebook.checks_table(checks)))
if not m.cap.enforced:
    display(Markdown(f"**Measured on the CPU: the cap was not enforced.** Every memory figure in this report is "
                     f"*{NOT_ENFORCED}*: each model's training step was measured on its own and the interleaved "
                     "run was added up from those measurements. There is no CUDA context, allocator rounding or "
                     "library workspace in it. The GPU report measures them under a real cap."))

# %% [markdown]
# ## The models and the TFT's configuration

# %%
display(Markdown(analysis.tft_text(m)))
display(notebook.table(tables.configuration_table(m)))

# %% [markdown]
# ## The cap
# The cap arithmetic (card − CUDA context after the warm-up), the context at the start and at the end,
# and the largest NVML process figure sampled through training and inference.

# %%
display(notebook.table(tables.cap_table(m)))

# %% [markdown]
# ## Training, interleaved, under the cap
# Each point is one training step: what was allocated during it, all models together (on a GPU the
# allocator's peak allocated, dashes the reserved; plus the CUDA context). Gradients are freed after
# every step, so between its steps a model keeps its weights, its Adam state and its batch or buffer.
# A model's *model peak* is its own step's tensors at their largest (what it keeps + what its step adds).

# %%
notebook.figure(charts.training_chart(m))
display(notebook.table(tables.training_table(m)))
ooms = tables.oom_table(m)
if ooms is not None:
    display(Markdown("### Out of memory"))
    display(notebook.table(ooms))

# %% [markdown]
# ## Concurrent inference
# All four models resident, in eval mode, no_grad, each in its precision; one batch through each,
# first each model alone, then all four at once.

# %%
display(Markdown(f"How they ran at once: {m.inference.how}."))
display(notebook.table(tables.inference_table(m)))
notebook.figure(charts.latency_chart(m))

# %% [markdown]
# ## On the card: peaks, context and headroom
# The *process figure* is the ensemble's figure on the card: the model peaks summed, the cuBLAS
# workspaces once per stream and the CUDA context. The interleaved run itself holds less (one model
# steps at a time); the checks use what it held (allocator reserved + context) and NVML's samples.

# %%
display(notebook.table(tables.totals_table(m, budgets)))

# %% [markdown]
# ## Which card fits
# Real cards of 4, 6, 8, 12, 16 and 24 GB (one GeForce per memory size; a "4 GB" card is 4 GiB): does
# the ensemble train (interleaved) and serve (all at once, leaving free what budgets.toml's
# `min_headroom_mb` asks) on each? The limits are this report's checks. A *measured* cell is this
# run's own figure, on the card the GPU emulated under the cap (a CPU run emulates none); every other
# cell is *predicted*: each model's step predicted (`foxlib.memory.predict.predict_step`), accounted
# as the CPU run is, plus the context, workspaces and allocator cache measured here. A cell says why
# where the configuration does not fit. Predicted serving is an upper bound: it counts each model's
# training forward (which keeps what backward needs) and a cuBLAS workspace per stream. Beside the
# configuration measured, two predicted alternatives: the plain fp32 ensemble and the TFT in fp16
# with every block checkpointed.

# %%
card_table, card_notes = cards.report_section(m, budgets)
display(notebook.table(card_table))
display(Markdown(card_notes))

# %% [markdown]
# ## The deployment document
# Written as `deployment.md` beside `results.json`; reproduced here.

# %%
doc = deployment.write(params["output_dir"] or ".", m, checks, budgets, params)
display(Markdown(doc.read_text().split("\n", 1)[1]))  # its title is this section's

# %%
from foxlib.core.figures import as_dict

res = notebook.finish("8.13", params, m, checks, card_class=m.card_class, deployment=deployment.FILE,
                      deployment_verdict={"wave": "8.14", "verdict": verdict(checks)},
                      enforced=m.cap.enforced, tft_config=m.tft,
                      figures=as_dict(analysis.named_figures(m)))
display(Markdown(notebook.footer(res)))

# %%
display(reading.closing(res, params["output_dir"] or "."))
