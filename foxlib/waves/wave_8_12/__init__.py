"""Wave 8.12: the seed's optimisation-strategy table, measured, and the configuration to ship.

The seed guessed every cell: FP16 50 % / +20 % faster, checkpointing 75 % / −40 %, batch 32→8
75 %, sequence 60→30 50 %. Each strategy here is a TFT configuration: its training-step memory
is profiled, its step time measured with all strategies alternating in one run, and — where it
changes the numbers the model computes — its accuracy measured with wave 8.11's harness
(its harness, its skill over climatology beside). Checkpointing, the memory-efficient path and
CUDA graphs compute the same function, so they inherit the accuracy of their precision; the claim is
shown on the measuring device as max |Δ| of outputs and gradients (same_function_checks).

The "+ CUDA graph" strategies run the whole step as one captured graph (foxlib.memory.cuda_graph):
the same arithmetic without a launch per kernel. CUDA only (skipped on the CPU, and said so), and
not recommended yet: wave 8.13 validates the recommendation with eager training steps.

Decisions read a typed record (Measurement812: raw bytes, seconds, and each ratio to fp32 with its
bootstrap interval over the alternating rounds, foxlib.harness.timing.ratio_interval), never the table's
rounded columns; a difference inside the intervals is a tie, settled by memory.
"""
from __future__ import annotations

import dataclasses
from functools import partial
import gc
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from foxlib.memory import tolerances as prediction

from foxlib.core import seed_claims
from foxlib.core.budgets import Check
from foxlib.core.config import MB
from foxlib.core.figures import Figure, key, slug
from foxlib.memory.devices import describe, environment, resolve_device
from foxlib.harness.measure_step import measure_model
from foxlib.memory.cuda_graph import GraphedStep, profile_graphed_step
from foxlib.models import MODELS
from foxlib.models.tft import device_loss
from foxlib.core.progress import progress
from foxlib.harness.timelines import ALL_CASES, measure_timelines
from foxlib.harness.recipe import StepRecipe, build_step, timed_step
from foxlib.harness.timing import time_alternating
from foxlib.harness.equivalence import reference_run, same_function
from foxlib.harness.training import HARNESS, accuracy_config, check_target, skill_summary, train_tft
from foxlib.harness.timing import CONFIDENCE, RESAMPLES, SEED, RatioInterval, Timing, ratio_interval

FLOOR_BYTES_PER_PARAMETER = 16  # fp32 weights + gradients + two Adam moments


@dataclass(frozen=True)
class Strategy:
    name: str
    precision: str = "fp32"
    overrides: dict[str, Any] = field(default_factory=dict)
    seed_guess: str | None = None  # key of seed.STRATEGY_GUESSES
    changes_numerics: bool = False  # computes another function than the baseline of its precision
    cuda_graph: bool = False  # the whole step captured in one CUDA graph (CUDA only, never recommended yet)


STRATEGIES = {s.name: s for s in (
    Strategy("fp32 (baseline)", changes_numerics=True),
    Strategy("fp16", "fp16", seed_guess="fp16", changes_numerics=True),
    Strategy("bf16", "bf16", changes_numerics=True),
    Strategy("checkpoint VSNs", overrides={"checkpointing": "vsn"}, seed_guess="checkpointing"),
    Strategy("checkpoint blocks", overrides={"checkpointing": "blocks"}, seed_guess="checkpointing"),
    Strategy("checkpoint all", overrides={"checkpointing": "all"}, seed_guess="checkpointing"),
    Strategy("memory-efficient path", overrides={"memory_efficient": True}),
    # fractions of the baseline: the seed's 32 -> 8 and 60 -> 30
    Strategy("batch ÷4", overrides={"batch_size": 0.25}, seed_guess="batch_8", changes_numerics=True),
    Strategy("sequence ÷2", overrides={"encoder_length": 0.5}, seed_guess="sequence_30", changes_numerics=True),
    Strategy("efficient + bf16", "bf16", {"memory_efficient": True}),
    Strategy("efficient + checkpoint blocks", overrides={"memory_efficient": True, "checkpointing": "blocks"}),
    Strategy("efficient + checkpoint blocks + bf16", "bf16", {"memory_efficient": True, "checkpointing": "blocks"}),
    Strategy("efficient + checkpoint blocks + fp16", "fp16", {"memory_efficient": True, "checkpointing": "blocks"}),
    # "variables": blocks, with the encoder/decoder VSNs checkpointed per chunk of vsn_chunk variables
    Strategy("checkpoint variables", overrides={"checkpointing": "variables"}, seed_guess="checkpointing"),
    Strategy("efficient + checkpoint variables", overrides={"memory_efficient": True, "checkpointing": "variables"}),
    Strategy("efficient + checkpoint variables + bf16", "bf16", {"memory_efficient": True, "checkpointing": "variables"}),
    # "vsn_variables": only the encoder/decoder VSNs (the bulk of the activations), per chunk; the rest as is
    Strategy("efficient + checkpoint VSN variables", overrides={"memory_efficient": True, "checkpointing": "vsn_variables"}),
    Strategy("efficient + checkpoint VSN variables (8 per chunk)",
             overrides={"memory_efficient": True, "checkpointing": "vsn_variables", "vsn_chunk": 8}),
    # the same steps without a kernel launch each: one CUDA graph per step
    Strategy("CUDA graph", cuda_graph=True),
    Strategy("memory-efficient path + CUDA graph", overrides={"memory_efficient": True}, cuda_graph=True),
    Strategy("efficient + checkpoint VSN variables + CUDA graph",
             overrides={"memory_efficient": True, "checkpointing": "vsn_variables"}, cuda_graph=True),
    Strategy("efficient + checkpoint VSN variables (8 per chunk) + CUDA graph",
             overrides={"memory_efficient": True, "checkpointing": "vsn_variables", "vsn_chunk": 8}, cuda_graph=True),
)}
GRAPH_SKIPPED = "skipped: a CUDA graph needs a CUDA device"
NOT_RECOMMENDED = "CUDA-graph strategies are shown, not recommended: wave 8.13 validates eager training steps"
BASELINE = "fp32 (baseline)"


