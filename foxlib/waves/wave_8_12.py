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
"""
from __future__ import annotations

import dataclasses
import gc
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from foxlib import prediction, seed as seed_figures
from foxlib.budgets import Check
from foxlib.config import MB
from foxlib.devices import describe, environment, resolve_device
from foxlib.measure import measure_model
from foxlib.memory.cuda_graph import GraphedStep, profile_graphed_step
from foxlib.models import MODELS
from foxlib.models.tft import device_loss
from foxlib.progress import progress
from foxlib.timing import time_alternating
from foxlib.equivalence import reference_run, same_function
from foxlib.training import HARNESS, accuracy_config, check_target, skill_summary, train_tft
from foxlib.waves.wave_8_11 import training_step

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
            accuracy_min_skill_pct: float = 100 * HARNESS["min_skill"]) -> dict[str, Any]:
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
             else training_step(tft, configs[s.name], dev, s.precision, seed) for s in chosen}
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
    return out


# ----------------------------------------------------------------------------- accuracy runs

def accuracy_runs(chosen: list[Strategy], acc_base, seeds: int, device: torch.device, **harness) -> dict[str, Any]:
    """One set of accuracy runs (foxlib.training's harness, skill fields included) per distinct
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
    checkpointing, the memory-efficient path, a CUDA graph), foxlib.equivalence.same_function on this
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


def _graph_parts(cfg, device: torch.device, seed: int):
    """The TFT, a batch, a capturable Adam and the host-copy-free loss: what a CUDA graph captures."""
    torch.manual_seed(seed)
    model = MODELS["tft"].build(cfg).to(device)
    batch = MODELS["tft"].example_batch(cfg, device=device, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, capturable=True)
    return model, batch, device_loss(cfg, device), optimizer


def _profile_graphed(cfg, device: torch.device, precision: str, seed: int) -> dict[str, Any]:
    profile = profile_graphed_step(*_graph_parts(cfg, device, seed), precision)
    gc.collect()
    torch.cuda.empty_cache()
    return profile


def _graphed_step(cfg, device: torch.device, precision: str, seed: int) -> GraphedStep:
    return GraphedStep(*_graph_parts(cfg, device, seed), precision).capture()


# ----------------------------------------------------------------------------- analysis

def _mb(x):
    return None if x is None else round(x / MB, 1)


def _mean_loss(runs: list[dict]) -> float:
    return sum(r["metrics"]["quantile_loss"] for r in runs) / len(runs)


def table(m: dict[str, Any]) -> pd.DataFrame:
    """One row per strategy: memory, reduction, speed, accuracy impact, the seed's guess beside."""
    base_peak = m["memory"][BASELINE]["peak"]
    base_time = m["timing"][BASELINE]["median_s"]
    base_loss = _mean_loss(m["accuracy_runs"][BASELINE])
    base_runs = [r["metrics"]["quantile_loss"] for r in m["accuracy_runs"][BASELINE]]
    spread = 100 * (max(base_runs) - min(base_runs)) / base_loss
    base_bs = m["base_config"]["batch_size"]
    rows = []
    for name, info in m["strategies"].items():
        prof, t = m["memory"][name], m["timing"][name]
        source = m["accuracy_source"][name]
        loss = _mean_loss(m["accuracy_runs"][source])
        guess = seed_figures.STRATEGY_GUESSES.get(info["seed_guess"] or "", {})
        bs = resolve_overrides(m["base_config"], info["overrides"]).get("batch_size", base_bs)
        rows.append({
            "strategy": name,
            "peak (MB)": _mb(prof["peak"]),
            "peak reduction (%)": round(100 * (1 - prof["peak"] / base_peak), 1),
            "seed's guess: reduction (%)": guess.get("memory_reduction_pct"),
            "activations (MB)": _mb(prof["activations"]),
            "step time (ms, median)": round(1000 * t["median_s"], 1),
            "step spread (IQR % of median)": round(100 * t["iqr_s"] / t["median_s"], 1),
            "step time ratio": round(t["median_s"] / base_time, 3),
            "time per window ratio": round((t["median_s"] / bs) / (base_time / base_bs), 3),
            "seed's guess: speed": guess.get("speed"),
            "accuracy impact (%)": round(100 * (loss - base_loss) / base_loss, 2),
            "accuracy measured by": "own runs" if source == name else f"= {source} (same function)",
            "seed's guess: accuracy": guess.get("accuracy"),
            "fp32 spread (%)": round(spread, 2),
        })
    return pd.DataFrame(rows)


def pareto(df: pd.DataFrame) -> list[str]:
    """Strategies no other strategy beats on both peak memory and time per training window."""
    front, t = [], "time per window ratio"
    for _, r in df.iterrows():
        dominated = ((df["peak (MB)"] <= r["peak (MB)"]) & (df[t] <= r[t])
                     & ((df["peak (MB)"] < r["peak (MB)"]) | (df[t] < r[t]))).any()
        if not dominated:
            front.append(r["strategy"])
    return front


