"""Wave 8.10: the TFT's memory profile, the ensemble beside it, and the seed's figures explained.

`measure(...)` does the work on a device and returns plain data (JSON-able, bytes); `Measurement`
is that data typed (to_dict/from_dict, with a schema version). Everything else turns a Measurement
into checks (on raw bytes) and tables (which only format); none of it touches a model.

Two figures, named the same on every page (foxlib.memory.profile):
- model peak (`MemoryProfile.peak`): the step's own tensors. The TFT's budget check reads it.
- process peak: model peak + the cuBLAS workspaces (each stream's once) + the CUDA context; for the
  ensemble in one process (`ensemble_totals`): the sum of the model peaks + the workspaces once + the
  context once. The ensemble-on-a-card check reads it. On the CPU there is no context or workspace
  here: the process peak is the model peak (the sum of them for the ensemble).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd
import torch

from foxlib.core import seed_claims

from foxlib.memory import theory, theory_tft
from foxlib.core.budgets import Check
from foxlib.core.config import MB
from foxlib.core.figures import Figure, key
from foxlib.memory.devices import describe, environment, resolve_device
from foxlib.harness.measure_step import ModelMeasurement, measure_model
from foxlib.harness.measure_step import second_opinion as profiler_categories
from foxlib.memory.cuda import allocator_stats, nvml_view
from foxlib.memory.cuda import bare_context
from foxlib.models import ENSEMBLE, MODELS
from foxlib.core.progress import progress

def measure(*, preset: str = "seed", batch_size: int = 32, encoder_length: int = 60,
            precision: str = "fp32", device: str = "auto", seed: int = 0, ensemble: bool = True,
            ensemble_preset: str = "seed", snapshot_path: str = "", second_opinion: bool = True,
            target_state: bool = True) -> dict[str, Any]:
    """Profile the TFT (and, with `ensemble`, the other models) on `device`; with `target_state`, also the
    seed's target configuration of the ensemble (every model in fp16, the TFT checkpointed)."""
    dev = resolve_device(device)
    context = bare_context(dev)
    cfg = MODELS["tft"].config(preset, batch_size=batch_size, encoder_length=encoder_length)
    others = [m for m in ENSEMBLE if m != "tft" and m in MODELS] if ensemble else []
    out: dict[str, Any] = {"device": describe(dev), "environment": environment(), "bare_context": context,
                           "snapshot": snapshot_path if dev.type == "cuda" else ""}
    with progress(1 + second_opinion + len(others) + (len(others) + 1) * target_state, "wave 8.10") as bar:
        bar.describe(f"profiling tft/{preset} {precision} on {dev}")
        out["tft"] = measure_model("tft", cfg, dev, precision, seed, snapshot_path or None)
        bar.advance()
        if second_opinion:
            bar.describe("the same step through torch.profiler's memory categories")
            out["second_opinion"] = profiler_categories("tft", cfg, dev, precision, seed)
            bar.advance()
        out["ensemble"] = {}
        for name in others:
            bar.describe(f"profiling {name}/{ensemble_preset} fp32 on {dev}")
            model_cfg = MODELS[name].preset(ensemble_preset)
            out["ensemble"][name] = measure_model(name, model_cfg, dev, "fp32", seed)
            if second_opinion:
                out["ensemble"][name]["second_opinion"] = profiler_categories(name, model_cfg, dev, "fp32", seed)
            bar.advance()
        if target_state:
            out["target_state"] = {}
            for name in others + ["tft"]:
                bar.describe(f"profiling {name} in the seed's target state (fp16{', checkpointed' if name == 'tft' else ''})")
                model_cfg = TARGET_TFT(cfg) if name == "tft" else MODELS[name].preset(ensemble_preset)
                out["target_state"][name] = measure_model(name, model_cfg, dev, TARGET_PRECISION, seed, predict=False)
                bar.advance()
    out["theory"] = theory.training_step("tft", cfg, out["tft"]["profile"]["n_parameters"], precision, dev.type)
    out["theory"]["activations_by_module"] = theory_tft.activation_theory_by_block(cfg, dev.type)
    return out


TARGET_PRECISION = "fp16"
"""The seed's target state: "FP16 + Checkpointing" (DQN 3, PPO 73, Mamba-2 82, TFT 774 MB)."""


