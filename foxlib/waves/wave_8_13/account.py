"""The interleaved training run accounted on paper, for the CPU, where nothing can be capped: each
model's measured step peak beside what every other model keeps between its steps, stopping where
the cap would be exceeded (as a GPU run stops at its out-of-memory error). Every figure it gives is
labelled NOT_ENFORCED."""
from __future__ import annotations

from typing import Any

from foxlib.core.config import MB

NOT_ENFORCED = "not enforced (accounting)"


def resident_bytes(profile: dict[str, Any], stepped: bool) -> int:
    """What a model keeps between its steps: weights, its batch/buffers on the device and, once it
    has stepped, Adam's state (gradients are freed after each step)."""
    return profile["live_before_step"] - (0 if stepped else profile["optimizer_state"])


def account_training(profiles: dict[str, dict[str, Any]], order: list[str], steps: int, cap: int) -> dict[str, Any]:
    """The interleaved run on paper, from each model's measured step: loading the models one by one,
    then for each step of each model in turn its step peak plus what the others keep. Stops at the
    first point that would exceed `cap` ("oom", with what would have been live there)."""
    out: dict[str, Any] = {"setup_bytes": 0, "steps": [], "oom": None}
    loaded = 0
    for name in order:
        loaded += resident_bytes(profiles[name], False)
        if loaded > cap:
            out["setup_bytes"] = loaded
            out["oom"] = accounting_oom("setup", name, None, loaded, cap)
            return out
    out["setup_bytes"] = loaded
    stepped: set[str] = set()
    for s in range(1, steps + 1):
        for name in order:
            others = sum(resident_bytes(profiles[j], j in stepped) for j in order if j != name)
            start = others + resident_bytes(profiles[name], name in stepped)
            live = others + profiles[name]["peak"]
            if live > cap:
                out["oom"] = accounting_oom("training", name, s, live, cap)
                return out
            out["steps"].append({"model": name, "step": s, "start_bytes": start, "peak_bytes": live})
            stepped.add(name)
    return out


def accounting_oom(phase: str, model: str | None, step: int | None, needed: int, cap: int) -> dict[str, Any]:
    where = f"loading {model}" if phase == "setup" else (f"step {step} of {model}" if step else phase)
    return {"phase": phase, "model": model, "step": step, "needed_bytes": int(needed), "requested_bytes": None,
            "error": f"{NOT_ENFORCED}: {needed / MB:,.2f} MB would be live at {where}, over the cap of "
                     f"{cap / MB:,.2f} MB", "enforced": False}
