"""The report's tables (pandas DataFrames, MB = 10^6 bytes for display): the cap arithmetic, the
configuration, training, inference, the totals on the card and the out-of-memory errors. They
format what analysis.py decides; no decision is taken on a rounded figure."""
from __future__ import annotations

import pandas as pd

from foxlib.core.config import MB, to_mb
from foxlib.waves.wave_8_13.analysis import (figure, how, largest_context_bytes, mb, model_peaks, model_peaks_sum,
                                             nvml_check, nvml_text, per_model, process_figure, workspace_bytes)
from foxlib.waves.wave_8_13.cap import GIB, NOT_ENFORCED
from foxlib.waves.wave_8_13.nvml import NVML_CHECK
from foxlib.waves.wave_8_13.records import Measurement


def _ms(x: float | None) -> float | None:
    return None if x is None else round(1e3 * x, 3)


def _quantities(rows: list[tuple[str, float | None, str]]) -> pd.DataFrame:
    return pd.DataFrame([{"quantity": q, "MB": to_mb(v, 2), "how": h} for q, v, h in rows])


def cap_table(r: Measurement) -> pd.DataFrame:
    """The cap arithmetic, the context at the start and at the end, and the largest NVML process figure."""
    cap = r.cap
    asked = round(r.measure_parameters.get("card_gb", 0) * GIB)  # cap_arithmetic's clamp, told from what was asked
    clamped = cap.device_total_bytes is not None and asked > cap.device_total_bytes
    rows = [("target card", cap.card_bytes, f"this device's own memory, less than card_gb × 2^30 ({cap.card_bytes:,} "
             "bytes)" if clamped else f"card_gb × 2^30 bytes ({cap.card_bytes:,} bytes)")]
    if not cap.enforced:
        return _quantities(rows + [("CUDA context", None, "none on the CPU"), ("allocator cap", cap.cap_bytes, cap.how),
                                   ("limit the run is checked against", cap.limit_bytes, NOT_ENFORCED),
                                   ("largest NVML process figure", None, nvml_check(r).note)])
    rows += [
        ("CUDA context before the warm-up", r.context_before_warmup.context_bytes,
         "NVML process used − allocator reserved, before any model ran: too small to set the cap on"),
        ("CUDA context at the start (sets the cap)", cap.context_bytes,
         r.context.how + "; after the warm-up: " + "; ".join(r.warmup.what)),
        ("allocator cap", cap.cap_bytes,
         (f"cap_bytes = {cap.cap_bytes:,} bytes" if cap.override else
          f"card − context = {cap.card_bytes:,} − {cap.context_bytes:,} = {cap.cap_bytes:,} bytes")
         + f"; {cap.how}"),
        ("limit the run is checked against", cap.limit_bytes,
         "cap + context" if cap.override else "cap + context = the card"),
        ("device memory (the cap's denominator)", cap.device_total_bytes,
         f"fraction = cap / device memory = {cap.fraction:.6f}"),
    ]
    for phase in ("training", "inference"):
        p = r.phase(phase)
        rows.append((f"CUDA context at the end of {phase}", p.context_end_bytes,
                     "NVML process used − allocator reserved" if p.context_end_bytes is not None else
                     p.nvml_end.note if p.nvml_end else "unavailable"))
    grown = cap.cap_bytes + largest_context_bytes(r)
    rows.append(("cap + largest CUDA context seen", grown,
                 f"what the process could reach if the allocator filled its cap: "
                 f"{'≤' if grown <= cap.card_bytes else 'OVER'} the {mb(cap.card_bytes)} MB card"
                 + ("" if grown <= cap.card_bytes else " (the context grew after it was measured)")))
    nv = nvml_check(r)
    rows.append(("largest NVML process figure (training and inference)", nv.max_bytes,
                 f"{nv.n_samples} samples; {nv.note}" if nv.applicable else f"not applicable: {nv.note}"))
    if nv.applicable:
        rows.append(("card − largest NVML process figure", nv.headroom_bytes,
                     f"{NVML_CHECK}: {'PASS' if nv.passed else 'FAIL'}"))
    return _quantities(rows)


KEY_SETTINGS = ("hidden_size", "num_heads", "encoder_length", "batch_size", "checkpointing", "memory_efficient",
                "vsn_batched", "d_model", "n_layers", "seq_len", "buffer_size", "buffer_device", "n_envs", "n_steps",
                "window", "n_features")


def configuration_table(r: Measurement) -> pd.DataFrame:
    graphs = r.graph_mode if r.graph_mode and r.graph_mode.on else None  # 8.12 recommended a captured step
    rows = []
    for name in r.order:
        info = r.models[name]
        rows.append({"model": name, "title": info.title, "precision": info.precision, "preset": info.preset,
                     "key settings": ", ".join(f"{k}={info.config[k]}" for k in KEY_SETTINGS if k in info.config)}
                    | ({"training step": (graphs.training or {}).get(name) or "not run",  # how each model ran
                        "inference forward": (graphs.inference or {}).get(name) or "not run"} if graphs else {}))
    return pd.DataFrame(rows)


