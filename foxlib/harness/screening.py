"""Screening configurations by predicted memory: the largest batch (or sequence) whose step fits a budget.

One predicted step per probed value (predict_step: nothing allocated), then one real measurement of the answer.
"Fits": the model peak (MemoryProfile.peak) is at most the budget; host-side RL buffers are outside it, and on
CUDA so are the context and the allocator's reserve: add them before comparing with a card's size.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import torch

from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.memory.predict import predict_step

FIELDS = ("batch_size", "encoder_length", "seq_len")


def _config_with(card, base_config, field: str, value: int):
    names = {f.name for f in dataclasses.fields(base_config)}
    if field not in names:
        raise ValueError(f"model {card.name!r} has no config field {field!r}; "
                         f"screenable fields: {', '.join(f for f in FIELDS if f in names)}")
    return dataclasses.replace(base_config, **{field: value})


def largest_fitting(card, base_config, field: str, budget_bytes: int, *, precision: str = "fp32",
                    candidates: Iterable[int] | None = None, confirm: bool = True,
                    device: str | torch.device = "cpu", optimizer: str = "adam",
                    max_value: int | None = None) -> dict[str, Any]:
    """The largest value of `field` (FIELDS) whose predicted step peak of `card` at `base_config` is within
    budget_bytes, peaks assumed to grow with the field.

    candidates: a ladder tried in increasing order up to the first that does not fit; None: double from the
    base value while it fits (halve while not), then bisect (a value the model refuses fails); max_value caps
    it (default 1024 x the base). confirm: measure the answer once with profile_step on `device`.
    "probes" maps each value tried to its predicted peak (None if refused); "answer" is None if nothing fits."""
    budget_bytes = int(budget_bytes)
    device = torch.device(device)
    foreach = True if device.type == "cuda" else None  # the Adam implementation torch picks there
    base_value = getattr(base_config, field, None)
    _config_with(card, base_config, field, base_value)  # validates the field name
    probes: dict[int, int | None] = {}

    def fits(value: int) -> bool:
        if value not in probes:
            try:
                cfg = _config_with(card, base_config, field, value)
                # predict_step keeps its predictions: screening the same ladder twice pays once
                probes[value] = predict_step(card, cfg, precision=precision, optimizer=optimizer,
                                             foreach=foreach).peak
            except ValueError:  # the model or its data refuse this value
                probes[value] = None
        return probes[value] is not None and probes[value] <= budget_bytes

    answer = None
    if candidates is not None:
        for value in sorted(set(int(v) for v in candidates)):
            if not fits(value):
                break
            answer = value
    else:
        cap = max_value or 1024 * max(1, base_value)
        value = max(1, min(base_value, cap))
        lo, hi = (value, None) if fits(value) else (None, value)
        while lo is not None and hi is None and lo < cap:  # double while it fits
            nxt = min(2 * lo, cap)
            lo, hi = (nxt, None) if fits(nxt) else (lo, nxt)
        while lo is None and hi > 1:  # halve while it does not
            nxt = hi // 2
            lo, hi = (nxt, hi) if fits(nxt) else (None, nxt)
        while lo is not None and hi is not None and hi - lo > 1:  # bisect
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        answer = lo

    result: dict[str, Any] = {
        "model": card.name, "field": field, "budget_bytes": budget_bytes, "precision": precision,
        "optimizer": optimizer, "device": str(device), "probes": probes, "answer": answer,
        "predicted_peak": probes.get(answer), "confirmation": None,
    }
    if confirm and answer is not None:
        # one real profile of the recipe's step (foxlib.harness.recipe) at the answer
        recipe = StepRecipe(card.name, _config_with(card, base_config, field, answer), precision, optimizer=optimizer)
        with build_step(recipe, device) as built:
            measured = built.profile()
        predicted = result["predicted_peak"]
        result["confirmation"] = {
            "measured_peak": measured.peak, "fits": measured.peak <= budget_bytes,
            "error_bytes": predicted - measured.peak, "relative_error": (predicted - measured.peak) / measured.peak,
            "device_name": measured.device_name, "peak_method": measured.peak_method,
        }
    return result
