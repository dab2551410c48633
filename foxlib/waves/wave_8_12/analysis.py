"""Wave 8.12's decisions and shared figures. They read the typed record (records.py: raw bytes,
seconds, and each ratio to fp32 with its bootstrap interval over the alternating rounds,
foxlib.harness.timing.ratio_interval), never a table's rounded columns; a difference inside the
intervals is a tie, settled by memory."""
from __future__ import annotations

from functools import partial
from typing import Any

from foxlib.core import seed_claims
from foxlib.core.pooled_runs import pooled_interval, run_spread
from foxlib.core.budgets import Check
from foxlib.core.card_classes import CardClass, classes_for, nearest_class
from foxlib.core.config import MB
from foxlib.core.figures import Figure, key, slug
from foxlib.harness.timing import median_interval
from foxlib.waves.wave_8_12.records import Measurement812, StrategyResult
from foxlib.waves.wave_8_12.strategies import BASELINE, resolve_overrides
from foxlib.waves.wave_8_12.workspace import MAX_SLOWDOWN, VARIABLE


def own_class(rec: Measurement812) -> CardClass:
    """The class of the device that measured `rec` (a GPU older than every class: the fp16 class's limits)."""
    return nearest_class(rec.device.capability, rec.device.type)


def _kind(rec: Measurement812, cuda_graph: bool | None, card_class: CardClass) -> list[StrategyResult]:
    return [s for s in rec.strategies if (cuda_graph is None or s.cuda_graph == cuda_graph)
            and card_class.may_recommend(s.precision, s.options.tf32)]


def pareto(rec: Measurement812) -> list[str]:
    """Strategies no other strategy beats on both peak bytes and median time per training window
    (accuracy aside: the front shows what memory costs in time)."""
    cost = [(s.peak_bytes, s.window_ratio.median) for s in rec.strategies]
    return [s.name for s, (p, t) in zip(rec.strategies, cost)
            if not any(q <= p and u <= t and (q, u) != (p, t) for q, u in cost)]


def interval_text(s: StrategyResult) -> str:
    """E.g. "0.64x [0.58, 0.71] of fp32 per window"."""
    return f"{s.window_ratio} of fp32 per window"


def slowdown_check(s: StrategyResult, max_slowdown: float) -> Check:
    """Slowdown per training window against fp32 under `max_slowdown`: passes only when the interval's
    upper end is under it (a 1.9x [1.7, 2.1] strategy is not shown to be under 2x)."""
    iv = s.window_ratio
    return Check(f"recommended ({s.name}) slowdown per training window against fp32 "
                 f"(upper end of the {100 * iv.confidence:g} % interval)", iv.high, max_slowdown, "x",
                 iv.under(max_slowdown), note=interval_text(s))


def _describe(s: StrategyResult, rec: Measurement812) -> dict[str, Any]:
    return {"strategy": s.name, "precision": s.precision,
            "tft_overrides": resolve_overrides(rec.base_config, s.overrides), "peak_bytes": s.peak_bytes,
            "step_time_ratio": s.step_ratio.median, "step_time_interval": s.step_ratio.to_dict(),
            "time_per_window_ratio": s.window_ratio.median, "time_per_window_interval": s.window_ratio.to_dict(),
            "interval": interval_text(s), "accuracy_impact_pct": s.accuracy_impact_pct,
            "floor_bytes": rec.floors.bytes_floor, "peak_over_floor": s.peak_bytes / rec.floors.bytes_floor,
            "cuda_graph": s.cuda_graph, "options": s.stated_options,
            "allocator_peak_bytes": s.allocator_peak_bytes}


