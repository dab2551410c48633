"""The peer benchmark's row foxlib_best as wave 8.12 recommends it: its precision and TFT overrides,
its step options (foxlib.harness.step_options: fused Adam, Adam in backward, TF32) and, where the
recommendation says cuda_graph and the device is CUDA, the whole training step captured as one CUDA
graph, built, profiled and timed with foxlib's own functions (foxlib.harness.measure_step.profile_graphed,
foxlib.harness.recipe.capture_step), as wave 8.12 measures a graphed strategy. On the CPU no CUDA graph runs: the row takes eager steps with the same options, and a note
says so.

The graphed row's memory is profile_graphed_step's: its peak is the model peak as profile_step's is
(the allocator's max_memory_allocated over the capture and one replay, less the workspaces: the
step's own tensors); its activations and forward peak are None, inside the graph's private pool where
no saved-tensor hook sees them.
"""
from __future__ import annotations

from typing import Any

import torch

from benchmarks.peer import data
from foxlib.harness.measure_step import profile_graphed
from foxlib.harness.recipe import StepRecipe, capture_step
from foxlib.harness.step_options import StepOptions
from foxlib.report import peer_figures as fig

NAME = "foxlib_best"


def options(best: dict[str, Any]) -> StepOptions:
    return StepOptions.from_dict(best.get("options"))


def recipe(best: dict[str, Any], cfg, seed: int) -> StepRecipe:
    """foxlib's recipe of the row: the best config and precision, with the recommendation's step options."""
    try:
        return StepRecipe("tft", cfg, best["precision"], seed, options(best))
    except ValueError as exc:
        raise SystemExit(f"the best configuration ({best.get('source')}) cannot run: {exc}") from None


def graphed(best: dict[str, Any], device: torch.device) -> bool:
    """The row's step is one captured CUDA graph: asked for, on a CUDA device."""
    return bool(best.get("cuda_graph")) and device.type == "cuda"


def label(best: dict[str, Any], device: torch.device) -> str:
    """The row's label, naming what its step applies: e.g. "foxlib TFT, best (8.12), CUDA graph + fused Adam"."""
    parts = (["CUDA graph"] if graphed(best, device) else []) + [p for p in [options(best).label()] if p]
    return fig.ROWS[NAME] + (f", {' + '.join(parts)}" if parts else "")


def profile(rec: StepRecipe, device: torch.device, expected) -> tuple[dict[str, Any], torch.nn.Module]:
    """The graphed row's memory as wave 8.12 profiles a graphed strategy (foxlib.harness.measure_step.
    profile_graphed) and its model; its batch checked to be the windows the peer gets."""
    kept: dict[str, torch.nn.Module] = {}

    def check(built) -> None:
        data.check_recipe_batch(built.batch, expected)
        kept["model"] = built.model
    return profile_graphed(rec, device, on_built=check), kept["model"]


def live(rec: StepRecipe, device: torch.device, expected) -> dict[str, Any]:
    """The graphed row for timing: {model, batch, optimizer, precision, step}; step replays the captured
    graph (capture_step: TF32 held while it is captured, so in every replay). Its cuBLAS workspace lies
    in the graph's own pool: the compiled "reduce-overhead" rows, alive beside it, clear cuBLAS's
    workspaces whenever they record (foxlib.memory.cuda_graph's docstring)."""
    built, graph = capture_step(rec, device, own_cublas_workspace=True)
    data.check_recipe_batch(built.batch, expected)
    return {"model": built.model, "batch": built.batch, "optimizer": built.optimizer, "precision": rec.precision,
            "step": graph, "built": built}


def notes(best: dict[str, Any], device: torch.device, environ) -> list[str]:
    """What the run did with the recommendation's CUDA graph, step options and cuBLAS workspace."""
    from benchmarks.peer.configuration import workspace_note
    out = []
    opts = options(best).label()
    if best.get("cuda_graph") and not graphed(best, device):
        out.append(f"The best configuration runs its whole step as one CUDA graph, which needs a CUDA device: on the "
                   f"{device.type.upper()} its row runs eager steps with its precision, TFT overrides"
                   + (f" and step options ({opts})." if opts else "."))
    elif graphed(best, device):
        out.append("The best row's step is one captured CUDA graph (foxlib.harness.recipe.capture_step), timed as "
                   "replays; its peak is profile_graphed_step's (the allocator's peak over the capture and one "
                   "replay, less the workspaces: the step's own tensors, as the other rows' peaks); its activations "
                   "live in the graph's private pool, where no saved-tensor hook sees them: not measured.")
    if opts:
        out.append(f"The best row's step options ({opts}) are applied (foxlib.harness.step_options).")
    ws = workspace_note(best, environ)
    return out + ([ws] if ws else [])