def TARGET_TFT(cfg):  # noqa: N802 - a configuration, named as the seed names it
    """The seed's checkpointed TFT: every block checkpointed (the seed's `gradient_checkpointing: true`)."""
    import dataclasses
    return dataclasses.replace(cfg, checkpointing="all")


# ----------------------------------------------------------------------------- the record

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`. 1 (files without "schema_version"): written before typed records, when a
CUDA profile's peaks held the workspaces (MemoryProfile.from_dict takes them out)."""

_TOP = ("wave", "measured_at", "measure_parameters", "device", "environment", "bare_context", "snapshot",
        "theory", "second_opinion", "depends_on")


@dataclass(frozen=True)
class Measurement:
    """Wave 8.10's measurement (measure()'s data, plus the runner's wave/measured_at/measure_parameters)."""
    device: dict[str, Any]
    environment: dict[str, Any]
    tft: ModelMeasurement
    theory: dict[str, Any]
    ensemble: dict[str, ModelMeasurement] = field(default_factory=dict)
    target_state: dict[str, ModelMeasurement] = field(default_factory=dict)
    """The seed's target configuration (TARGET_PRECISION, TARGET_TFT), each model; empty if not measured."""
    second_opinion: dict[str, Any] | None = None
    bare_context: dict[str, Any] | None = None
    """CUDA: the context and the first cuBLAS workspace measured at the start (bare_context())."""
    snapshot: str = ""
    wave: str = "8.10"
    measured_at: str | None = None
    measure_parameters: dict[str, Any] = field(default_factory=dict)
    depends_on: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Top-level keys this record does not model (e.g. provenance added by the runner), kept as they are."""
    schema_version: int = SCHEMA_VERSION

    @property
    def models(self) -> dict[str, ModelMeasurement]:
        """Every measured model, in the ensemble's order (the TFT included)."""
        every = {**self.ensemble, "tft": self.tft}
        return {k: every[k] for k in ENSEMBLE if k in every} | {k: v for k, v in every.items() if k not in ENSEMBLE}

    @property
    def on_cuda(self) -> bool:
        return self.tft.profile.cuda is not None

    def to_dict(self) -> dict[str, Any]:
        d = {**self.extra, "schema_version": SCHEMA_VERSION}
        d |= {k: getattr(self, k) for k in _TOP}
        d["tft"] = self.tft.to_dict()
        d["ensemble"] = {k: v.to_dict() for k, v in self.ensemble.items()}
        d["target_state"] = {k: v.to_dict() for k, v in self.target_state.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        version = d.get("schema_version", 1)
        if version > SCHEMA_VERSION:
            raise ValueError(f"wave 8.10 measurement of schema {version}: this foxlib reads up to {SCHEMA_VERSION}")
        if d.get("wave", "8.10") != "8.10":
            raise ValueError(f"a measurement of wave {d['wave']!r}, not 8.10")
        known = set(_TOP) | {"tft", "ensemble", "target_state", "schema_version"}
        return cls(**{k: d[k] for k in _TOP if k in d},
                   tft=ModelMeasurement.from_dict(d["tft"]),
                   ensemble={k: ModelMeasurement.from_dict(v) for k, v in (d.get("ensemble") or {}).items()},
                   target_state={k: ModelMeasurement.from_dict(v) for k, v in (d.get("target_state") or {}).items()},
                   extra={k: v for k, v in d.items() if k not in known})

    @classmethod
    def coerce(cls, m: "Measurement | dict[str, Any]") -> "Measurement":
        return m if isinstance(m, cls) else cls.from_dict(m)


# ----------------------------------------------------------------------------- analysis: raw bytes

MODEL_PEAK = "model peak"
PROCESS_PEAK = "process peak"
MODEL_PEAK_DEFINITION = "the step's own tensors at their largest (CUDA: the allocator's peak less the workspaces)"
PROCESS_PEAK_DEFINITION = ("model peak + the cuBLAS workspaces (each stream's once) + the CUDA context; "
                           "on the CPU there is no context or workspace here: the process peak is the model peak")


@dataclass(frozen=True)
class EnsembleTotals:
    """The four models trained in one process, in bytes."""
    model_peaks: dict[str, int]
    """Each model's model peak (MemoryProfile.peak)."""
    host_buffer_bytes: dict[str, int]
    workspace_bytes: int
    """cuBLAS workspaces, each stream's once: the largest any model's step found allocated (they persist
    and accumulate in the process, so the last model's start holds every one made before); 0 on the CPU."""
    context_bytes: int
    """The CUDA context, once: the largest measured after any model's step (it grows as kernels load); 0 on the CPU."""
    on_cuda: bool

    @property
    def process_peak(self) -> int:
        """The ensemble's process peak: sum of the model peaks + workspaces once + context once."""
        return sum(self.model_peaks.values()) + self.workspace_bytes + self.context_bytes

    def share_of(self, card_bytes: float) -> float:
        """The process peak as a fraction of a card's memory."""
        return self.process_peak / card_bytes

    def headroom(self, card_bytes: float) -> float:
        """What a card's memory leaves free beside the process peak (bytes)."""
        return card_bytes - self.process_peak


def ensemble_totals(m: Measurement | dict[str, Any], target_state: bool = False) -> EnsembleTotals | None:
    """The ensemble as measured (fp32), or in the seed's target state (None where that was not measured)."""
    m = Measurement.coerce(m)
    models = m.target_state if target_state else m.models
    if not models:
        return None
    profiles = {k: v.profile for k, v in models.items()}
    context = 0
    if m.on_cuda:
        context = max(p.context_bytes for p in profiles.values()) or int((m.bare_context or {}).get("context_bytes") or 0)
    return EnsembleTotals(
        model_peaks={k: p.peak for k, p in profiles.items()},
        host_buffer_bytes={k: sum(b["host_bytes"] for b in p.buffers.values()) for k, p in profiles.items()},
        workspace_bytes=max(p.workspace_bytes for p in profiles.values()), context_bytes=context, on_cuda=m.on_cuda)


def checks(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> list[Check]:
    m = Measurement.coerce(m)
    p, b = m.tft.profile, budgets["tft"]
    out = [
        Check.at_most("TFT parameters", p.parameters, b["parameters_mb"] * MB, "bytes"),
        Check.at_most("TFT forward activations (saved for backward)", p.activations,
                      b["forward_activations_mb"] * MB, "bytes"),
        Check.at_most("TFT gradients", p.gradients, b["gradients_mb"] * MB, "bytes"),
        Check.at_most("TFT optimizer state", p.optimizer_state, b["optimizer_state_mb"] * MB, "bytes"),
        Check.at_most("TFT peak training memory", p.peak, b["peak_training_mb"] * MB, "bytes",
                      note=f"{MODEL_PEAK}: {MODEL_PEAK_DEFINITION}"),
    ]
    if m.ensemble:
        e = ensemble_totals(m)
        headroom = budgets["ensemble"]["min_headroom_mb"]
        limit = budgets["ensemble"]["card_mb"] * MB - headroom * MB
        what = ("sum of the four model peaks + cuBLAS workspaces once + CUDA context once" if e.on_cuda else
                "sum of the four model peaks (CPU: no context or workspaces, the process peak is the models' sum)")
        out.append(Check.at_most("ensemble fits in 4 GB", e.process_peak, limit, "bytes",
                                 note=f"{PROCESS_PEAK} of the ensemble: {what}, leaving at least {headroom:.0f} MB free"))
    return out


# ----------------------------------------------------------------------------- tables: formatting only


def _mb(x: float | None) -> float | None:
    return None if x is None else round(x / MB, 1)


def breakdown_table(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The TFT's categories against their budgets, with the theory and the seed beside them."""
    m = Measurement.coerce(m)
    p, b, th = m.tft.profile, budgets["tft"], m.theory
    rows = [
        ("parameters", p.parameters, b["parameters_mb"], th["parameters"], seed_claims.TFT_8_10_MB["parameters"]),
        ("forward activations (saved for backward)", p.activations, b["forward_activations_mb"],
         th["activations"], seed_claims.TFT_8_10_MB["activations"]),
        ("gradients", p.gradients, b["gradients_mb"], th["gradients"], seed_claims.TFT_8_10_MB["gradients"]),
        ("optimizer state", p.optimizer_state, b["optimizer_state_mb"], th["optimizer_state"],
         seed_claims.TFT_8_10_MB["optimizer_state"]),
        (f"peak training: {MODEL_PEAK} (the step's tensors)", p.peak, b["peak_training_mb"], th["peak"],
         seed_claims.TFT_8_10_MB["peak"]),
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
        "measured (MB)": _mb(measured),
        "budget (MB)": budget,
        "status": "" if budget is None else ("PASS" if measured <= budget * MB else "FAIL"),
        "theory (MB)": _mb(theo),
        "seed, nvidia-smi (MB)": seed_mb,
    } for name, measured, budget, theo, seed_mb in rows])


def activations_by_module(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """Measured saved bytes per TFT block beside the hand count from shapes, with the gap."""
    m = Measurement.coerce(m)
    p = m.tft.profile
    theory_blocks = m.theory.get("activations_by_module") or {}
    total = p.activations or 1
    rows = []
    for k, v in p.activations_by_module.items():
        t = theory_blocks.get(k)
        gap = "" if t is None else ("exact" if t == v else
                                    "LSTM backend workspace (oneDNN/cuDNN), not derivable from shapes"
                                    if k.startswith("lstm") else f"{v - t:+,} bytes")
        rows.append({"block": k, "measured (MB)": _mb(v), "share (%)": round(100 * v / total, 1),
                     "theory (MB)": _mb(t), "gap": gap})
    return pd.DataFrame(rows)


def cuda_reconciliation(m: Measurement | dict[str, Any]) -> pd.DataFrame | None:
    """nvidia-smi's process figure split into context + allocator reserve; reserve into allocated + cached."""
    m = Measurement.coerce(m)
    p = m.tft.profile
    cuda = p.cuda
    if not cuda:
        return None
    nvml = cuda["nvml"]
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
         f"start: {_mb((m.bare_context or {}).get('cublas_workspace_bytes'))} MB"),
        ("    + cached, free for reuse", cuda["reserved_bytes"] - cuda["allocated_bytes"], "kept by the allocator, invisible to tensors"),
        ("allocator reserved, peak", cuda["reserved_peak_bytes"], "largest reserve during the step"),
        ("allocated, peak", cuda["allocated_peak_bytes"], f"largest live total during the step = {MODEL_PEAK} + workspaces"),
        (MODEL_PEAK, p.peak, MODEL_PEAK_DEFINITION),
        (PROCESS_PEAK, p.process_peak, "model peak + workspaces + CUDA context"),
        ("fragmentation (inactive split blocks)", cuda["inactive_split_bytes"], f"{100 * cuda['fragmentation']:.1f} % of reserved"),
        ("bare CUDA context at start", (m.bare_context or {}).get("context_bytes"), "NVML with one tiny tensor allocated"),
        ("device memory used, all processes", nvml.get("device_used_bytes"), "NVML device view"),
    ]
    return pd.DataFrame([{"quantity": q, "MB": _mb(v), "how": how} for q, v, how in rows])


def seed_explanations(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """Each seed figure, ours beside it, and why they differ — numbers from the measurement."""
    m = Measurement.coerce(m)
    p, th = m.tft.profile, m.theory
    cuda = p.cuda or {}
    ctx = p.context_bytes or (m.bare_context or {}).get("context_bytes")
    reserved_peak = cuda.get("reserved_peak_bytes")
    smi = (f"on this GPU nvidia-smi would have shown ≈ context {_mb(ctx)} MB + allocator reserve "
           f"{_mb(reserved_peak)} MB at the peak = {_mb((ctx or 0) + (reserved_peak or 0))} MB"
           if cuda else "not measurable on the CPU: see the GPU report for the context and the reserve")
    ratio = (p.activations / th["activations"]) if th.get("activations") else None
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
         + (f" (the {PROCESS_PEAK}, with workspaces and context: {_mb(p.process_peak)} MB)" if cuda else "")),
        ("\"615x overhead\"", seed_claims.TFT_FORWARD_MEASURED_MB, p.forward_peak,
         f"the seed divided nvidia-smi's {seed_claims.TFT_FORWARD_MEASURED_MB:,} MB by a {seed_claims.TFT_THEORETICAL_MB} MB "
         "'theoretical' figure that counts neither weights nor saved activations. Our shape-based theory predicts "
         f"{_mb(th['activations'])} MB of saved activations; measured/theory = "
         f"{'n/a' if ratio is None else f'{ratio:.2f}'}. There is no 615x overhead: the memory is the "
         "per-variable GRNs' saved tensors plus what nvidia-smi adds"),
    ]
    return pd.DataFrame([{"figure": f, "seed (MB)": s, "foxlib measured (MB)": _mb(ours), "why they differ": why}
                         for f, s, ours, why in rows])


def ensemble_table(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Per model: categories and model peak; then workspaces and context once, the process peak, its share
    of the card and the headroom."""
    m = Measurement.coerce(m)
    e = ensemble_totals(m)
    col, proc = f"{MODEL_PEAK} (MB)", f"{PROCESS_PEAK} (MB)"
    rows = []
    for name, mm in m.models.items():
        p = mm.profile
        bufs = p.buffers
        where = ", ".join(f"{k}: {v['lives_in']}" for k, v in bufs.items()) or "—"
        rows.append({
            "model": name,
            "parameters (MB)": _mb(p.parameters), "gradients (MB)": _mb(p.gradients),
            "optimizer (MB)": _mb(p.optimizer_state), "activations (MB)": _mb(p.activations),
            "buffers (MB)": _mb(sum(b["bytes"] for b in bufs.values())), "buffers live in": where,
            col: _mb(e.model_peaks[name]), "seed (MB)": seed_claims.ENSEMBLE_CURRENT_MB.get(name),
        })
    card = budgets["ensemble"]["card_mb"] * MB
    seed_total = sum(seed_claims.ENSEMBLE_CURRENT_MB.values())
    if e.on_cuda:
        rows.append({"model": "+ cuBLAS workspaces (each stream's once, for the process)", proc: _mb(e.workspace_bytes)})
        rows.append({"model": "+ CUDA context (once per process)", proc: _mb(e.context_bytes)})
    total = (f"{PROCESS_PEAK}: the model peaks + workspaces + context" if e.on_cuda else
             f"{PROCESS_PEAK}: the model peaks' sum (CPU: no context or workspaces)")
    rows.append({"model": total, col: _mb(sum(e.model_peaks.values())), proc: _mb(e.process_peak),
                 "seed (MB)": seed_total})
    rows += _card_rows(e, card, seed_total, proc, "seed (MB)")
    return pd.DataFrame(rows, columns=[*rows[0].keys(), proc])


def _card_rows(e: EnsembleTotals, card_bytes: float, seed_total_mb: float, proc: str, seed_col: str) -> list[dict]:
    """The ensemble's process peak as a share of the card and the headroom it leaves, beside the seed's."""
    return [{"model": "share of a 4 GB card (%)", proc: round(100 * e.share_of(card_bytes), 1),
             seed_col: round(100 * seed_total_mb / seed_claims.ENSEMBLE_CARD_MB, 1)},
            {"model": "headroom (MB)", proc: _mb(e.headroom(card_bytes)), seed_col: seed_claims.ENSEMBLE_CARD_MB - seed_total_mb}]


def second_opinion_table(m: Measurement | dict[str, Any]) -> pd.DataFrame | None:
    """foxlib's categories beside torch.profiler's, at the step's peak, with the unexplained rest."""
    m = Measurement.coerce(m)
    so = m.second_opinion
    if not so or not so.get("available"):
        return None
    p, at, mx = m.tft.profile, so["at_peak"], so["max_by_category"]
    rows = [
        ("parameters", p.parameters, at.get("parameter"), mx.get("parameter"), "weights: both count the same tensors"),
        ("optimizer state", p.optimizer_state, at.get("optimizer_state"), mx.get("optimizer_state"),
         "Adam moments and step counters"),
        ("gradients", p.gradients, at.get("gradient"), mx.get("gradient"),
         "foxlib: all gradients after backward; at the peak only those already computed exist"),
        ("activations", p.activations, at.get("activation"), mx.get("activation"),
         "foxlib: saved for backward at the end of the forward; torch: tensors it traced to backward use"),
        ("inputs", p.batch, at.get("input"), mx.get("input"), "the batch"),
        ("temporaries", None, at.get("temporary"), mx.get("temporary"), "freed inside one op or step"),
        ("autograd detail", None, at.get("autograd_detail"), mx.get("autograd_detail"),
         "gradients of intermediate tensors during backward"),
        ("unexplained (no category)", None, at.get("unknown"), mx.get("unknown"),
         "allocations torch could not attribute: e.g. the foreach Adam's temporaries, library workspaces"),
        (f"peak (foxlib: {MODEL_PEAK})", p.peak, so["peak_bytes"], None,
         "largest live total of the step (torch.profiler's timeline holds what its step allocates, workspaces made "
         "before it not included)"),
    ]
    return pd.DataFrame([{"category": c, "foxlib (MB)": _mb(f), "torch.profiler at the peak (MB)": _mb(t),
                          "torch.profiler, category maximum (MB)": _mb(x), "note": note}
                         for c, f, t, x, note in rows])


def unexplained_share(m: Measurement | dict[str, Any]) -> float | None:
    """The share of the TFT's peak torch.profiler could not put in any category."""
    return _unexplained(Measurement.coerce(m).second_opinion)


def _unexplained(so: dict[str, Any] | None) -> float | None:
    if not so or not so.get("available") or not so["peak_bytes"]:
        return None
    return so["at_peak"].get("unknown", 0) / so["peak_bytes"]


UNEXPLAINED_TARGET_PCT = 5.0


def unexplained_by_model(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """Per model: torch.profiler's peak, the part of it in no category, and its share (target < 5 %)."""
    m = Measurement.coerce(m)
    sos = {"tft": m.second_opinion} | {n: e.second_opinion for n, e in m.ensemble.items()}
    rows = []
    for name, so in sos.items():
        share = _unexplained(so)
        rows.append({"model": name, "peak, torch.profiler (MB)": _mb(so["peak_bytes"]) if share is not None else None,
                     "unexplained at the peak (MB)": _mb(so["at_peak"].get("unknown", 0)) if share is not None else None,
                     "unexplained (%)": None if share is None else round(100 * share, 2),
                     f"under {UNEXPLAINED_TARGET_PCT:g} %": None if share is None else 100 * share < UNEXPLAINED_TARGET_PCT})
    return pd.DataFrame(rows)


def target_state_table(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> pd.DataFrame | None:
    """The seed's target state (every model fp16, the TFT checkpointed) measured, beside the seed's figures."""
    m = Measurement.coerce(m)
    e = ensemble_totals(m, target_state=True)
    if e is None:
        return None
    col, proc = f"{MODEL_PEAK} (MB)", f"{PROCESS_PEAK} (MB)"
    rows = [{"model": name, col: _mb(peak), "seed's target (MB)": seed_claims.ENSEMBLE_TARGET_MB.get(name)}
            for name, peak in e.model_peaks.items()]
    if e.on_cuda:
        rows.append({"model": "+ cuBLAS workspaces and CUDA context (once)", proc: _mb(e.workspace_bytes + e.context_bytes)})
    card = budgets["ensemble"]["card_mb"] * MB
    seed_total = sum(seed_claims.ENSEMBLE_TARGET_MB.values())
    rows.append({"model": PROCESS_PEAK, col: _mb(sum(e.model_peaks.values())), proc: _mb(e.process_peak),
                 "seed's target (MB)": seed_total})
    rows += _card_rows(e, card, seed_total, proc, "seed's target (MB)")
    return pd.DataFrame(rows, columns=["model", col, proc, "seed's target (MB)"])


# ----------------------------------------------------------------------------- named figures

def named_figures(m: Measurement | dict[str, Any]) -> list[Figure]:
    """The figures this report shows that other pages show too (foxlib.core.figures), raw."""
    m = Measurement.coerce(m)
    p, cfg = m.tft.profile, m.tft.config
    preset = m.measure_parameters.get("preset", "seed")
    tft = partial(key, "tft", preset, cfg["batch_size"], cfg["encoder_length"], p.precision)
    out = [Figure(tft(q), getattr(p, q), "bytes") for q in
           ("parameters", "gradients", "optimizer_state", "activations", "forward_peak")]
    out += [Figure(tft("model_peak"), p.peak, "bytes"), Figure(tft("process_peak"), p.process_peak, "bytes"),
            Figure(tft("theory_peak"), int(m.theory["peak"]), "bytes")]
    ensemble_preset = m.measure_parameters.get("ensemble_preset", "seed")
    out += [Figure(f"{name}/{ensemble_preset}/fp32/model_peak", mm.profile.peak, "bytes") for name, mm in m.ensemble.items()]
    for state, tag in ((False, "fp32"), (True, f"{TARGET_PRECISION}-checkpoint")):
        totals = ensemble_totals(m, target_state=state)
        if totals is not None and len(totals.model_peaks) == len(ENSEMBLE):
            out.append(Figure(f"ensemble/{ensemble_preset}/{tag}/process_peak", totals.process_peak, "bytes"))
    return out