def recommend(rec: Measurement812, budgets: dict[str, dict[str, float]], cuda_graph: bool | None = None,
              card_class: CardClass | None = None) -> dict[str, Any]:
    """The configuration to ship. Among the strategies whose peak is within the budget, whose accuracy
    is within tolerance and whose slowdown check passes (the interval's upper end under max_slowdown),
    the fastest per training window (a smaller batch takes shorter steps but needs more of them); when
    other candidates' intervals overlap the fastest's, that is a tie, and the lightest of the tied wins.
    cuda_graph None: among every strategy (the recommendation: wave 8.13 trains and serves a graphed one
    with captured steps); False / True: the same among the eager / the CUDA-graph ones. card_class: only
    the strategies that hold for the class (foxlib.core.card_classes: no bf16 or TF32 on the fp16 class, fp32
    alone for CPUs); None: the measuring device's own class, so that a card without bf16 (a T4, emulating bf16
    slowly) is never told to ship a bf16 strategy its run measured."""
    given = card_class is not None
    card_class = card_class or own_class(rec)
    open_to = (f" open to the {card_class.name} class" if given or any(
        not card_class.may_recommend(s.precision, s.options.tf32) for s in rec.strategies) else "")
    kind = {None: "strategy", False: "eager strategy", True: "CUDA-graph strategy"}[cuda_graph] + open_to
    why_not = (f"; {card_class.why_not}" if any(card_class.allows(s.precision, s.options.tf32) and not
                                                 card_class.may_recommend(s.precision, s.options.tf32)
                                                 for s in rec.strategies) else "")
    limit_mb = budgets["tft"]["peak_training_mb"]
    tolerance_pct = budgets["accuracy"]["max_degradation_pct"]
    max_slowdown = budgets["speed"]["max_slowdown"]
    gates = (f"a peak under {limit_mb:,.0f} MB, accuracy within {tolerance_pct} % and a slowdown per training window "
             f"under {max_slowdown:g}x (upper end of the {100 * rec.interval_confidence:g} % interval)")
    ok = [s for s in _kind(rec, cuda_graph, card_class) if s.peak_bytes <= limit_mb * MB
          and s.accuracy_impact_pct <= tolerance_pct and s.window_ratio.under(max_slowdown)]
    if not ok:
        return {"strategy": None, "reason": f"no {kind} has {gates}{why_not}"}
    fastest = min(ok, key=lambda s: (s.window_ratio.median, s.peak_bytes, s.name))
    tied = [s for s in ok if s is not fastest and s.window_ratio.tie(fastest.window_ratio)]
    best = min([fastest, *tied], key=lambda s: (s.peak_bytes, s.window_ratio.median, s.name))
    plural = kind.replace("strategy", "strategies")
    if len(ok) == 1:
        reason = f"the only {kind} with {gates}"
    elif not tied:
        reason = f"fastest per training window of {len(ok)} {plural} with {gates}"
    else:
        others = ", ".join(f"{s.name} {s.window_ratio}" for s in tied)
        lightest = ("the fastest is also the lightest of them" if best is fastest else
                    f"{best.name} ({best.peak_bytes / MB:,.1f} MB against the fastest's "
                    f"{fastest.peak_bytes / MB:,.1f} MB)")
        reason = (f"a tie settled by memory: of {len(ok)} {plural} with {gates}, the fastest per training window, "
                  f"{fastest.name} {fastest.window_ratio}, is within the intervals of {others}; the lightest wins: "
                  f"{lightest}")
    return {**_describe(best, rec), **workspace_advice(rec, best.name), "fastest": fastest.name,
            "tied_with": [s.name for s in tied], "settled_by_memory": bool(tied), "reason": reason + why_not}


