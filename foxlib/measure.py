"""Measuring one model card's training step: build, batch, optimizer, profile_step -> plain data."""
from __future__ import annotations

import dataclasses
import gc
from typing import Any

import torch

from foxlib.memory import profile_step
from foxlib.models import MODELS


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
    """Profile one training step of `model` (a MODELS key) built from `cfg` on `device`.

    Returns JSON-able data: the config, the profile (bytes) and, with `predict`, the same step
    predicted beforehand without allocating it ("predicted": foxlib.memory.predict).
    The model and its optimizer are freed before returning, so measurements can follow each other
    in one process without counting each other's memory."""
    predicted = predict_model(model, cfg, device, precision, seed) if predict else None
    card = MODELS[model]
    torch.manual_seed(seed)
    net = card.build(cfg).to(device)
    batch = card.example_batch(cfg, device=device, seed=seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=getattr(cfg, "lr", 1e-3))
    prof = profile_step(net, batch, loss_fn=card.loss, optimizer=optimizer, precision=precision,
                        buffers=card.buffers(batch), snapshot_path=snapshot_path)
    out = {"model": model, "title": card.title, "config": dataclasses.asdict(cfg), "profile": prof.to_dict()}
    if predicted is not None:
        out["predicted"] = predicted
    del net, batch, optimizer, prof
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def second_opinion(model: str, cfg: Any, device: torch.device, precision: str = "fp32", seed: int = 0) -> dict[str, Any]:
    """The same training step as measure_model's, categorised by PyTorch's own memory profiler."""
    from foxlib.memory.second_opinion import torch_memory_categories
    card = MODELS[model]
    torch.manual_seed(seed)
    net = card.build(cfg).to(device)
    batch = card.example_batch(cfg, device=device, seed=seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=getattr(cfg, "lr", 1e-3))
    out = torch_memory_categories(net, batch, card.loss, optimizer, precision)
    del net, batch, optimizer
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out
