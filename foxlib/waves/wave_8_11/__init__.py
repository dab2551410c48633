"""Wave 8.11: mixed precision — the memory and speed it buys, the accuracy it costs, all measured.

The seed expected fp16 to take the TFT from 3,096 MB to 1,548 MB (50 %), "+20 % faster" and
"< 2 % loss". Here every model is re-profiled in each precision, the TFT's step is timed with
the precisions alternating in one run, and the TFT is trained to a fixed budget of steps with
early stopping, several seeds per precision, and scored on held-out windows. The accuracy gate has
power only if fp32 beats the naive forecast (climatology, foxlib.harness.skill) by the harness's margin:
that is checked first, and the comparison counts only the seeds whose fp32 run has that skill.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from foxlib.core import seed_claims
from foxlib.core.budgets import Check
from foxlib.core.config import MB
from foxlib.core.figures import Figure, key
from foxlib.memory.devices import describe, environment, resolve_device
from foxlib.harness.measure_step import measure_model
from foxlib.memory.profile import PRECISIONS, MemoryProfile, check_precision
from foxlib.models import MODELS
from foxlib.core.progress import progress
from foxlib.harness.recipe import StepRecipe, build_step, timed_step
from foxlib.harness.timing import Timing, time_alternating
from foxlib.harness.training import HARNESS, check_target, accuracy_config, accuracy_gate, compare_precisions, degradation, skill_summary


def _split(text: str, valid, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in valid]
    if bad or not items:
        raise ValueError(f"unknown {what} {bad or text!r}; valid: {', '.join(valid)}")
    return items


def check_precisions(precisions: list[str], candidate: str) -> None:
    """The precisions compared must include fp32 (the baseline) and the candidate."""
    check_precision(candidate)
    if "fp32" not in precisions or candidate not in precisions:
        raise ValueError(f"precisions must include fp32 (the baseline) and the candidate {candidate!r}; "
                         f"got {','.join(precisions)}")


def measure(*, preset: str = "seed", batch_size: int = 32, encoder_length: int = 60, precisions: str = "fp32,fp16,bf16",
            candidate: str = "fp16", models: str = "tft,dqn,ppo,mamba2", device: str = "auto", seed: int = 0,
            timing_repeats: int = 15, accuracy_preset: str = "auto", accuracy_seeds: int = 3,
            accuracy_steps: int = HARNESS["max_steps"], accuracy_eval_every: int = HARNESS["eval_every"],
            accuracy_patience: int = HARNESS["patience"], accuracy_val_windows: int = HARNESS["val_windows"],
            accuracy_memory_efficient: bool = True, accuracy_target: str = HARNESS["target"],
            accuracy_batch_size: int = HARNESS["batch_size"], accuracy_lr: float = HARNESS["lr"],
            accuracy_min_skill_pct: float = 100 * HARNESS["min_skill"]) -> dict[str, Any]:
    precs = _split(precisions, PRECISIONS, "precision(s)")
    check_precisions(precs, candidate)
    check_target(accuracy_target)
    names = _split(models, list(MODELS), "model(s)")
    dev = resolve_device(device)
    tft = MODELS["tft"]
    cfg = tft.config(preset, batch_size=batch_size, encoder_length=encoder_length)
    acc_preset = accuracy_preset if accuracy_preset != "auto" else ("seed" if dev.type == "cuda" else "small")
    acc_cfg = accuracy_config(acc_preset, batch_size=accuracy_batch_size, lr=accuracy_lr,
                              memory_efficient=accuracy_memory_efficient)
    out: dict[str, Any] = {"device": describe(dev), "environment": environment(), "precisions": precs,
                           "candidate": candidate, "tft_config": dataclasses.asdict(cfg),
                           "accuracy_config": dataclasses.asdict(acc_cfg), "accuracy_preset": acc_preset}
    with progress(len(names) * len(precs), "wave 8.11 memory") as bar:
        out["memory"] = {}
        for name in names:
            model_cfg = cfg if name == "tft" else MODELS[name].preset(preset)
            for p in precs:
                bar.describe(f"profiling {name}/{preset} {p} on {dev}")
                r = measure_model(name, model_cfg, dev, p, seed)
                out["memory"].setdefault(name, {})[p] = r["profile"]
                out.setdefault("predicted", {}).setdefault(name, {})[p] = r["predicted"]
                bar.advance()
    steps = {p: timed_step(tft, cfg, dev, p, seed) for p in precs}
    timings = time_alternating(steps, repeats=timing_repeats, warmup=3, device=dev)
    out["timing"] = {p: t.to_dict() for p, t in timings.items()}
    del steps
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    out.update(accuracy_runs(acc_cfg, precs, accuracy_seeds, dev, max_steps=accuracy_steps, eval_every=accuracy_eval_every,
                             patience=accuracy_patience, val_windows=accuracy_val_windows, target=accuracy_target,
                             min_skill=accuracy_min_skill_pct / 100))
    return out


# ----------------------------------------------------------------------------- the record

SCHEMA_VERSION = 2
"""Of `Measurement.to_dict()`. 1 (files without "schema_version"): written before typed records, when a
CUDA profile's peaks held the workspaces (MemoryProfile.from_dict takes them out)."""

