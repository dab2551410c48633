"""What a measurement says, on its raw bytes and seconds: the figures the checks use, the checks, results.json's
figures and the first screen's sentences. A "model peak" is a model's own step's tensors at their largest; the
"process figure" is the model peaks summed + the cuBLAS workspaces once per stream + the CUDA context."""
from __future__ import annotations

from typing import Any

from foxlib.core.budgets import Check
from foxlib.core.card_classes import below_class
from foxlib.core.config import MB
from foxlib.core.figures import Figure
from foxlib.waves.wave_8_13.cap import NOT_ENFORCED
from foxlib.waves.wave_8_13.nvml import NVML_CHECK, NvmlPeak, nvml_peak
from foxlib.waves.wave_8_13.records import Cap, Measurement
from foxlib.waves.wave_8_13.tft import RECOMMENDING_WAVE

TRAIN_CHECK = "ensemble trains under the cap"
INFERENCE_CHECK = "concurrent inference fits with the headroom"


def mb(x: float | None, digits: int = 1) -> str:
    """Bytes as MB (10^6 bytes) in text; "—" where not measured."""
    return "—" if x is None else f"{x / MB:,.{digits}f}"


def context_bytes(r: Measurement, phase: str) -> int:
    """The CUDA context to add to a phase's figure: the larger of the one measured at the start (which
    set the cap) and the one implied by NVML at the phase's end; 0 on the CPU."""
    return max(r.cap.context_bytes, r.phase(phase).context_end_bytes or 0)


def context_ends(m: Measurement) -> list[int]:
    """The contexts NVML implied at the end of training and of inference, where it gave a figure."""
    return [e for e in (m.training.context_end_bytes, m.inference.context_end_bytes) if e is not None]


def largest_context_bytes(m: Measurement) -> int:
    """The largest CUDA context seen: at the start (after the warm-up) or at the end of either phase."""
    return max(context_bytes(m, "training"), context_bytes(m, "inference"))


def figure(m: Measurement, phase: str) -> int:
    """Bytes the card must hold for a phase: the allocator's reserved peak under the cap (CPU: accounted),
    or what was needed where it ran out, plus the CUDA context."""
    p = m.phase(phase)
    return max(p.peak_bytes or 0, p.oom.needed_bytes if p.oom else 0) + context_bytes(m, phase)


def model_peaks(r: Measurement) -> dict[str, int | None]:
    """Each model's model peak from the interleaved run: its largest step rise (peak − start) plus what it holds
    between steps, over the steps after its first (which also creates Adam's state); its only step if it ran
    one; None if it never stepped. The cuBLAS workspaces, allocated before, are not in it."""
    out: dict[str, int | None] = {}
    for name in r.order:
        st = r.training.models.get(name)
        mine = [s for s in r.training.steps if s.model == name]
        later = [s for s in mine if s.step > 1]
        out[name] = None if not st or not mine else (max(s.peak_bytes - s.start_bytes for s in later or mine)
                                                       + st.kept_bytes - (0 if later else st.optimizer_state_bytes))
    return out


def workspace_bytes(r: Measurement) -> int:
    """The cuBLAS workspaces, once per stream: what stays allocated after the warm-up freed everything else;
    0 on the CPU."""
    return r.warmup.allocated_after_bytes if r.cap.enforced else 0


def model_peaks_sum(m: Measurement) -> int | None:
    """The model peaks summed; None when a model never stepped."""
    peaks = model_peaks(m).values()
    return None if any(v is None for v in peaks) else sum(peaks)


def process_figure(m: Measurement) -> int | None:
    """The model peaks + the workspaces + the largest CUDA context; None when a model never stepped."""
    peaks = model_peaks_sum(m)
    return None if peaks is None else peaks + workspace_bytes(m) + largest_context_bytes(m)


def nvml_check(r: Measurement) -> NvmlPeak:
    """Largest NVML per-process figure sampled through training and inference, against the card."""
    return nvml_peak(r.nvml.values(), r.cap.card_bytes, r.nvml.note)