def recommend(m: dict[str, Any], budgets: dict[str, dict[str, float]], cuda_graph: bool = False) -> dict[str, Any]:
    """The fastest strategy under the peak budget whose accuracy stays within tolerance. Fastest per
    training window, not per step: a smaller batch takes shorter steps but needs more of them.
    Among eager strategies (the recommendation); cuda_graph=True: the same among the CUDA-graph ones."""
    df = table(m)
    df = df[[bool(m["strategies"][n].get("cuda_graph")) == cuda_graph for n in df["strategy"]]]
    kind = "CUDA-graph strategy" if cuda_graph else "strategy"
    limit_mb = budgets["tft"]["peak_training_mb"]
    tolerance = budgets["accuracy"]["max_degradation_pct"]
    ok = df[(df["peak (MB)"] <= limit_mb) & (df["accuracy impact (%)"] <= tolerance)]
    if ok.empty:
        return {"strategy": None, "reason": f"no {kind} has a peak under {limit_mb:,.0f} MB with accuracy "
                                            f"within {tolerance} %"}
    best = ok.sort_values(["time per window ratio", "peak (MB)"]).iloc[0]  # a tie in time: the lighter
    info = m["strategies"][best["strategy"]]
    floor = FLOOR_BYTES_PER_PARAMETER * m["memory"][BASELINE]["n_parameters"]
    return {"strategy": best["strategy"], "precision": info["precision"], "tft_overrides": resolve_overrides(m["base_config"], info["overrides"]),
            "peak_bytes": m["memory"][best["strategy"]]["peak"], "step_time_ratio": float(best["step time ratio"]),
            "time_per_window_ratio": float(best["time per window ratio"]),
            "accuracy_impact_pct": float(best["accuracy impact (%)"]), "floor_bytes": floor,
            "peak_over_floor": m["memory"][best["strategy"]]["peak"] / floor,
            "reason": f"fastest of {len(ok)} {'CUDA-graph ' if cuda_graph else ''}strategies under {limit_mb:,.0f} MB "
                      f"with accuracy within {tolerance} %"
                      + ("" if cuda_graph or not any(s.get("cuda_graph") for s in m["strategies"].values())
                         else f" ({NOT_RECOMMENDED})")}


def figures(r: dict[str, Any]) -> str:
    """A recommend() or lightest_at_full_speed() result's numbers, as the report states them."""
    return (f"peak {r['peak_bytes'] / MB:,.1f} MB ({r['peak_over_floor']:.2f} × floor), step time "
            f"{r['time_per_window_ratio']:.2f} × fp32 per training window, accuracy impact {r['accuracy_impact_pct']:+.2f} %")


def lightest_at_full_speed(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """The lightest strategy no slower than plain fp32 (step time ratio ≤ 1) with accuracy in tolerance:
    beside the recommendation (the fastest under the budget), the other end of the Pareto front
    that the issue's targets ask about. None if no strategy is that fast."""
    df = table(m)
    ok = df[(df["time per window ratio"] <= 1.0) & (df["accuracy impact (%)"] <= budgets["accuracy"]["max_degradation_pct"])]
    if ok.empty:
        return None
    best = ok.sort_values("peak (MB)").iloc[0]
    floor = FLOOR_BYTES_PER_PARAMETER * m["memory"][BASELINE]["n_parameters"]
    peak = m["memory"][best["strategy"]]["peak"]
    return {"strategy": best["strategy"], "peak_bytes": peak, "peak_over_floor": peak / floor,
            "step_time_ratio": float(best["step time ratio"]), "time_per_window_ratio": float(best["time per window ratio"]),
            "accuracy_impact_pct": float(best["accuracy impact (%)"])}


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


def checks(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> list[Check]:
    rec = recommend(m, budgets)
    if rec["strategy"] is None:
        best = table(m).sort_values("peak (MB)").iloc[0]
        return [Check.at_most("a strategy meets the peak budget with accuracy in tolerance", 1, 0, "strategies",
                              note=f"{rec['reason']}; lowest peak: {best['strategy']} {best['peak (MB)']:,.1f} MB")]
    return [
        Check.at_most(f"recommended ({rec['strategy']}) peak training memory", rec["peak_bytes"],
                      budgets["tft"]["peak_training_mb"] * MB, "bytes"),
        Check.at_most(f"recommended ({rec['strategy']}) slowdown per training window against fp32", rec["time_per_window_ratio"],
                      budgets["speed"]["max_slowdown"], "x"),
    ]


def targets(m: dict[str, Any], budgets: dict[str, dict[str, float]]) -> pd.DataFrame:
    """How far the recommendation is from the issue's targets (benchmarks, not checks)."""
    rec = recommend(m, budgets)
    if rec["strategy"] is None:
        return pd.DataFrame()
    return pd.DataFrame([
        {"target": "peak ≤ 1.6 × the 16 B/param floor", "floor (MB)": _mb(rec["floor_bytes"]),
         "target (MB)": _mb(1.6 * rec["floor_bytes"]), "measured": f"{rec['peak_bytes'] / MB:,.1f} MB "
         f"({rec['peak_over_floor']:.2f} × floor)", "met": rec["peak_over_floor"] <= 1.6},
        {"target": "accuracy within 1 % of fp32", "floor (MB)": None, "target (MB)": None,
         "measured": f"{rec['accuracy_impact_pct']:+.2f} %", "met": rec["accuracy_impact_pct"] <= 1.0},
        {"target": "step no slower than plain fp32", "floor (MB)": None, "target (MB)": None,
         "measured": f"{rec['time_per_window_ratio']:.2f} × per window", "met": rec["time_per_window_ratio"] <= 1.0},
    ])