def select(names: str) -> list[Strategy]:
    if names == "all":
        return list(STRATEGIES.values())
    chosen = [n.strip() for n in names.split(";") if n.strip()]
    bad = [n for n in chosen if n not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategy {bad}; valid strategies: {'; '.join(STRATEGIES)}")
    if BASELINE not in chosen:
        chosen.insert(0, BASELINE)
    return [STRATEGIES[n] for n in chosen]


def runnable(chosen: list[Strategy], device: torch.device) -> tuple[list[Strategy], dict[str, str]]:
    """The strategies this device can run, and the others with why not (CUDA graphs on a CPU)."""
    if device.type == "cuda":
        return chosen, {}
    return [s for s in chosen if not s.cuda_graph], {s.name: GRAPH_SKIPPED for s in chosen if s.cuda_graph}


def resolve_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A float for batch_size or encoder_length is a fraction of the base config's value."""
    return {k: max(1, round(base[k] * v)) if isinstance(v, float) and k in ("batch_size", "encoder_length") else v
            for k, v in overrides.items()}


def configure(base, overrides: dict[str, Any]):
    """`base` (a TFTConfig) with `overrides` resolved against it."""
    return dataclasses.replace(base, **resolve_overrides(dataclasses.asdict(base), overrides))


def _accuracy_key(s: Strategy) -> tuple[str, tuple]:
    """Strategies that compute the same function share accuracy runs: key = precision + numeric overrides."""
    numeric = tuple(sorted((k, v) for k, v in s.overrides.items() if k in ("batch_size", "encoder_length")))
    return s.precision, numeric


def measure(*, preset: str = "seed", batch_size: int = 32, encoder_length: int = 60, strategies: str = "all",
            device: str = "auto", seed: int = 0, timing_repeats: int = 10, timing_warmup: int = 2,
            accuracy_preset: str = "auto", accuracy_seeds: int = 2, accuracy_steps: int = HARNESS["max_steps"],
            accuracy_eval_every: int = HARNESS["eval_every"], accuracy_patience: int = HARNESS["patience"],
            accuracy_val_windows: int = HARNESS["val_windows"], accuracy_target: str = HARNESS["target"],
            accuracy_batch_size: int = HARNESS["batch_size"], accuracy_lr: float = HARNESS["lr"],
            accuracy_min_skill_pct: float = 100 * HARNESS["min_skill"], timelines: bool = True,
            timeline_dir: str = "") -> dict[str, Any]:
    dev = resolve_device(device)
    check_target(accuracy_target)
    chosen, skipped = runnable(select(strategies), dev)
    tft = MODELS["tft"]
    base = tft.config(preset, batch_size=batch_size, encoder_length=encoder_length)
    configs = {s.name: configure(base, s.overrides) for s in chosen}
    out: dict[str, Any] = {"device": describe(dev), "environment": environment(),
                           "base_config": dataclasses.asdict(base),
                           "strategies": {s.name: {"precision": s.precision, "overrides": s.overrides,
                                                   "seed_guess": s.seed_guess, "changes_numerics": s.changes_numerics,
                                                   "cuda_graph": s.cuda_graph}
                                          for s in chosen},
                           "skipped": skipped}
    with progress(len(chosen), "wave 8.12 memory") as bar:
        out["memory"] = {}
        for s in chosen:
            bar.describe(f"profiling {s.name} on {dev}")
            if s.cuda_graph:
                out["memory"][s.name] = _profile_graphed(configs[s.name], dev, s.precision, seed)
                out.setdefault("predicted", {})[s.name] = {"error": "not predicted: the step runs as one CUDA graph"}
            else:
                r = measure_model("tft", configs[s.name], dev, s.precision, seed)
                out["memory"][s.name] = r["profile"]
                out.setdefault("predicted", {})[s.name] = r["predicted"]
            bar.advance()
    steps = {s.name: _graphed_step(configs[s.name], dev, s.precision, seed) if s.cuda_graph
             else timed_step(tft, configs[s.name], dev, s.precision, seed) for s in chosen}
    timings = time_alternating(steps, repeats=timing_repeats, warmup=timing_warmup, device=dev)
    out["timing"] = {n: t.to_dict() for n, t in timings.items()}
    del steps
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    acc_preset = accuracy_preset if accuracy_preset != "auto" else ("seed" if dev.type == "cuda" else "small")
    out["accuracy_preset"] = acc_preset
    out.update(accuracy_runs(chosen, accuracy_config(acc_preset, batch_size=accuracy_batch_size, lr=accuracy_lr),
                             accuracy_seeds, dev, max_steps=accuracy_steps, eval_every=accuracy_eval_every,
                             patience=accuracy_patience, val_windows=accuracy_val_windows, target=accuracy_target,
                             min_skill=accuracy_min_skill_pct / 100))
    out["same_function"] = same_function_checks(chosen, base, dev, seed)
    if timelines:
        out["timelines"] = measure_timeline_cases(base, dev, timeline_dir, seed)
    return out


TIMELINE_CASES = tuple(c for c in ALL_CASES if not c.cuda_graph)
"""Live memory through one step: plain, checkpointed (VSNs, blocks, all), memory-efficient. The graphed
step is left out: recording the allocator's history while capturing a graph broke the backward on the H200
(torch 2.11)."""


def measure_timeline_cases(base, dev: torch.device, timeline_dir: str, seed: int) -> dict[str, Any]:
    """The seed TFT's live-memory timelines (foxlib.harness.timelines) as plain data; snapshot files
    in `timeline_dir` (a temporary folder if empty)."""
    import tempfile
    runs = measure_timelines(base, dev, timeline_dir or tempfile.mkdtemp(prefix="foxlib-timelines-"),
                             TIMELINE_CASES, seed=seed, max_points=1500, viewer_html=False)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return {n: r.to_dict() for n, r in runs.items()}


# ----------------------------------------------------------------------------- accuracy runs

def accuracy_runs(chosen: list[Strategy], acc_base, seeds: int, device: torch.device, **harness) -> dict[str, Any]:
    """One set of accuracy runs (foxlib.harness.training's harness, skill fields included) per distinct
    function the chosen strategies compute; the strategies that compute the same function share
    them (accuracy_source). Fractions of batch and sequence apply to the accuracy config alike."""
    runs: dict[str, list[dict]] = {}
    keys: dict[tuple, Strategy] = {}  # one set of runs per distinct function computed
    for s in sorted(chosen, key=lambda s: not s.changes_numerics):
        keys.setdefault(_accuracy_key(s), s)
    with progress(len(keys) * seeds, "wave 8.12 accuracy") as bar:
        for key, s in keys.items():
            cfg = configure(acc_base, dict(key[1]))
            runs[s.name] = []
            for sd in range(seeds):
                bar.describe(f"training {s.name} seed {sd}")
                r = train_tft(cfg, precision=s.precision, seed=sd, device=device, show_progress=False, **harness)
                runs[s.name].append(r.to_dict())
                bar.advance()
    first = next(iter(runs.values()))[0]
    return {"accuracy_runs": runs, "accuracy_source": {s.name: keys[_accuracy_key(s)].name for s in chosen},
            "accuracy_harness": {**first["harness"], "tft_config": dataclasses.asdict(acc_base)}}


def accuracy_skill(m: dict[str, Any]) -> pd.DataFrame:
    """Per set of accuracy runs (one per distinct function): climatology's and the model's validation
    quantile loss, the skill score per seed, 10-90 coverage, seeds with skill. An accuracy impact means
    something only where the fp32 baseline's runs have skill."""
    rows = []
    for name, rs in m["accuracy_runs"].items():
        r = skill_summary(rs)[0]
        rows.append({"accuracy runs of": name, "climatology QL": round(r["naive_quantile_loss"], 4),
                     "model QL (mean)": round(r["quantile_loss"], 4), "skill score (%, mean)": round(100 * r["skill_score"], 2),
                     "skill score per seed (%)": ", ".join(f"{100 * v:+.2f}" for v in r["skill_scores"]),
                     "10-90 coverage (model)": round(r["coverage_10_90"], 3),
                     "10-90 coverage (climatology)": round(r["naive_coverage_10_90"], 3),
                     f"seeds with skill ≥ {100 * r['min_skill']:g} %": f"{r['with_skill']} of {len(r['seeds'])}"})
    return pd.DataFrame(rows)


def accuracy_powered(m: dict[str, Any]) -> bool:
    """The accuracy impacts have power: every run of the fp32 baseline beats climatology by min_skill."""
    return all(r["has_skill"] for r in m["accuracy_runs"][BASELINE])


# ----------------------------------------------------------------------------- same function, numerically

def same_function_checks(chosen: list[Strategy], base, device: torch.device, seed: int = 0) -> dict[str, dict[str, Any]]:
    """For every strategy claimed to compute the same function as another (changes_numerics False:
    checkpointing, the memory-efficient path, a CUDA graph), foxlib.harness.equivalence.same_function on this
    device: its outputs and gradients against the plain step of its precision from the same weights
    and batch, dropout off, as max |Δ| (absolute and relative). The report shows these numbers where it
    says "same function". fp16 CUDA-graph strategies are not captured (GraphedStep refuses fp16)."""
    out: dict[str, dict[str, Any]] = {}
    references: dict[str, dict[str, Any]] = {}  # the plain step, once per precision
    for s in chosen:
        if s.changes_numerics:
            continue
        try:
            if s.precision not in references:
                references[s.precision] = reference_run(base, precision=s.precision, device=device, seed=seed)
            e = same_function(base, configure(base, s.overrides), precision=s.precision, device=device, seed=seed,
                              cuda_graph=s.cuda_graph, name=s.name, reference=references[s.precision])
            out[s.name] = e.to_dict()
        except (ValueError, RuntimeError) as exc:  # a variant that cannot run here: say why, never hide it
            out[s.name] = {"variant": s.name, "error": str(exc)}
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    references.clear()
    return out


def same_function_table(m: dict[str, Any]) -> pd.DataFrame:
    """The same-function figures of same_function_checks, one row per strategy claimed equal."""
    rows = []
    for name, e in m.get("same_function", {}).items():
        if "error" in e:
            rows.append({"strategy": name, "error": e["error"]})
            continue
        rows.append({"strategy": name, "precision": e["precision"], "device": e["device"],
                     "outputs max |Δ|": f"{e['output_max_abs_diff']:.2e}", "outputs max |Δ| / max |ref|": f"{e['output_rel_diff']:.2e}",
                     "gradients max |Δ|": f"{e['grad_max_abs_diff']:.2e}", "gradients max |Δ| / max |ref|": f"{e['grad_rel_diff']:.2e}",
                     "worst gradient": e["worst_parameter"], "tolerance (relative)": f"{e['tolerance_rel']:.0e}",
                     "same function": e["same"]})
    return pd.DataFrame(rows)


def _graph_parts(cfg, device: torch.device, precision: str, seed: int):
    """The recipe's TFT, batch and Adam (capturable) and the host-copy-free loss: what a CUDA graph captures."""
    step = build_step(StepRecipe("tft", cfg, precision, seed), device, capturable=True)
    return step.model, step.batch, device_loss(cfg, device), step.optimizer


def _profile_graphed(cfg, device: torch.device, precision: str, seed: int) -> dict[str, Any]:
    profile = profile_graphed_step(*_graph_parts(cfg, device, precision, seed), precision)
    gc.collect()
    torch.cuda.empty_cache()
    return profile


def _graphed_step(cfg, device: torch.device, precision: str, seed: int) -> GraphedStep:
    return GraphedStep(*_graph_parts(cfg, device, precision, seed), precision).capture()


# ----------------------------------------------------------------------------- the record

SCHEMA_VERSION = 1  # of Measurement812.to_dict(); from_dict refuses another


@dataclass(frozen=True)
class StrategyResult:
    """One strategy as measured: raw bytes and seconds, its ratios to fp32 with their intervals, its accuracy."""
    name: str
    precision: str
    overrides: dict[str, Any]  # as the strategy states them (fractions of the base config stay fractions)
    batch_size: int  # resolved against the base config
    peak_bytes: int  # the step's peak of live tensor bytes
    activation_bytes: int | None  # saved for backward (None: a CUDA graph's step is not split by category)
    step_samples_s: tuple[float, ...]  # one step time per alternating round, in round order
    step_ratio: RatioInterval  # step time over fp32's, paired by round
    window_ratio: RatioInterval  # time per training window over fp32's (step ratio × fp32's batch / this batch)
    accuracy_source: str  # the strategy whose accuracy runs stand for this one (itself, or the same function)
    quantile_loss: float  # mean validation quantile loss of the accuracy source's runs
    accuracy_impact_pct: float  # against fp32's mean, positive = worse
    seed_guess: str | None = None
    changes_numerics: bool = False
    cuda_graph: bool = False

    @property
    def timing(self) -> Timing:
        return Timing(self.name, self.step_samples_s)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["step_samples_s"] = list(self.step_samples_s)
        d["step_ratio"], d["window_ratio"] = self.step_ratio.to_dict(), self.window_ratio.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StrategyResult":
        return cls(**{**d, "step_samples_s": tuple(d["step_samples_s"]),
                      "step_ratio": RatioInterval.from_dict(d["step_ratio"]),
                      "window_ratio": RatioInterval.from_dict(d["window_ratio"])})


@dataclass(frozen=True)
class Measurement812:
    """Wave 8.12's measurement as the decisions read it: one StrategyResult per strategy measured.
    Built from the raw measurement dict (`from_measurement`, any measurement.json written so far) or
    read back from its own JSON (`from_dict`). Intervals are computed once, here, and read by the
    recommendation, the table and the chart alike."""
    strategies: tuple[StrategyResult, ...]
    base_config: dict[str, Any]
    device: dict[str, Any]
    n_parameters: int  # of the fp32 baseline's model
    baseline_losses: tuple[float, ...]  # fp32's accuracy runs (quantile loss per seed), for its own spread
    skipped: dict[str, str] = field(default_factory=dict)
    baseline: str = BASELINE
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    bootstrap_seed: int = SEED
    schema_version: int = SCHEMA_VERSION

    def __getitem__(self, name: str) -> StrategyResult:
        for s in self.strategies:
            if s.name == name:
                return s
        raise KeyError(f"no strategy {name!r}; measured: {'; '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.strategies]

    @property
    def floor_bytes(self) -> int:
        """fp32 weights, gradients and two Adam moments: what no strategy that keeps Adam in fp32 goes under."""
        return FLOOR_BYTES_PER_PARAMETER * self.n_parameters

    @classmethod
    def from_measurement(cls, m: dict[str, Any], confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                         seed: int = SEED) -> "Measurement812":
        """From measure()'s dict (as measurement.json holds it): the ratios' intervals bootstrapped here."""
        if BASELINE not in m["strategies"]:
            raise ValueError(f"a wave 8.12 measurement needs the {BASELINE!r} strategy; it has: "
                             f"{'; '.join(m['strategies'])}")
        base_bs = m["base_config"]["batch_size"]
        timings = {n: Timing.from_dict({"name": n, **t}) for n, t in m["timing"].items()}
        base_loss_runs = _quantile_losses(m, BASELINE)
        base_loss = sum(base_loss_runs) / len(base_loss_runs)
        out = []
        for name, info in m["strategies"].items():
            bs = resolve_overrides(m["base_config"], info["overrides"]).get("batch_size", base_bs)
            step = ratio_interval(timings, name, BASELINE, confidence, resamples, seed)
            source = m["accuracy_source"][name]
            losses = _quantile_losses(m, source)
            loss = sum(losses) / len(losses)
            out.append(StrategyResult(
                name=name, precision=info["precision"], overrides=dict(info["overrides"]), batch_size=bs,
                peak_bytes=int(m["memory"][name]["peak"]), activation_bytes=_int_or_none(m["memory"][name]["activations"]),
                step_samples_s=timings[name].samples, step_ratio=step, window_ratio=step.scaled(base_bs / bs),
                accuracy_source=source, quantile_loss=loss, accuracy_impact_pct=100 * (loss - base_loss) / base_loss,
                seed_guess=info.get("seed_guess"), changes_numerics=bool(info.get("changes_numerics")),
                cuda_graph=bool(info.get("cuda_graph"))))
        return cls(tuple(out), dict(m["base_config"]), dict(m["device"]),
                   int(m["memory"][BASELINE]["n_parameters"]), tuple(base_loss_runs), dict(m.get("skipped", {})),
                   BASELINE, confidence, resamples, seed)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["strategies"] = [s.to_dict() for s in self.strategies]
        d["baseline_losses"] = list(self.baseline_losses)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement812":
        if d.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"a wave 8.12 record of schema version {d.get('schema_version')!r}; this foxlib reads "
                             f"version {SCHEMA_VERSION} (or a raw measurement.json: Measurement812.from_measurement)")
        return cls(**{**d, "strategies": tuple(StrategyResult.from_dict(s) for s in d["strategies"]),
                      "baseline_losses": tuple(d["baseline_losses"])})


def _int_or_none(x) -> int | None:
    return None if x is None else int(x)


def _quantile_losses(m: dict[str, Any], source: str) -> list[float]:
    """Validation quantile loss of each accuracy run of `source` (one per training seed)."""
    return [float(r["metrics"]["quantile_loss"]) for r in m["accuracy_runs"][source]]


def record(m: "Measurement812 | dict[str, Any]") -> Measurement812:
    """The typed record of a measurement: a Measurement812 as is, its to_dict() read back, or a raw
    measurement dict (measure()'s, or a committed measurement.json) built into one."""
    if isinstance(m, Measurement812):
        return m
    if isinstance(m.get("strategies"), list):
        return Measurement812.from_dict(m)
    return Measurement812.from_measurement(m)


# ----------------------------------------------------------------------------- decisions (raw values only)

def _kind(rec: Measurement812, cuda_graph: bool | None) -> list[StrategyResult]:
    return [s for s in rec.strategies if cuda_graph is None or s.cuda_graph == cuda_graph]


def pareto(m) -> list[str]:
    """Strategies no other strategy beats on both peak bytes and median time per training window
    (accuracy aside: the front shows what memory costs in time)."""
    rec = record(m)
    front = []
    for s in rec.strategies:
        p, t = s.peak_bytes, s.window_ratio.median
        if not any(o.peak_bytes <= p and o.window_ratio.median <= t and (o.peak_bytes < p or o.window_ratio.median < t)
                   for o in rec.strategies):
            front.append(s.name)
    return front


def slowdown_check(s: StrategyResult, max_slowdown: float, label: str = "recommended") -> Check:
    """Slowdown per training window against fp32 under `max_slowdown`: passes only when the interval's
    upper end is under it (a 1.9x [1.7, 2.1] strategy is not shown to be under 2x)."""
    iv = s.window_ratio
    return Check(f"{label} ({s.name}) slowdown per training window against fp32 "
                 f"(upper end of the {100 * iv.confidence:.0f} % interval)", iv.high, max_slowdown, "x",
                 iv.under(max_slowdown), note=f"{iv} of fp32 per window")


def interval_text(s: StrategyResult) -> str:
    """E.g. "0.64x [0.58, 0.71] of fp32 per window"."""
    return f"{s.window_ratio} of fp32 per window"


def _describe(s: StrategyResult, rec: Measurement812) -> dict[str, Any]:
    return {"strategy": s.name, "precision": s.precision,
            "tft_overrides": resolve_overrides(rec.base_config, s.overrides), "peak_bytes": s.peak_bytes,
            "step_time_ratio": s.step_ratio.median, "step_time_interval": s.step_ratio.to_dict(),
            "time_per_window_ratio": s.window_ratio.median, "time_per_window_interval": s.window_ratio.to_dict(),
            "interval": interval_text(s), "accuracy_impact_pct": s.accuracy_impact_pct,
            "floor_bytes": rec.floor_bytes, "peak_over_floor": s.peak_bytes / rec.floor_bytes}


def recommend(m, budgets: dict[str, dict[str, float]], cuda_graph: bool = False) -> dict[str, Any]:
    """The configuration to ship. Among the strategies whose peak is within the budget, whose accuracy
    is within tolerance and whose slowdown check passes (the interval's upper end under max_slowdown),
    the fastest per training window (a smaller batch takes shorter steps but needs more of them); when
    other candidates' intervals overlap the fastest's, that is a tie, and the lightest of the tied wins.
    Among eager strategies (the recommendation); cuda_graph=True: the same among the CUDA-graph ones."""
    rec = record(m)
    kind = "CUDA-graph strategy" if cuda_graph else "strategy"
    limit_mb = budgets["tft"]["peak_training_mb"]
    tolerance = budgets["accuracy"]["max_degradation_pct"]
    max_slowdown = budgets["speed"]["max_slowdown"]
    gates = (f"a peak under {limit_mb:,.0f} MB, accuracy within {tolerance} % and a slowdown per training window "
             f"under {max_slowdown:g}x (upper end of the {100 * rec.confidence:.0f} % interval)")
    ok = [s for s in _kind(rec, cuda_graph) if s.peak_bytes <= limit_mb * MB
          and s.accuracy_impact_pct <= tolerance and s.window_ratio.under(max_slowdown)]
    if not ok:
        return {"strategy": None, "reason": f"no {kind} has {gates}"}
    fastest = min(ok, key=lambda s: (s.window_ratio.median, s.peak_bytes, s.name))
    tied = [s for s in ok if s is not fastest and s.window_ratio.tie(fastest.window_ratio)]
    best = min([fastest, *tied], key=lambda s: (s.peak_bytes, s.window_ratio.median, s.name))
    plural = "CUDA-graph strategies" if cuda_graph else "strategies"
    if not tied:
        reason = f"fastest per training window of {len(ok)} {plural} with {gates}"
    else:
        others = ", ".join(f"{s.name} {s.window_ratio}" for s in tied)
        lightest = ("the fastest is also the lightest of them" if best is fastest else
                    f"{best.name} ({best.peak_bytes / MB:,.1f} MB against the fastest's "
                    f"{fastest.peak_bytes / MB:,.1f} MB)")
        reason = (f"a tie settled by memory: of {len(ok)} {plural} with {gates}, the fastest per training window, "
                  f"{fastest.name} {fastest.window_ratio}, is within the intervals of {others}; the lightest wins: "
                  f"{lightest}")
    if not cuda_graph and any(s.cuda_graph for s in rec.strategies):
        reason += f" ({NOT_RECOMMENDED})"
    return {**_describe(best, rec), "fastest": fastest.name, "tied_with": [s.name for s in tied],
            "settled_by_memory": bool(tied), "reason": reason}


def figures(r: dict[str, Any]) -> str:
    """A recommend() or lightest_at_full_speed() result's numbers, as the report states them."""
    return (f"peak {r['peak_bytes'] / MB:,.1f} MB ({r['peak_over_floor']:.2f} × floor), time "
            f"{r['interval']}, accuracy impact {r['accuracy_impact_pct']:+.2f} %")


def recommendation_text(r: dict[str, Any]) -> str:
    """A recommend() result as the report states it (Markdown): the figures with the interval, and why,
    saying when the decision was a tie settled by memory."""
    if not r["strategy"]:
        return f"**No recommendation:** {r['reason']}."
    step = RatioInterval.from_dict(r["step_time_interval"])
    why = r["reason"][0].upper() + r["reason"][1:]
    return (f"**{r['strategy']}** — precision `{r['precision']}`, TFT overrides `{r['tft_overrides']}`: peak "
            f"**{r['peak_bytes'] / MB:,.1f} MB** ({r['peak_over_floor']:.2f} × the 16 B/param floor of "
            f"{r['floor_bytes'] / MB:,.1f} MB), time **{r['interval']}** (step time {step} of "
            f"fp32's), accuracy impact **{r['accuracy_impact_pct']:+.2f} %**. {why}.")


def lightest_at_full_speed(m, budgets: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """The lightest strategy shown no slower than plain fp32 per training window (its interval's upper
    end at most 1, as fp32's own [1, 1] is) with accuracy in tolerance: beside the recommendation (the
    fastest under the budget), the other end of the Pareto front that the issue's targets ask about.
    None if no strategy qualifies."""
    rec = record(m)
    ok = [s for s in rec.strategies if s.window_ratio.high <= 1.0
          and s.accuracy_impact_pct <= budgets["accuracy"]["max_degradation_pct"]]
    if not ok:
        return None
    return _describe(min(ok, key=lambda s: (s.peak_bytes, s.window_ratio.median, s.name)), rec)


def checks(m, budgets: dict[str, dict[str, float]]) -> list[Check]:
    rec_ = record(m)
    rec = recommend(rec_, budgets)
    if rec["strategy"] is None:
        lightest = min(rec_.strategies, key=lambda s: s.peak_bytes)
        return [Check.at_most("a strategy meets the peak budget, the accuracy tolerance and the slowdown limit", 1, 0,
                              "strategies", note=f"{rec['reason']}; lowest peak: {lightest.name} "
                                                 f"{lightest.peak_bytes / MB:,.1f} MB, {interval_text(lightest)}")]
    best = rec_[rec["strategy"]]
    return [
        Check.at_most(f"recommended ({best.name}) peak training memory", best.peak_bytes,
                      budgets["tft"]["peak_training_mb"] * MB, "bytes"),
        slowdown_check(best, budgets["speed"]["max_slowdown"]),
    ]


def targets(m, budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """How far the recommendation is from the issue's targets (benchmarks, not checks)."""
    rec = recommend(m, budgets)
    if rec["strategy"] is None:
        return pd.DataFrame()
    iv = RatioInterval.from_dict(rec["time_per_window_interval"])
    return pd.DataFrame([
        {"target": "peak ≤ 1.6 × the 16 B/param floor", "floor (MB)": _mb(rec["floor_bytes"]),
         "target (MB)": _mb(1.6 * rec["floor_bytes"]), "measured": f"{rec['peak_bytes'] / MB:,.1f} MB "
         f"({rec['peak_over_floor']:.2f} × floor)", "met": rec["peak_over_floor"] <= 1.6},
        {"target": "accuracy within 1 % of fp32", "floor (MB)": None, "target (MB)": None,
         "measured": f"{rec['accuracy_impact_pct']:+.2f} %", "met": rec["accuracy_impact_pct"] <= 1.0},
        {"target": "step no slower than plain fp32 (interval's upper end ≤ 1)", "floor (MB)": None, "target (MB)": None,
         "measured": rec["interval"], "met": iv.high <= 1.0},
    ])


# ----------------------------------------------------------------------------- display (formats the record)

def _mb(x):
    return None if x is None else round(x / MB, 1)


def table(m) -> pd.DataFrame:
    """One row per strategy: memory, reduction, speed with its interval, accuracy impact, the seed's guess
    beside. Display only: every decision reads the record, never these rounded columns."""
    rec = record(m)
    base = rec[rec.baseline]
    losses = rec.baseline_losses
    spread = 100 * (max(losses) - min(losses)) / (sum(losses) / len(losses))
    pct = f"{100 * rec.confidence:.0f} %"
    rows = []
    for s in rec.strategies:
        guess = seed_claims.STRATEGY_GUESSES.get(s.seed_guess or "", {})
        t = s.timing
        rows.append({
            "strategy": s.name,
            "peak (MB)": _mb(s.peak_bytes),
            "peak reduction (%)": round(100 * (1 - s.peak_bytes / base.peak_bytes), 1),
            "seed's guess: reduction (%)": guess.get("memory_reduction_pct"),
            "activations (MB)": _mb(s.activation_bytes),
            "step time (ms, median)": round(1000 * t.median_s, 1),
            "step spread (IQR % of median)": round(100 * t.iqr_s / t.median_s, 1),
            "step time ratio": round(s.step_ratio.median, 3),
            "time per window ratio": round(s.window_ratio.median, 3),
            f"time per window, {pct} interval": f"[{s.window_ratio.low:.2f}, {s.window_ratio.high:.2f}]",
            "seed's guess: speed": guess.get("speed"),
            "accuracy impact (%)": round(s.accuracy_impact_pct, 2),
            "accuracy measured by": "own runs" if s.accuracy_source == s.name else f"= {s.accuracy_source} (same function)",
            "seed's guess: accuracy": guess.get("accuracy"),
            "fp32 spread (%)": round(spread, 2),
        })
    return pd.DataFrame(rows)


def one_warmup_fp16(m: dict[str, Any]) -> list[str]:
    """fp16 strategies measured before profile_step warmed up until the GradScaler took a step
    (prediction.one_warmup_fp16): their peaks may understate a steady-state step by Adam's state."""
    return [name for name, p in m["memory"].items() if prediction.one_warmup_fp16(p)]


def one_warmup_caveat(m: dict[str, Any]) -> str | None:
    """The report's caveat for one_warmup_fp16's strategies, or None."""
    stale = one_warmup_fp16(m)
    if not stale:
        return None
    return (f"**Caveat:** {', '.join(stale)} were measured with one warm-up step; in fp16 the GradScaler may skip "
            "it, and then Adam's state is made inside the measured step: their peaks can be understated by up to "
            f"the state ({m['memory'][stale[0]]['optimizer_state'] / MB:,.1f} MB). The prediction table below says "
            "which. `profile_step` now warms up until a step is taken.")




def named_figures(m: Measurement812 | dict[str, Any]) -> list[Figure]:
    """The figures this report shows that other pages show too (foxlib.core.figures), raw: each strategy's
    model peak and time per training window against fp32 (with its interval). The plain precisions are
    keyed as 8.10 and 8.11 key them, so that the consistency check compares them across pages."""
    preset = m.get("measure_parameters", {}).get("preset", "seed") if isinstance(m, dict) else "seed"
    r = record(m)
    cfg = r.base_config
    out = []
    for s in r.strategies:
        plain = s.name in (BASELINE, "fp16", "bf16")
        k = partial(key, "tft", preset, cfg["batch_size"], cfg["encoder_length"], s.precision,
                    variant=None if plain else slug(s.name))
        out.append(Figure(k(quantity="model_peak"), s.peak_bytes, "bytes"))
        if s.name != BASELINE:
            w = s.window_ratio
            out.append(Figure(k(quantity="time_per_window_ratio"), w.median, "ratio", low=w.low, high=w.high))
        same = (m.get("same_function", {}) if isinstance(m, dict) else {}).get(s.name)
        if same and "error" not in same:
            out.append(Figure(k(quantity="grad_rel_diff"), same["grad_rel_diff"], "ratio"))
    return out