def limit_text(cap: Cap) -> str:
    """What the training check's limit is: the card, or the allocator cap cap_bytes set (+ the CUDA context)."""
    if cap.override:
        return (f"limit = the allocator cap {mb(cap.cap_bytes, 2)} MB set by cap_bytes"
                + (f" + the CUDA context {mb(cap.context_bytes)} MB" if cap.enforced else ""))
    return f"limit = the {mb(cap.card_bytes)} MB card" + (" (cap + CUDA context)" if cap.enforced else "")


def how(m: Measurement) -> str:
    """"enforced (...)" or "not enforced (accounting)": the label of every memory figure of this run."""
    return (f"enforced: allocator capped at {mb(m.cap.cap_bytes)} MB + CUDA context {mb(m.cap.context_bytes)} MB"
            if m.cap.enforced else NOT_ENFORCED)


def checks(r: Measurement, budgets: dict[str, dict[str, float]]) -> list[Check]:
    """Training under the cap, inference with the headroom and, where NVML sees this process, its largest
    figure against the card."""
    t, i, cap = r.training, r.inference, r.cap
    label = how(r)
    n = len(r.order)
    train = figure(r, "training")
    what = ("allocator reserved peak + CUDA context" if cap.enforced else
            "accounted peak: each model's measured step peak plus what the other models keep")
    t_note = (f"{label}; {len(t.steps)} of {n * r.steps} interleaved steps ran; {what}"
              + (f"; OUT OF MEMORY {t.oom.where}: {t.oom.error}" if t.oom else "")
              + f"; {limit_text(cap)}")
    inf = figure(r, "inference")
    limit = r.cap.limit_bytes - budgets["ensemble"]["min_headroom_mb"] * MB
    i_note = (f"{label}; {i.mode}; all {n} models resident, leaving at least "
              f"{budgets['ensemble']['min_headroom_mb']:,.0f} MB of the card free (budgets.toml)"
              + (f"; OUT OF MEMORY {i.oom.where}: {i.oom.error}" if i.oom else ""))
    out = [
        Check(TRAIN_CHECK, train, cap.limit_bytes, "bytes", bool(not t.oom and train <= cap.limit_bytes), t_note),
        Check(INFERENCE_CHECK, inf, limit, "bytes", bool(not i.oom and inf <= limit), i_note),
    ]
    nv = nvml_check(r)
    if nv.applicable:
        out.append(Check(NVML_CHECK, nv.max_bytes, nv.card_bytes, "bytes", bool(nv.passed),
                         f"largest of {nv.n_samples} NVML samples of this process's used memory (every "
                         f"{r.nvml.interval_s * 1e3:.0f} ms and after every step and inference round), training "
                         f"and inference; {nv.note}"))
    return out


def nvml_text(m: Measurement) -> str:
    """One sentence: the NVML check's result, or why it is not applicable."""
    nv = nvml_check(m)
    if not nv.applicable:
        why = nv.note if nv.note.startswith("not applicable") else f"not applicable: {nv.note}"
        return f"{NVML_CHECK}: {why}."
    return (f"{NVML_CHECK}: {mb(nv.max_bytes)} MB ≤ {mb(nv.card_bytes)} MB: "
            f"{'PASS' if nv.passed else 'FAIL'} ({nv.n_samples} samples, {mb(nv.headroom_bytes)} MB to spare).")


def depends_on_text(r: Measurement) -> str:
    """The cited 8.12 results (path, revision, short sha256), for the report's first screen."""
    if not r.depends_on:
        return f"Depends on: no wave {RECOMMENDING_WAVE} results cited ({r.tft.source})."
    return "Depends on: " + "; ".join(f"wave {RECOMMENDING_WAVE} results `{c.path}` at revision {c.revision}, "
                                      f"sha256 {c.sha256[:12]}" for c in r.depends_on) + " (verified before rendering)."


