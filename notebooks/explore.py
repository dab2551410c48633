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
# # Explore: will it fit?
#
# Pick a model, preset, precision, checkpointing and batch size in the next cell, then run all.
# The training step's memory is first **predicted** (fake tensors: nothing allocated), then
# **measured** (one real step after a warm-up), and both are shown against the budget.
# Memory in MB = 10^6 bytes.

# %% tags=["parameters"]
model: str = "tft"  # tft, dqn, ppo or mamba2
preset: str = "small"  # seed or small
precision: str = "fp32"  # fp32, fp16 or bf16
checkpointing: str = "none"  # TFT: none, vsn, blocks, all; Mamba-2: none or blocks
memory_efficient: bool = False  # TFT only: batched per-variable GRNs and fused attention
batch_size: int = 0  # 0: the preset's
device: str = "auto"  # auto, cpu or cuda
measure: bool = True  # also run one real step (else prediction only)

# %%
import pandas as pd
from IPython.display import Markdown, display

from foxlib.report import charts

from foxlib.run import notebook_cells as notebook
from foxlib.core.budgets import load_budgets
from foxlib.core.config import MB
from foxlib.memory.devices import resolve_device
from foxlib.memory.predict import predict_step
from foxlib.models import MODELS
from foxlib.harness.recipe import StepRecipe, build_step

card = MODELS[model]
cfg = card.explore_config(preset, batch_size, checkpointing, memory_efficient)  # a choice it lacks: an error
display(Markdown(f"**{card.title}**, preset `{preset}`, {precision}: `{cfg}`"))

# %%
dev = resolve_device(device)
predicted = predict_step(card, cfg, precision=precision, foreach=True if dev.type == "cuda" else None)  # Adam as torch runs it there
rows = {"predicted": predicted}
if measure:
    with build_step(StepRecipe(model, cfg, precision, seed=0), dev) as step:  # Adam at the card's learning rate
        rows["measured"] = step.profile()
budget = load_budgets()["tft"]
table = pd.DataFrame([{"": name, "parameters (MB)": p.parameters / MB, "gradients (MB)": p.gradients / MB,
                       "optimizer (MB)": p.optimizer_state / MB, "activations (MB)": p.activations / MB,
                       "forward peak (MB)": p.forward_peak / MB, "model peak (MB)": p.peak / MB,
                       "process peak (MB)": p.process_peak / MB}
                      for name, p in rows.items()])
display(notebook.table(table))
display(Markdown("Model peak: the step's own tensors at their largest; process peak: + the cuBLAS workspaces and "
                 "the CUDA context (measured on CUDA only; on the CPU and in the prediction it is the model peak).  \n"
                 f"The TFT's peak budget (budgets.toml, against the model peak): "
                 f"{budget['peak_training_mb']:,.0f} MB — "
                 + ", ".join(f"{n}: {'fits' if p.peak <= budget['peak_training_mb'] * MB else 'does not fit'}"
                             for n, p in rows.items())))

# %%
for name, p in rows.items():
    notebook.figure(charts.activations_by_module(p.activations_by_module, f"{name}: saved for backward, by block"))