def recommend_per_class(rec: Measurement812, budgets: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """{class name: recommend() among the strategies that class runs} for every class this measurement's device
    answers for (foxlib.core.card_classes.classes_for: a GPU's run answers for every GPU class, in memory; its
    speeds are the GPU's own)."""
    return {c.name: {**recommend(rec, budgets, card_class=c), "card_class": c.name, "card_class_title": c.title}
            for c in classes_for(rec.device.type)}


def workspace_advice(rec: Measurement812, name: str) -> dict[str, Any]:
    """Whether to ship `name` with the small cuBLAS workspace (workspace.py): yes when it was measured at
    both sizes, saves bytes and its step-time ratio's upper end is within workspace.MAX_SLOWDOWN of 1.
    {"cublas_workspace": setting or None, "cublas_workspace_note": why, and the measured figures}."""
    k = rec.knob(name)
    if k is None:
        return {"cublas_workspace": None, "cublas_workspace_note": "not measured at another cuBLAS workspace size"}
    figures = {"allocator_peak_bytes_default_workspace": k.allocator_peak_bytes,
               "allocator_peak_bytes_small_workspace": k.small_allocator_peak_bytes,
               "workspace_step_ratio": k.ratio.to_dict()}
    if k.saved_bytes <= 0 or k.costs_time:
        why = ("it saves no memory" if k.saved_bytes <= 0 else
               f"its step is slower there ({k.ratio}, more than {100 * MAX_SLOWDOWN:g} %)")
        return {"cublas_workspace": None, "cublas_workspace_note": f"{VARIABLE}={k.setting} not advised: {why}",
                **figures}
    return {"cublas_workspace": k.setting, **figures,
            "cublas_workspace_note": (f"it lowers the allocator peak from {k.allocator_peak_bytes / MB:,.1f} to "
                                      f"{k.small_allocator_peak_bytes / MB:,.1f} MB (fresh processes); step time "
                                      f"{k.ratio} of the default size's")}


def lightest_at_full_speed(rec: Measurement812, budgets: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """The lightest strategy shown no slower than plain fp32 per training window (its interval's upper end at most 1,
    as fp32's own [1, 1] is) with accuracy in tolerance, among those the measuring device's class may ship: the other
    end of the Pareto front from the recommendation (the fastest under the budget), the end tables.py's `targets`
    asks about. None if no strategy qualifies."""
    ok = [s for s in _kind(rec, None, own_class(rec)) if s.window_ratio.high <= 1.0
          and s.accuracy_impact_pct <= budgets["accuracy"]["max_degradation_pct"]]
    return _describe(min(ok, key=lambda s: (s.peak_bytes, s.window_ratio.median, s.name)), rec) if ok else None


def checks(rec: Measurement812, budgets: dict[str, dict[str, float]]) -> list[Check]:
    r = recommend(rec, budgets)
    if r["strategy"] is None:
        runs = own_class(rec)
        lightest = min((s for s in rec.strategies if runs.allows(s.precision, s.options.tf32)),
                       key=lambda s: s.peak_bytes)
        return [Check.at_most("a strategy meets the peak budget, the accuracy tolerance and the slowdown limit", 1, 0,
                              "strategies", note=f"{r['reason']}; lowest peak: {lightest.name} "
                                                 f"{lightest.peak_bytes / MB:,.1f} MB, {interval_text(lightest)}")]
    best = rec[r["strategy"]]
    return [
        Check.at_most(f"recommended ({best.name}) peak training memory", best.peak_bytes,
                      budgets["tft"]["peak_training_mb"] * MB, "bytes"),
        slowdown_check(best, budgets["speed"]["max_slowdown"]),
    ]


def accuracy_powered(rec: Measurement812) -> bool:
    """The accuracy impacts have power: every run of the fp32 baseline beats climatology by min_skill."""
    return all(r.has_skill for r in rec.accuracy_runs[BASELINE])


def claim_verdicts(r: Measurement812) -> dict[str, dict[str, Any]]:
    """The seed's speed claims judged on the independent runs, once for the page and the index: per claim
    strategy, its runs ((median, low, high) of time per window over fp32), the pooled centre and 95 % interval
    (foxlib.core.pooled_runs.pooled_interval, the spread between runs pooled over every claim: run_spread), the
    claim's ratio and band, and the verdict. {} where the runs were not made."""
    runs = {n: [(x.median, x.low, x.high) for x in v] for n, v in r.claim_runs.items()}
    if not runs:
        return {}
    spread = run_spread(runs.values())
    out = {}
    for name, triples in runs.items():
        claim = seed_claims.STRATEGY_GUESSES[r[name].seed_guess]["speed"]
        ratio = seed_claims.speed_ratio(claim)
        centre, low, high = pooled_interval(triples, spread)
        out[name] = {"runs": triples, "centre": centre, "low": low, "high": high, "claim": claim, "ratio": ratio,
                     "band": seed_claims.speed_band(ratio),
                     "verdict": seed_claims.pooled_verdict(len(triples), low, high, ratio)}
    return out


def named_figures(r: Measurement812) -> list[Figure]:
    """The figures this report shows that other pages show too (foxlib.core.figures), raw: each strategy's
    model peak and time per training window against fp32 (with its interval). The plain precisions are
    keyed as 8.10 and 8.11 key them, so that the consistency check compares them across pages."""
    cfg = r.base_config
    claims = claim_verdicts(r)
    out = []
    for s in r.strategies:
        k = partial(key, "tft", r.preset, cfg["batch_size"], cfg["encoder_length"], s.precision,
                    variant=None if s.name in (BASELINE, "fp16", "bf16") else slug(s.name))
        out.append(Figure(k(quantity="model_peak"), s.peak_bytes, "bytes"))
        if s.name != BASELINE:
            w = s.window_ratio
            out.append(Figure(k(quantity="time_per_window_ratio"), w.median, "ratio", low=w.low, high=w.high,
                              confidence=w.confidence))
            if s.name in claims:  # the claim runs pooled (claim_verdicts): what the index's ledger judges
                c = claims[s.name]
                out.append(Figure(k(quantity="claim_time_per_window_ratio"), c["centre"], "ratio", low=c["low"],
                                  high=c["high"], runs=tuple(c["runs"])))
        if s.name == BASELINE:  # the fp32 step every ratio of this run rests on (foxlib.report.baselines)
            median, low, high, confidence = median_interval(s.step_samples_s)
            out.append(Figure(k(quantity="step_time", variant="wave-8-12"), median, "s", low=low, high=high,
                              confidence=confidence))
        if s.name in r.same_function:
            out.append(Figure(k(quantity="grad_rel_diff"), r.same_function[s.name].grad_rel_diff, "ratio"))
    return out