def cap_text(r: Measurement) -> str:
    """One sentence of cap arithmetic for the first screen."""
    cap = r.cap
    if not cap.enforced:
        return f"Cap: {NOT_ENFORCED} (the CPU has no allocator cap); limit {mb(cap.limit_bytes)} MB."
    ends = context_ends(r)
    at_end = f"{mb(max(ends))} MB at the end" if ends else "not measurable at the end (no NVML figure)"
    first = (f"allocator cap {mb(cap.cap_bytes)} MB (cap_bytes)" if cap.override else
             f"allocator cap = card {mb(cap.card_bytes)} MB − CUDA context {mb(cap.context_bytes)} MB = "
             f"{mb(cap.cap_bytes)} MB")
    grown = cap.cap_bytes + largest_context_bytes(r)
    over = (f" Cap + largest context = {mb(grown)} MB: OVER the {mb(cap.card_bytes)} MB card "
            "(the context grew after it was measured)." if grown > cap.card_bytes else "")
    return f"Cap: {first}; the context measured after warming up every library the run uses, {at_end}.{over}"


def named_figures(m: Measurement) -> list[Figure]:
    """The headline figures for results.json as named figures (foxlib.core.figures), bytes:
    `deployment/<quantity>` (the validated configuration); one not measured is left out."""
    values = {"card": m.cap.card_bytes, "cap": m.cap.cap_bytes, "context": m.cap.context_bytes,
              "context_end": max(context_ends(m), default=None), "training_peak": figure(m, "training"),
              "inference_peak": figure(m, "inference"), "workspace": workspace_bytes(m),
              "process_peak": process_figure(m), "nvml_max_process": nvml_check(m).max_bytes,
              "model_peaks_sum": model_peaks_sum(m)}
    return [Figure(f"deployment/{q}", v, "bytes") for q, v in values.items() if v is not None]


def per_model(m: Measurement) -> dict[str, dict[str, Any]]:
    """Each model's row of the per-model tables (bytes, seconds; None where not measured): its training summary
    (measuring.summarise_steps) with what it keeps and its model peak, then its inference ("served": it ran)."""
    peaks, out = model_peaks(m), {}
    for name in m.order:
        st, inf = m.training.models.get(name), m.inference.models.get(name)
        alone, together = (inf.alone, inf.together) if inf else (None, None)
        out[name] = {**m.training.per_model[name].to_dict(), "precision": m.models[name].precision,
                     "kept_bytes": st and st.kept_bytes, "model_peak_bytes": peaks[name], "served": inf is not None,
                     "resident_bytes": inf.parameters_bytes + inf.input_bytes if inf else None,
                     "forward_bytes": inf and inf.solo_increment_bytes, "batch": inf and inf.batch,
                     "alone_p50_s": alone and alone.p50_s, "together_p50_s": together and together.p50_s,
                     "together_p99_s": together and together.p99_s}
    return out


def tft_text(r: Measurement) -> str:
    """The TFT's configuration as the run used it (Markdown), its cuBLAS workspace included."""
    t = r.tft
    text = (f"TFT configuration: {t.source} — precision **{t.precision}**, overrides `{t.overrides}`"
            + (", the whole training step as one CUDA graph" if t.cuda_graph else "")
            + (f", step options `{t.options.to_dict()}`" if t.options else "") + ".")
    ws = r.cublas_workspace
    if ws:
        text += (f" cuBLAS workspace `CUBLAS_WORKSPACE_CONFIG={ws.asked}` "
                 + ("applied" if ws.applied else "**not applied**") + f": {ws.why}.")
    return text


def card_class_text(m: Measurement) -> str:
    """The card class the run answers for (measuring.class_facts), for the first screen."""
    facts = m.card_class
    cap = m.device.capability
    if facts.emulated:
        how = f"**emulated** on this {facts.own_class}-class GPU"
    elif below_class(cap, m.device.type):
        older = f"{cap} is older than every class" if cap else "is unknown"
        how = f"the nearest to this GPU: its compute capability {older}, and it shares this class's limits"
    else:
        how = "this device's own class"
    text = f"Card class: **{facts.title}** ({how}). Enforced: {'; '.join(facts.enforced)}."
    return text + (f" Not emulated: {facts.not_emulated}." if facts.not_emulated else "")