_PLAIN = ("wave", "measured_at", "measure_parameters", "device", "environment", "precisions", "candidate",
          "tft_config", "accuracy_config", "accuracy_preset", "predicted", "accuracy_runs", "accuracy",
          "accuracy_harness")


@dataclass(frozen=True)
class Measurement:
    """Wave 8.11's measurement: profiles per model and precision, the TFT's step times, the accuracy runs."""
    device: dict[str, Any]
    environment: dict[str, Any]
    precisions: list[str]
    candidate: str
    memory: dict[str, dict[str, MemoryProfile]]
    """model -> precision -> the step's profile (its `peak` is the model peak)."""
    timing: dict[str, Timing]
    """precision -> the TFT step's alternating samples (seconds)."""
    accuracy_runs: list[dict[str, Any]]
    accuracy: list[dict[str, Any]]
    tft_config: dict[str, Any] = field(default_factory=dict)
    accuracy_config: dict[str, Any] = field(default_factory=dict)
    accuracy_preset: str = ""
    accuracy_harness: dict[str, Any] = field(default_factory=dict)
    """The accuracy harness's configuration as run (foxlib.harness.training.HARNESS, resolved)."""
    predicted: dict[str, dict[str, Any]] = field(default_factory=dict)
    wave: str = "8.11"
    measured_at: str | None = None
    measure_parameters: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    """Top-level keys this record does not model (e.g. provenance added by the runner), kept as they are."""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = {**self.extra, "schema_version": SCHEMA_VERSION}
        d |= {k: getattr(self, k) for k in _PLAIN}
        d["memory"] = {n: {p: prof.to_dict() for p, prof in per.items()} for n, per in self.memory.items()}
        d["timing"] = {p: t.to_dict() for p, t in self.timing.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        version = d.get("schema_version", 1)
        if version > SCHEMA_VERSION:
            raise ValueError(f"wave 8.11 measurement of schema {version}: this foxlib reads up to {SCHEMA_VERSION}")
        if d.get("wave", "8.11") != "8.11":
            raise ValueError(f"a measurement of wave {d['wave']!r}, not 8.11")
        known = set(_PLAIN) | {"memory", "timing", "schema_version"}
        return cls(**{k: d[k] for k in _PLAIN if k in d},
                   memory={n: {p: MemoryProfile.from_dict(x) for p, x in per.items()} for n, per in d["memory"].items()},
                   timing={p: Timing(t.get("name", p), tuple(t["samples_s"])) for p, t in d["timing"].items()},
                   extra={k: v for k, v in d.items() if k not in known})

    @classmethod
    def coerce(cls, m: "Measurement | dict[str, Any]") -> "Measurement":
        return m if isinstance(m, cls) else cls.from_dict(m)


def accuracy_runs(acc_cfg, precisions: list[str], seeds: int, device: torch.device, **harness) -> dict[str, Any]:
    """The accuracy part of the measurement: every precision and seed trained by the harness
    (foxlib.harness.training), the degradation rows, and the harness's configuration as run."""
    results = compare_precisions(acc_cfg, precisions, range(seeds), device=device, **harness)
    return {"accuracy_runs": [r.to_dict() for r in results], "accuracy": degradation(results),
            "accuracy_harness": results[0].harness}


def _plain(m: "Measurement | dict[str, Any]") -> dict[str, Any]:
    """The measurement as plain data (the accuracy tables read the runs' dicts)."""
    return m.to_dict() if isinstance(m, Measurement) else m


# ----------------------------------------------------------------------------- analysis

def _mb(x):
    return None if x is None else round(x / MB, 1)


def headline_degradation(m: Measurement | dict[str, Any], precision: str) -> dict[str, Any]:
    """The validation quantile loss row: the accuracy gate's metric."""
    m = Measurement.coerce(m)
    return next(r for r in m.accuracy if r["precision"] == precision and r["metric"] == "quantile_loss")


def accuracy_checks(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> list[Check]:
    """The accuracy gate, with power. First: every fp32 run beats climatology by the harness's
    min_skill (its validation quantile loss ≤ (1 − min_skill) × climatology's), else the harness has
    no power and the wave cannot say that the candidate keeps the accuracy: NO-GO, not GO by default
    (results.json has no third verdict, and a GO must mean the accuracy was shown). Second: the
    candidate's degradation against fp32 over the seeds whose fp32 run has skill (training.accuracy_gate);
    with none it fails and says "no power"."""
    c = m["candidate"]
    gate = accuracy_gate(m["accuracy_runs"], c)
    base = [r for r in m["accuracy_runs"] if r["precision"] == "fp32"]
    worst = max(base, key=lambda r: r["metrics"]["quantile_loss"] / r["metrics"]["naive_quantile_loss"])
    wm = worst["metrics"]
    limit = budgets["accuracy"]["max_degradation_pct"]
    row = headline_degradation(m, c)
    skill_note = (f"skill scores (1 − QL / climatology's) per seed: "
                  + ", ".join(f"{s}: {100 * v:+.2f} %" for s, v in gate["baseline_skill_scores"].items())
                  + f"; worst seed {worst['seed']}: QL {wm['quantile_loss']:.4f} vs climatology {wm['naive_quantile_loss']:.4f}")
    degradation_note = (f"mean of {len(gate['seeds_compared'])} seed(s) with skill; fp32 seed-to-seed spread "
                        f"{row['baseline_spread_pct']:.2f} %" if gate["powered"] else gate["reason"])
    return [
        Check.at_most("TFT fp32 validation quantile loss / climatology's (worst seed): the accuracy gate's power",
                      wm["quantile_loss"] / wm["naive_quantile_loss"], 1 - gate["min_skill"], "ratio", note=skill_note),
        Check(f"TFT accuracy degradation in {c} (validation quantile loss)", gate["degradation_pct"], limit, "%",
              bool(gate["powered"] and gate["degradation_pct"] <= limit), note=degradation_note),
    ]


def checks(m: Measurement | dict[str, Any], budgets: dict[str, dict[str, float]]) -> list[Check]:
    m = Measurement.coerce(m)
    c = m.candidate
    return accuracy_checks(m.to_dict(), budgets) + [
        Check.at_most(f"TFT peak training memory in {c}", m.memory["tft"][c].peak, budgets["tft"]["peak_training_mb"] * MB,
                      "bytes", note="model peak: the step's own tensors (workspaces and CUDA context apart)"),
    ]


def memory_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """The TFT's categories in each precision, the change against fp32, the seed's expectation."""
    m = Measurement.coerce(m)
    rows = []
    base = m.memory["tft"]["fp32"]
    for p in m.precisions:
        prof = m.memory["tft"][p]
        rows.append({
            "precision": p, "parameters (MB)": _mb(prof.parameters), "gradients (MB)": _mb(prof.gradients),
            "optimizer (MB)": _mb(prof.optimizer_state), "activations (MB)": _mb(prof.activations),
            "forward peak (MB)": _mb(prof.forward_peak), "model peak (MB)": _mb(prof.peak),
            "model peak vs fp32 (%)": round(100 * (prof.peak / base.peak - 1), 1),
            "activations vs fp32 (%)": round(100 * (prof.activations / base.activations - 1), 1),
            "process peak (MB)": _mb(prof.process_peak),
            "seed's expectation (MB)": seed_claims.FP16_EXPECTED_PEAK_MB if p == "fp16" else None,
        })
    return pd.DataFrame(rows)


def models_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """Every model's model peak per precision (the figure wave 8.10 shows under the same name)."""
    m = Measurement.coerce(m)
    rows = []
    for name, per in m.memory.items():
        row = {"model": name}
        for p, prof in per.items():
            row[f"{p} model peak (MB)"] = _mb(prof.peak)
        for p in m.precisions:
            if p != "fp32":
                row[f"{p} vs fp32 (%)"] = round(100 * (per[p].peak / per["fp32"].peak - 1), 1)
        rows.append(row)
    return pd.DataFrame(rows)


def why_not_half(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    """Why "fp16 halves memory" does not hold: what stays fp32, and the 16-bit extras."""
    m = Measurement.coerce(m)
    base, rows = m.memory["tft"]["fp32"], []
    for p in m.precisions:
        if p == "fp32":
            continue
        prof = m.memory["tft"][p]
        kept = prof.parameters + prof.gradients + prof.optimizer_state
        halved_ideal = base.activations / 2
        rows.append({
            "precision": p,
            "stays fp32: weights + gradients + Adam (MB)": _mb(kept),
            "activations if all halved (MB)": _mb(halved_ideal),
            "activations measured (MB)": _mb(prof.activations),
            "not halved (MB)": _mb(prof.activations - halved_ideal),
            "why": "autocast runs only matmul-like ops in 16 bits: layer norms, softmax, ELU, the loss and "
                   "the LSTM state stay fp32; each cast makes a 16-bit copy (weights included: the "
                   "cast-weight cache) that backward keeps; parameters, gradients and Adam state stay fp32",
        })
    return pd.DataFrame(rows)


def speed_ratio(m: Measurement | dict[str, Any], precision: str) -> tuple[float, float | None, float | None]:
    """(median ratio, low, high) of the TFT step's time in `precision` to fp32's, from the raw samples.

    THE ONE CALL SITE for the interval: foxlib.harness.timing.ratio_interval(timings, name, baseline) ->
    RatioInterval(median, low, high) when foxlib.harness.timing has it; until then the ratio of the medians,
    without an interval (low, high None)."""
    m = Measurement.coerce(m)
    try:
        from foxlib.harness.timing import ratio_interval  # type: ignore[attr-defined]
    except ImportError:
        return m.timing[precision].median_s / m.timing["fp32"].median_s, None, None
    r = ratio_interval(m.timing, precision, "fp32")
    return r.median, r.low, r.high


def speed_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    m = Measurement.coerce(m)
    rows = []
    for p, t in m.timing.items():
        ratio, low, high = speed_ratio(m, p)
        rows.append({
            "precision": p, "median step (ms)": round(1e3 * t.median_s, 2), "IQR (ms)": round(1e3 * t.iqr_s, 2),
            "ratio to fp32": round(ratio, 3),
            "ratio interval (low, high)": "—" if low is None else f"{low:.2f} – {high:.2f}",
            "noisy (IQR > 10 %)": t.noisy,
            "seed's guess": seed_claims.STRATEGY_GUESSES["fp16"]["speed"] if p == "fp16" else "",
        })
    return pd.DataFrame(rows)


def accuracy_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    m = Measurement.coerce(m)
    return pd.DataFrame([{
        "precision": r["precision"], "metric": r["metric"], "mean over seeds": round(r["mean"], 4),
        "per seed": ", ".join(f"{v:.4f}" for v in r["values"]),
        "degradation vs fp32 (%)": round(r["degradation_pct"], 2),
        "fp32 seed spread (%)": round(r["baseline_spread_pct"], 2),
        "beyond noise": abs(r["degradation_pct"]) > r["baseline_spread_pct"] if r["precision"] != "fp32" else "",
    } for r in m.accuracy])


def skill_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    m = _plain(m)
    """Per precision: the naive forecast's (climatology's) and the model's validation quantile loss, the
    skill score (1 − QL_model / QL_climatology) per seed, the 10-90 coverage of both, and the seeds with skill."""
    return pd.DataFrame([{
        "precision": r["precision"], "climatology QL": round(r["naive_quantile_loss"], 4),
        "model QL (mean)": round(r["quantile_loss"], 4), "skill score (%, mean)": round(100 * r["skill_score"], 2),
        "skill score per seed (%)": ", ".join(f"{100 * v:+.2f}" for v in r["skill_scores"]),
        "10-90 coverage (model)": round(r["coverage_10_90"], 3),
        "10-90 coverage (climatology)": round(r["naive_coverage_10_90"], 3),
        f"seeds with skill ≥ {100 * r['min_skill']:g} %": f"{r['with_skill']} of {len(r['seeds'])}",
    } for r in skill_summary(m["accuracy_runs"])])


def harness_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    m = _plain(m)
    """The accuracy harness's configuration as run: what the skill and the degradation were measured with."""
    h = m["accuracy_harness"]
    cfg = h["tft_config"]
    rows = {"target": h["target"], "TFT preset": m["accuracy_preset"],
            "TFT config": ", ".join(f"{k}={cfg[k]}" for k in ("hidden_size", "num_heads", "n_observed", "encoder_length",
                                                              "decoder_length", "batch_size", "dropout", "lr",
                                                              "memory_efficient")),
            "step budget": h["max_steps"], "validation every (steps)": h["eval_every"],
            "early-stopping patience (evaluations)": h["patience"], "validation windows": h["val_windows"],
            "gradient clip (norm)": h["grad_clip"], "checkpoint kept": h["selection"],
            "naive forecast": h["naive_forecast"], "skill needed (%)": 100 * h["min_skill"]}
    return pd.DataFrame([{"setting": k, "value": str(v)} for k, v in rows.items()])


def training_table(m: Measurement | dict[str, Any]) -> pd.DataFrame:
    m = _plain(m)
    return pd.DataFrame([{"precision": r["precision"], "seed": r["seed"], "steps run": r["steps"],
                          "best step": r["best_step"], "stopped early": r["stopped_early"],
                          "skill score (%)": round(100 * r["metrics"]["skill_score"], 2),
                          "seconds": round(r["seconds"], 1)} for r in m["accuracy_runs"]])


def named_figures(m: Measurement | dict[str, Any]) -> list[Figure]:
    """The figures this report shows that other pages show too (foxlib.core.figures), raw: every model's
    model peak per precision (keyed as 8.10 and 8.12 key them), the TFT's step-time ratio to fp32 with
    its interval, and the accuracy harness's skill and degradation per precision."""
    m = Measurement.coerce(m)
    preset = m.measure_parameters.get("preset", "seed")
    cfg = m.tft_config
    out = []
    for name, per in m.memory.items():
        for precision, prof in per.items():
            k = (key("tft", preset, cfg["batch_size"], cfg["encoder_length"], precision, "model_peak") if name == "tft"
                 else f"{name}/{preset}/{precision}/model_peak")
            out.append(Figure(k, prof.peak, "bytes"))
    for precision in m.timing:
        if precision != "fp32":
            median, low, high = speed_ratio(m, precision)
            out.append(Figure(key("tft", preset, cfg["batch_size"], cfg["encoder_length"], precision, "step_time_ratio"),
                              median, "ratio", low=low, high=high))
    acc = f"tft/{m.accuracy_preset or preset}/accuracy"
    runs = [r for r in m.accuracy_runs if "skill_score" in r.get("metrics", {})]
    base = [r["metrics"]["skill_score"] for r in runs if r["precision"] == "fp32"]
    if base:
        out.append(Figure(f"{acc}/fp32/skill_margin", sum(base) / len(base), "fraction"))
        for precision in sorted({r["precision"] for r in runs} - {"fp32"}):  # one order, whatever the hash seed
            gate = accuracy_gate(m.accuracy_runs, precision)
            out.append(Figure(f"{acc}/{precision}/accuracy_change", gate["degradation_pct"] / 100, "fraction"))
    return out
