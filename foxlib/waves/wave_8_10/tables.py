"""Wave 8.10's tables, formatting only: each reads a Measurement (records.py) and analysis.py's
figures in bytes and shows them in MB (10^6 bytes), beside budgets.toml's budgets, the shape-based
theory and the seed's figures (foxlib.core.seed_claims)."""
from __future__ import annotations

import pandas as pd

from foxlib.core import seed_claims
from foxlib.core.config import MB, to_mb
from foxlib.memory.tolerances import PEAK_TOLERANCE_PCT
from foxlib.waves.wave_8_10.analysis import (MODEL_PEAK, MODEL_PEAK_DEFINITION, PROCESS_PEAK,
                                             UNEXPLAINED_TARGET_PCT, EnsembleTotals, ensemble_totals,
                                             unexplained_fraction)
from foxlib.waves.wave_8_10.records import Measurement


def breakdown_table(m: Measurement, budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The TFT's categories against their budgets, with the theory and the seed beside them."""
    p, b, th, seed = m.tft.profile, budgets["tft"], m.theory, seed_claims.TFT_8_10_MB
    rows = [
        ("parameters", p.parameters, b["parameters_mb"], th.parameters, seed["parameters"]),
        ("forward activations (saved for backward)", p.activations, b["forward_activations_mb"], th.activations,
         seed["activations"]),
        ("gradients", p.gradients, b["gradients_mb"], th.gradients, seed["gradients"]),
        ("optimizer state", p.optimizer_state, b["optimizer_state_mb"], th.optimizer_state, seed["optimizer_state"]),
        (f"peak training: {MODEL_PEAK} (the step's tensors)", p.peak, b["peak_training_mb"], th.peak, seed["peak"]),
        ("forward peak (the step's tensors)", p.forward_peak, None, None, seed_claims.TFT_FORWARD_MEASURED_MB),
        ("temporaries at the model peak (outputs, intermediates)", p.temporaries, None, None, None),
        ("input batch", p.batch, None, None, None),
    ]
    if p.cuda is not None:
        rows += [("cuBLAS workspaces (each stream's once; not in the model peak)", p.workspace_bytes, None, None, None),
                 ("CUDA context", p.context_bytes, None, None, None),
                 (f"{PROCESS_PEAK} (model peak + workspaces + context)", p.process_peak, None, None, None)]
    else:
        rows.append((f"{PROCESS_PEAK} (CPU: = model peak; no context or workspaces)", p.process_peak, None, None, None))
    return pd.DataFrame([{
        "category": name,
        "measured (MB)": to_mb(measured),
        "budget (MB)": budget,
        "status": "" if budget is None else ("PASS" if measured <= budget * MB else "FAIL"),
        "theory (MB)": to_mb(theo),
        "seed, nvidia-smi (MB)": seed_mb,
    } for name, measured, budget, theo, seed_mb in rows])


def activations_by_module(m: Measurement) -> pd.DataFrame:
    """Measured saved bytes per TFT block beside the hand count from shapes, with the gap."""
    p = m.tft.profile
    theory_blocks = m.theory.activations_by_module or {}
    total = p.activations or 1
    rows = []
    for k, v in p.activations_by_module.items():
        t = theory_blocks.get(k)
        gap = "" if t is None else ("exact" if t == v else
                                    "LSTM backend workspace (oneDNN/cuDNN), not derivable from shapes"
                                    if k.startswith("lstm") else f"{v - t:+,} bytes")
        rows.append({"block": k, "measured (MB)": to_mb(v), "share (%)": round(100 * v / total, 1),
                     "theory (MB)": to_mb(t), "gap": gap})
    return pd.DataFrame(rows)


def cuda_reconciliation(m: Measurement) -> pd.DataFrame | None:
    """nvidia-smi's process figure split into context + allocator reserve; reserve into allocated + cached."""
    p = m.tft.profile
    if not (cuda := p.cuda):
        return None
    nvml, bare = cuda["nvml"], m.bare_context
    used = nvml.get("process_used_bytes")
    owned = p.parameters + p.gradients + p.optimizer_state + p.batch
    rows = [
        ("NVML process used (what nvidia-smi shows)", used, "after the measured step"),
        ("  = CUDA context", p.context_bytes, "NVML process used − allocator reserved"),
        ("  + allocator reserved", cuda["reserved_bytes"], "segments the caching allocator holds"),
        ("    = allocated (live tensors and workspaces)", cuda["allocated_bytes"], "after the step"),
        ("      of which parameters, gradients, Adam state, batch", owned, "counted from the tensors"),
        ("      of which cuBLAS workspaces (workspace_bytes)", p.workspace_bytes,
         "allocated at the step's start, no tensor of the step's; bare cuBLAS workspace of one stream measured at "
         f"start: {to_mb(bare and bare.cublas_workspace_bytes)} MB"),
        ("    + cached, free for reuse", cuda["reserved_bytes"] - cuda["allocated_bytes"],
         "kept by the allocator, invisible to tensors"),
        ("allocator reserved, peak", cuda["reserved_peak_bytes"], "largest reserve during the step"),
        ("allocated, peak", cuda["allocated_peak_bytes"],
         f"largest live total during the step = {MODEL_PEAK} + workspaces"),
        (MODEL_PEAK, p.peak, MODEL_PEAK_DEFINITION),
        (PROCESS_PEAK, p.process_peak, "model peak + workspaces + CUDA context"),
        ("fragmentation (inactive split blocks)", cuda["inactive_split_bytes"],
         f"{100 * cuda['fragmentation']:.1f} % of reserved"),
        ("bare CUDA context at start", bare and bare.context_bytes,
         "NVML with one tiny tensor allocated"),
        ("device memory used, all processes", nvml.get("device_used_bytes"), "NVML device view"),
    ]
    return pd.DataFrame([{"quantity": q, "MB": to_mb(v), "how": how} for q, v, how in rows])


def seed_explanations(m: Measurement) -> pd.DataFrame:
    """Each seed figure, ours beside it, and why they differ — numbers from the measurement."""
    p, th = m.tft.profile, m.theory
    cuda = p.cuda or {}
    ctx = p.context_bytes or (m.bare_context and m.bare_context.context_bytes)
    reserved_peak = cuda.get("reserved_peak_bytes")
    smi = (f"on this GPU nvidia-smi would have shown ≈ context {to_mb(ctx)} MB + allocator reserve "
           f"{to_mb(reserved_peak)} MB at the peak = {to_mb((ctx or 0) + (reserved_peak or 0))} MB"
           if cuda else "not measurable on the CPU: see the GPU report for the context and the reserve")
    ratio = (p.activations / th.activations) if th.activations else None
    rows = [
        ("parameters", seed_claims.TFT_8_10_MB["parameters"], p.parameters,
         f"{p.n_parameters:,} parameters × {p.parameters / max(p.n_parameters, 1):.0f} B; the seed preset was "
         "sized to the seed's 72 MB (±10 %)"),
        ("forward activations", seed_claims.TFT_8_10_MB["activations"], p.activations,
         "the seed read nvidia-smi after the forward: CUDA context + allocator reserve + every live tensor. "
         f"We count only the bytes autograd saves for backward. {smi}"),
        ("gradients", seed_claims.TFT_8_10_MB["gradients"], p.gradients,
         "\"0 MB\" was a difference of two nvidia-smi readings: gradients were allocated into blocks the "
         "caching allocator had cached from freed activations, so the process total did not grow. "
         f"Gradients are one float per parameter: {p.gradients / MB:.1f} MB"),
        ("optimizer state", seed_claims.TFT_8_10_MB["optimizer_state"], p.optimizer_state,
         "Adam keeps two moments per parameter (8 B/param in fp32): the seed's 144 MB = 2 × 72 MB is that theory, "
         "and ours matches it"),
        ("peak training", seed_claims.TFT_8_10_MB["peak"], p.peak,
         f"the seed's peak adds its forward figure to the optimizer; ours is the {MODEL_PEAK}, the largest live total "
         "of the step's own tensor bytes in one measured step; workspaces, context and cache are reported apart"
         + (f" (the {PROCESS_PEAK}, with workspaces and context: {to_mb(p.process_peak)} MB)" if cuda else "")),
        ("\"615x overhead\"", seed_claims.TFT_FORWARD_MEASURED_MB, p.forward_peak,
         f"the seed divided nvidia-smi's {seed_claims.TFT_FORWARD_MEASURED_MB:,} MB by a "
         f"{seed_claims.TFT_THEORETICAL_MB} MB "
         "'theoretical' figure that counts neither weights nor saved activations. Our shape-based theory predicts "
         f"{to_mb(th.activations)} MB of saved activations; measured/theory = "
         f"{'n/a' if ratio is None else f'{ratio:.2f}'}. There is no 615x overhead: the memory is the "
         "per-variable GRNs' saved tensors plus what nvidia-smi adds"),
    ]
    return pd.DataFrame([{"figure": f, "seed (MB)": s, "foxlib measured (MB)": to_mb(ours), "why they differ": why}
                         for f, s, ours, why in rows])


def ensemble_table(m: Measurement, budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Per model: categories and model peak; then workspaces and context once, the process peak, its share
    of the card and the headroom."""
    e = ensemble_totals(m)
    col, proc = f"{MODEL_PEAK} (MB)", f"{PROCESS_PEAK} (MB)"
    rows = []
    for name, mm in m.models.items():
        p = mm.profile
        bufs = p.buffers
        where = ", ".join(f"{k}: {v['lives_in']}" for k, v in bufs.items()) or "—"
        rows.append({
            "model": name,
            "parameters (MB)": to_mb(p.parameters), "gradients (MB)": to_mb(p.gradients),
            "optimizer (MB)": to_mb(p.optimizer_state), "activations (MB)": to_mb(p.activations),
            "buffers (MB)": to_mb(sum(b["bytes"] for b in bufs.values())), "buffers live in": where,
            col: to_mb(e.model_peaks[name]), "seed (MB)": seed_claims.ENSEMBLE_CURRENT_MB.get(name),
        })
    if e.on_cuda:
        rows += [{"model": "+ cuBLAS workspaces (each stream's once, for the process)", proc: to_mb(e.workspace_bytes)},
                 {"model": "+ CUDA context (once per process)", proc: to_mb(e.context_bytes)}]
    total = (f"{PROCESS_PEAK}: the model peaks + workspaces + context" if e.on_cuda else
             f"{PROCESS_PEAK}: the model peaks' sum (CPU: no context or workspaces)")
    rows += _total_rows(e, budgets, total, col, proc, "seed (MB)", seed_claims.ENSEMBLE_CURRENT_MB)
    return pd.DataFrame(rows, columns=[*rows[0].keys(), proc])


def _total_rows(e: EnsembleTotals, budgets: dict[str, dict[str, float]], label: str, col: str, proc: str,
                seed_col: str, seed_mb: dict[str, float]) -> list[dict]:
    """The ensemble's total, its share of the card and the headroom it leaves, beside the seed's."""
    card, seed_total = budgets["ensemble"]["card_mb"] * MB, sum(seed_mb.values())
    return [{"model": label, col: to_mb(sum(e.model_peaks.values())), proc: to_mb(e.process_peak), seed_col: seed_total},
            {"model": "share of a 4 GB card (%)", proc: round(100 * e.share_of(card), 1),
             seed_col: round(100 * seed_total / seed_claims.ENSEMBLE_CARD_MB, 1)},
            {"model": "headroom (MB)", proc: to_mb(card - e.process_peak),
             seed_col: seed_claims.ENSEMBLE_CARD_MB - seed_total}]


def second_opinion_table(m: Measurement) -> pd.DataFrame | None:
    """foxlib's categories beside torch.profiler's, at the step's peak, with the unexplained rest."""
    so = m.second_opinion
    if so is None or not so.available:
        return None
    p = m.tft.profile
    categories = [  # (foxlib's category, its bytes, torch.profiler's category, note)
        ("parameters", p.parameters, "parameter", "weights: both count the same tensors"),
        ("optimizer state", p.optimizer_state, "optimizer_state", "Adam moments and step counters"),
        ("gradients", p.gradients, "gradient",
         "foxlib: all gradients after backward; at the peak only those already computed exist"),
        ("activations", p.activations, "activation",
         "foxlib: saved for backward at the end of the forward; torch: tensors it traced to backward use"),
        ("inputs", p.batch, "input", "the batch"),
        ("temporaries", None, "temporary", "freed inside one op or step"),
        ("autograd detail", None, "autograd_detail", "gradients of intermediate tensors during backward"),
        ("unexplained (no category)", None, "unknown",
         "allocations torch could not attribute: e.g. the foreach Adam's temporaries, library workspaces"),
    ]
    rows = [(c, f, so.at_peak.get(k), so.max_by_category.get(k), note) for c, f, k, note in categories] + [
        (f"peak (foxlib: {MODEL_PEAK})", p.peak, so.peak_bytes, None,
         "largest live total of the step (torch.profiler's timeline holds what its step allocates, workspaces made "
         "before it not included)")]
    return pd.DataFrame([{"category": c, "foxlib (MB)": to_mb(f), "torch.profiler at the peak (MB)": to_mb(t),
                          "torch.profiler, category maximum (MB)": to_mb(x), "note": note}
                         for c, f, t, x, note in rows])


def unexplained_by_model(m: Measurement) -> pd.DataFrame:
    """Per model: torch.profiler's peak, the part of it in no category, and its share (target < 5 %)."""
    sos = {"tft": m.second_opinion} | {n: e.second_opinion for n, e in m.ensemble.items()}
    rows = []
    for name, so in sos.items():
        share = unexplained_fraction(so)
        known = share is not None
        rows.append({"model": name, "peak, torch.profiler (MB)": to_mb(so.peak_bytes) if known else None,
                     "unexplained at the peak (MB)": to_mb(so.at_peak.get("unknown", 0)) if known else None,
                     "unexplained (%)": round(100 * share, 2) if known else None,
                     f"under {UNEXPLAINED_TARGET_PCT:g} %": 100 * share < UNEXPLAINED_TARGET_PCT if known else None})
    return pd.DataFrame(rows)


def target_state_table(m: Measurement, budgets: dict[str, dict[str, float]]) -> pd.DataFrame | None:
    """The seed's target state (every model fp16, the TFT checkpointed) measured (or, where the CPU has no fp16
    kernels, predicted: the columns say which), beside the seed's figures."""
    e = ensemble_totals(m, target_state=True)
    if e is None:
        return None
    how = "predicted " if m.target_state_predicted else ""
    col, proc = f"{how}{MODEL_PEAK} (MB)", f"{how}{PROCESS_PEAK} (MB)"
    rows = [{"model": name, col: to_mb(peak), "seed's target (MB)": seed_claims.ENSEMBLE_TARGET_MB.get(name)}
            for name, peak in e.model_peaks.items()]
    if e.on_cuda:
        rows.append({"model": "+ cuBLAS workspaces and CUDA context (once)",
                     proc: to_mb(e.workspace_bytes + e.context_bytes)})
    rows += _total_rows(e, budgets, PROCESS_PEAK, col, proc, "seed's target (MB)", seed_claims.ENSEMBLE_TARGET_MB)
    return pd.DataFrame(rows, columns=["model", col, proc, "seed's target (MB)"])


def target_state_note(m: Measurement) -> str:
    """Why the target state was predicted, not run (measuring.slow_target), as Markdown; "" where it was run."""
    k = m.target_state_kernels
    if k is None:
        return ""
    return (f"**Predicted, not run**: {k.reason} ({k.ratio:,.0f}x ≥ {k.slow_path_ratio:g}x). Each step is predicted "
            f"on fake tensors by `foxlib.memory.predict_step` (its tolerance: {PEAK_TOLERANCE_PCT:g} % on the peak; "
            "measured errors in the prediction table above). `target_state_slow=\"measure\"` runs it.")