def training_table(r: Measurement) -> pd.DataFrame:
    label = how(r)
    return pd.DataFrame([{
        "model": name, "precision": p["precision"], "steps run": f"{p['steps_run']} of {r.steps}",
        "loss first → last": "—" if p["first_loss"] is None else f"{p['first_loss']:.4g} → {p['last_loss']:.4g}",
        "median step (ms)": _ms(p["median_step_s"]), "kept between steps (MB)": to_mb(p["kept_bytes"], 2),
        "model peak (MB)": to_mb(p["model_peak_bytes"], 2),
        "allocated during its steps, all models (MB)": to_mb(p["peak_bytes"], 2), "how": label,
    } for name, p in per_model(r).items()])


def inference_table(r: Measurement) -> pd.DataFrame:
    label = how(r)
    return pd.DataFrame([{
        "model": name, "precision": p["precision"], "batch": p["batch"],
        "weights + input (MB)": to_mb(p["resident_bytes"], 2),
        "forward peak alone (MB)": to_mb(p["forward_bytes"], 2), "alone p50 (ms)": _ms(p["alone_p50_s"]),
        "together p50 (ms)": _ms(p["together_p50_s"]), "together p99 (ms)": _ms(p["together_p99_s"]), "how": label,
    } for name, p in per_model(r).items() if p["served"]])


def totals_table(r: Measurement, budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The figures the checks use, their parts, the process figure, the card and the headroom."""
    cap, t, i = r.cap, r.training, r.inference
    card = cap.card_bytes
    head = budgets["ensemble"]["min_headroom_mb"] * MB
    label = how(r)
    train, inf = figure(r, "training"), figure(r, "inference")
    peaks, ws, proc = model_peaks(r), workspace_bytes(r), process_figure(r)
    rows = [
        ("model peaks, summed", model_peaks_sum(r),
         " + ".join(f"{n} {to_mb(v, 2)}" for n, v in peaks.items()) + " MB (each step's own tensors)"),
        ("cuBLAS workspaces (once per stream)", ws,
         "allocated after the warm-up, everything else freed" if cap.enforced else "none on the CPU"),
        ("CUDA context (largest: start or end)", largest_context_bytes(r) if cap.enforced else None,
         "NVML process used − allocator reserved" if cap.enforced else "none on the CPU"),
        ("process figure = model peaks + workspaces + context", proc,
         "the ensemble as if every model were at its peak at once" + (f"; {label}" if not cap.enforced else "")
         + ("" if proc is None else f"; {100 * proc / card:.1f} % of the card")),
        ("training, interleaved: peak allocated (live tensors)", t.peak_allocated_bytes, label),
        ("training, interleaved: peak " + ("reserved (what the cap limits)" if cap.enforced else "accounted"),
         t.peak_bytes, t.peak_how),
        ("training: + CUDA context = on the card", train, "checked against the card"),
        ("training: headroom on the card", card - train, f"{100 * train / card:.1f} % of the card used"),
        ("inference: weights + inputs resident", i.resident_bytes, label),
        ("inference: peak " + ("reserved" if cap.enforced else "accounted"), i.peak_bytes, i.memory_how),
        ("inference: + CUDA context = on the card", inf, f"must leave {mb(head, 0)} MB free"),
        ("inference: headroom on the card", card - inf, f"{100 * inf / card:.1f} % of the card used"),
    ]
    for phase in ("training", "inference"):
        vals = [v for v in r.nvml.values(phase) if v is not None]
        if vals:
            rows.append((f"{phase}: largest NVML process figure", max(vals),
                         f"{len(vals)} samples; what nvidia-smi shows ≈ context + reserved"))
    rows.append(("largest NVML process figure", nvml_check(r).max_bytes, nvml_text(r)))
    for phase in ("training", "inference"):
        p = r.phase(phase)
        if p.nvml_end and p.nvml_end.process_used_bytes is not None:
            rows.append((f"{phase}: NVML process used at the end", p.nvml_end.process_used_bytes,
                         "what nvidia-smi shows ≈ context + reserved"))
    return _quantities(rows)


def oom_table(r: Measurement) -> pd.DataFrame | None:
    rows = []
    for phase in ("training", "inference"):
        oom = r.phase(phase).oom
        if oom:
            rows.append({"phase": phase, "where": oom.where, "needed (MB)": to_mb(oom.needed_bytes, 2),
                         "failed allocation (MB)": to_mb(oom.requested_bytes, 2),
                         "reserved when it failed (MB)": to_mb(oom.reserved_bytes, 2),
                         "enforced": oom.enforced, "error": oom.error})
    return pd.DataFrame(rows) if rows else None
