"""Measuring one model card's training step (foxlib.recipe: model, batch, Adam at the card's learning rate) -> plain data."""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from foxlib.models import MODELS
from foxlib.recipe import StepRecipe, build_step


def predict_model(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0) -> dict[str, Any]:
    """predict_step for the step measure_model measures (Adam in the device's default form), as a dict;
    {"error": ...} if the prediction fails: a failed prediction must not cost the measurement."""
    from foxlib.memory.predict import predict_step
    try:
        return predict_step(MODELS[model], cfg, precision=precision, seed=seed, target=device.type).to_dict()
    except Exception as exc:  # noqa: BLE001 - reported beside the measurement, never raised
        return {"error": f"prediction failed: {type(exc).__name__}: {exc}"}


def measure_model(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0,
                  snapshot_path: str | None = None, predict: bool = True) -> dict[str, Any]:
    """Profile one training step of `model` (a MODELS key) built from `cfg` on `device`: the step of
    foxlib.recipe (Adam at the card's learning rate).

    Returns JSON-able data: the config, the learning rate, the profile (bytes) and, with `predict`, the
    same step predicted beforehand without allocating it ("predicted": foxlib.memory.predict).
    The model and its optimizer are freed before returning, so measurements can follow each other
    in one process without counting each other's memory."""
    recipe = StepRecipe(model, cfg, precision, seed)
    predicted = predict_model(model, cfg, device, precision, seed) if predict else None
    step = build_step(recipe, device)
    prof = step.profile(snapshot_path=snapshot_path)
    out = {"model": model, "title": recipe.card.title, "config": dataclasses.asdict(cfg),
           "learning_rate": recipe.learning_rate, "profile": prof.to_dict()}
    if predicted is not None:
        out["predicted"] = predicted
    step.free()
    return out


def second_opinion(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0) -> dict[str, Any]:
    """The same training step as measure_model's (foxlib.recipe), categorised by PyTorch's own memory profiler."""
    from foxlib.memory.second_opinion import torch_memory_categories
    step = build_step(StepRecipe(model, cfg, precision, seed), device)
    out = torch_memory_categories(step.model, step.batch, step.loss_fn, step.optimizer, precision)
    step.free()
    return out
