"""Measuring one model card's training step (foxlib.harness.recipe: model, batch, Adam at the card's learning rate) -> plain data."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch

from foxlib.core.schema import Sparse
from foxlib.memory.profile import MemoryProfile, release_memory
from foxlib.memory.second_opinion import SecondOpinion, torch_memory_categories
from foxlib.memory.tolerances import FailedPrediction, predicted_profile
from foxlib.models import MODELS
from foxlib.harness.recipe import StepRecipe, build_step, graph_parts
from foxlib.harness.step_options import StepOptions, backends


def predict_model(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0,
                  kernel_scratch: bool | None = None) -> dict[str, Any]:
    """predict_step for the step measure_model measures (Adam in the device's default form), as a dict;
    {"error": ...} if the prediction fails: a failed prediction must not cost the measurement."""
    from foxlib.memory.predict import predict_step
    try:
        return predict_step(MODELS[model], cfg, precision=precision, seed=seed, target=device.type,
                            kernel_scratch=kernel_scratch).to_dict()
    except Exception as exc:  # noqa: BLE001 - reported beside the measurement, never raised
        return {"error": f"prediction failed: {type(exc).__name__}: {exc}"}


def measure_model(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0,
                  snapshot_path: str | None = None, predict: bool = True, options: StepOptions | None = None
                  ) -> dict[str, Any]:
    """Profile one training step of `model` (a MODELS key) built from `cfg` on `device`: the step of
    foxlib.harness.recipe (Adam at the card's learning rate).

    Returns JSON-able data: the config, the learning rate, the profile (bytes) and, with `predict`, the
    same step predicted beforehand without allocating it ("predicted": foxlib.memory.predict).
    The model and its optimizer are freed before returning, so measurements can follow each other
    in one process without counting each other's memory."""
    recipe = StepRecipe(model, cfg, precision, seed, options or StepOptions())
    extra = {}
    if predict:  # the predictor models the plain step only
        extra["predicted"] = (predict_model(model, cfg, device, precision, seed) if recipe.options.is_default
                              else {"error": f"not predicted: {recipe.options.label()} is not modelled by the "
                                             "predictor"})
    return _measurement(recipe, profile_recipe(recipe, device, snapshot_path=snapshot_path)) | extra


def predict_instead(model: str, cfg: Any, device: torch.device, precision: str, seed: int, why: str
                    ) -> dict[str, Any]:
    """measure_model's data for a step that is predicted (predict_step, nothing run) instead of measured,
    because running it here would cost minutes for nothing the prediction lacks (`why`, shown on the page).
    The CPU kernels' scratch is not probed (a probe runs those slow kernels): the step's own tensors.
    RuntimeError if the prediction fails: there is then no figure at all."""
    predicted = predict_model(model, cfg, device, precision, seed, kernel_scratch=False)
    if "error" in predicted:
        raise RuntimeError(f"{model}: {why}, and {predicted['error']}")
    return _measurement(StepRecipe(model, cfg, precision, seed), predicted) | {"source": "predicted", "note": why}


def _measurement(recipe: StepRecipe, profile: dict[str, Any]) -> dict[str, Any]:
    return {"model": recipe.model, "title": recipe.card.title, "config": dataclasses.asdict(recipe.cfg),
            "learning_rate": recipe.learning_rate, "profile": profile}


def second_opinion(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0) -> dict[str, Any]:
    """The same training step as measure_model's (foxlib.harness.recipe), categorised by PyTorch's own memory profiler."""
    with build_step(StepRecipe(model, cfg, precision, seed), device) as step:
        return torch_memory_categories(step.model, step.batch, step.loss_fn, step.optimizer, precision)


@dataclass(frozen=True)
class ModelMeasurement(Sparse):
    """measure_model's data, typed: one model's measured step (and its prediction, second opinion); as Sparse writes
    it, a field that holds its default is absent."""
    model: str
    title: str
    config: dict[str, Any]
    learning_rate: float | None
    """Adam's learning rate of the step (the card's)."""
    profile: MemoryProfile
    source: str = "measured"
    """"measured", or "predicted": `profile` is predict_step's, not run (predict_instead's `why` in `note`)."""
    note: str = ""
    predicted: MemoryProfile | FailedPrediction | None = None
    """predict_step's profile, or why it failed (stored as {"error": ...}); None when not predicted."""
    second_opinion: SecondOpinion | None = None
    """torch.profiler's categories of the same step (foxlib.memory.second_opinion), when measured."""
    PARTS = {"profile": MemoryProfile, "second_opinion": SecondOpinion, "predicted": predicted_profile}

    @property
    def predicted_only(self) -> bool:
        return self.source == "predicted"


def profile_recipe(recipe: StepRecipe, device: torch.device, cuda_graph: bool = False,
                   snapshot_path: str | None = None) -> dict[str, Any]:
    """The recipe's step profiled as the waves measure it, as a dict: eager (BuiltStep.profile, a snapshot written
    to `snapshot_path` if given) or as one CUDA graph (profile_graphed, which takes no snapshot: asking for both is
    a ValueError); its model and optimizer freed after."""
    if cuda_graph:
        if snapshot_path:
            raise ValueError("profile_recipe takes an allocator snapshot of an eager step only, not of a CUDA graph")
        return profile_graphed(recipe, device)
    with build_step(recipe, device) as step:
        return step.profile(snapshot_path=snapshot_path).to_dict()


def profile_graphed(recipe: StepRecipe, device: torch.device,
                    on_built: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """The recipe's step profiled as one CUDA graph (foxlib.memory.cuda_graph.profile_graphed_step: the
    peak over its capture and first replay, as a dict), its options' backends (TF32, cuDNN) held while captured.
    on_built(built step) runs before the profile, e.g. to check the batch or keep the model."""
    from foxlib.memory.cuda_graph import profile_graphed_step
    built, loss = graph_parts(recipe, device)
    if on_built is not None:
        on_built(built)
    with backends(recipe.options):
        profile = profile_graphed_step(built.model, built.batch, loss, built.optimizer, recipe.precision)
    del built, loss
    release_memory()
    return profile.to_dict()
