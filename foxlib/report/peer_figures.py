"""The peer benchmark's figures, pure functions of its results file (benchmarks/peer_tft.py): every row's ratios
to pytorch-forecasting's TFT at the same configuration (the row "peer"), the step-time ratio's interval over the
paired rounds of the all-rows run (every row alternating in the measuring process), the rows with a target timed with
the peer in independent runs alike (fresh processes, the same rows) and their step-time ratios pooled over those
runs, the issue's targets as checks, and the rows a file lacks, with why. The measuring script stores ratios and
checks; the page (peer_page.py) reads them, and their keys directly: it checks a file has them all first
(peer_page.check_results)."""
from __future__ import annotations

from typing import Any

from foxlib.core import pooled_runs
from foxlib.core.config import MB
from foxlib.harness.timing import RatioInterval, interval_of_samples, shared_confidence
from foxlib.memory.profile import peak_misses_saved_tensors

PEER = "peer"
# every row, in the page's order: name -> label
ROWS = {
    "peer": "pytorch-forecasting TFT",
    "peer_hcs8": "pytorch-forecasting TFT, its defaults (hidden_continuous_size 8)",
    "peer_hcs16": "pytorch-forecasting TFT, its defaults with hidden_continuous_size 16",
    "nf": "neuralforecast TFT",
    "nf_defaults": "neuralforecast TFT, its defaults",
    "darts": "darts TFTModel, skip_interpolation off",
    "darts_skip": "darts TFTModel, skip_interpolation on",
    "darts_defaults": "darts TFTModel, its defaults (skip_interpolation off)",
    "darts_defaults_skip": "darts TFTModel, its defaults with skip_interpolation on",
    "foxlib_default": "foxlib TFT, default",
    "foxlib_best": "foxlib TFT, best (8.12)",
    "foxlib_compiled_default": "foxlib TFT, default, torch.compile (mode default)",
    "foxlib_compiled_reduce_overhead": "foxlib TFT, default, torch.compile (mode reduce-overhead)",
}
PF_ROWS = ("peer", "peer_hcs8", "peer_hcs16")  # pytorch-forecasting: "peer" is every ratio's baseline
# the other peers (benchmarks/peer/others.py): row -> library
OTHER_PEERS = {"nf": "neuralforecast", "nf_defaults": "neuralforecast", "darts": "darts", "darts_skip": "darts",
               "darts_defaults": "darts", "darts_defaults_skip": "darts"}
PEER_ROWS = (*PF_ROWS, *OTHER_PEERS)
LIBRARY = {**{n: "pytorch-forecasting" for n in PF_ROWS}, **OTHER_PEERS}
# foxlib's rows compared with every peer row (foxlib_over_peers)
OVER_PEERS = ("foxlib_default", "foxlib_best")
FOXLIB_ROWS = tuple(n for n in ROWS if n not in PEER_ROWS)
COMPILED = {"foxlib_compiled_default": "default", "foxlib_compiled_reduce_overhead": "reduce-overhead"}
# the targets: foxlib's default no heavier (peak) and no slower than the peer; its best at most half
TARGETS = {"foxlib_default": 1.0, "foxlib_best": 0.5}
# what a target's check judges, by the ratio it reads: its name is "<row's label>: <this> / peer's" (check_name)
CHECKED = {"peak": "peak training memory", "step_time": "median step time"}
# the fast path's targets for the best row (benchmarks, not checks): a third of the peer's peak, a tenth of its step
FAST_PATH_TARGETS = {"peak": 0.3, "step_time": 0.1}
IN_GRAPH = "in the CUDA graph"  # a graphed step's activations and forward peak: not seen by any hook
# a peak under the row's own saved tensors (foxlib.memory.profile.peak_misses_saved_tensors): not shown
POOL_UNSEEN = "not shown: under its own saved tensors"


def peak_unseen(res: dict[str, Any], name: str) -> bool:
    """The row's one-step peak missed tensors held outside the step (e.g. torch.compile's reduce-overhead
    mode on CUDA: CUDA graph trees fill their pool in the warm-up): its peak and its ratio are not shown."""
    return peak_misses_saved_tensors(res["variants"][name]["memory"])


def peak_mb(res: dict[str, Any], name: str) -> str:
    """The row's peak in MB, or POOL_UNSEEN where it is not shown (peak_unseen)."""
    return POOL_UNSEEN if peak_unseen(res, name) else mb(res["variants"][name]["memory"]["peak"])


def peak_unseen_note(res: dict[str, Any], name: str) -> str:
    """The page's note on a row whose peak is not shown (peak_unseen): its figures, and why."""
    mem = res["variants"][name]["memory"]
    return (f"{label(res, name)}: its one-step peak, {mb(mem['peak'])} MB, is under what its own saved tensors "
            f"({mb(mem['activations'])} MB) and the tensors live before the step need at once: it missed memory held "
            "outside the step (torch.compile's reduce-overhead mode replays CUDA graphs whose pool is filled in the "
            "warm-up), so neither it nor its ratio to the peer's is shown.")


def label(res: dict[str, Any], name: str) -> str:
    """A measured row's label (the file's), else its ROWS label."""
    v = res["variants"].get(name)
    return ROWS[name] if v is None else v["label"]


def paired_interval(timing: dict[str, Any] | None, base: dict[str, Any] | None) -> RatioInterval | None:
    """The median of the per-round step-time ratios timing / base (two rows' timing dicts of one run) and its
    bootstrap interval (interval_of_samples), or None where either holds no raw samples or their rounds differ in
    number."""
    a, b = (timing or {}).get("samples_s"), (base or {}).get("samples_s")
    return interval_of_samples(a, b) if a and b and len(a) == len(b) else None


def stored_interval(d: dict[str, Any]) -> RatioInterval:
    """An interval as the file stores it (median, low, high, confidence), beside its "rounds" or "runs"."""
    return RatioInterval(d["median"], d["low"], d["high"], d["confidence"])


def ratios(res: dict[str, Any], base: str = PEER, names=None) -> dict[str, dict[str, Any]]:
    """Every measured row but the peer (or those of `names`), over the peer (or the row `base`): parameters,
    activations (where measured: not for a step captured as one CUDA graph), peak, step time (ratio of
    medians; median of per-round ratios, with its interval)."""
    peer = res["variants"].get(base)
    if peer is None:
        return {}
    out = {}
    for name, v in res["variants"].items():
        if name == base or (names is not None and name not in names):
            continue
        r: dict[str, Any] = {"parameters": v["n_parameters"] / peer["n_parameters"],
                             "parameter_bytes": v["parameter_bytes"] / peer["parameter_bytes"]}
        if not peak_unseen(res, name) and not peak_unseen(res, base):
            r["peak"] = v["memory"]["peak"] / peer["memory"]["peak"]
        if v["memory"]["activations"] is not None and peer["memory"]["activations"]:
            # a step captured as one CUDA graph has none measured (its saved tensors are in the graph's pool)
            r["activations"] = v["memory"]["activations"] / peer["memory"]["activations"]
        r["step_time"] = v["timing"]["median_s"] / peer["timing"]["median_s"]
        interval = paired_interval(v["timing"], peer["timing"])
        if interval is not None:
            # per round (the rows alternate, so round r of each ran close in time): robust to load drift
            r["step_time_paired"] = interval.median
            r["step_time_interval"] = {**interval.to_dict(), "rounds": len(v["timing"]["samples_s"])}
        out[name] = r
    return out


def foxlib_over_peers(res: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{peer row: {foxlib row: its ratios over that peer}} for every measured peer row (all three
    libraries) and foxlib's default and best rows: peak, step time with its interval over the paired rounds."""
    return {p: ratios(res, p, OVER_PEERS) for p in PEER_ROWS if p in res["variants"]}


def peers_table(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per peer row, in ROWS order: measured (its peak, step, foxlib's ratios over it: the file's
    "ratios_by_peer") or not (the reason)."""
    variants = res["variants"]
    out = []
    for name in PEER_ROWS:
        row: dict[str, Any] = {"name": name, "label": label(res, name), "library": LIBRARY[name],
                               "measured": name in variants}
        if name not in variants:
            out.append({**row, "reason": res["not_run"][name]})
            continue
        v, over = variants[name], res["ratios_by_peer"][name]
        row.update(precision=v["precision"], n_parameters=f"{v['n_parameters']:,}",
                   peak_mb=peak_mb(res, name), step_ms=ms(v["timing"]["median_s"]),
                   foxlib={f: {"peak": (f"{over[f]['peak']:.3f}×" if "peak" in over[f] else "n/a"),
                               "step": interval_text(over[f])} if f in over else None for f in OVER_PEERS})
        out.append(row)
    return out


def check_name(res: dict[str, Any], name: str, key: str) -> str:
    """The name of row `name`'s check of the ratio `key` (CHECKED)."""
    return f"{label(res, name)}: {CHECKED[key]} / peer's"


def step_interval_of(r: dict[str, Any]) -> RatioInterval | None:
    """A row's step-time ratio over the paired rounds as foxlib.harness.timing's RatioInterval (its under() and
    tie() are the rule every speed check follows); None for a file without raw samples."""
    i = r.get("step_time_interval")
    return None if i is None else stored_interval(i)


def run_intervals(res: dict[str, Any], name: str) -> list[RatioInterval]:
    """Row `name`'s step time over the peer's in each independent timing run (timing_runs: a fresh process timing
    the peer and the rows with a target, the same rows in each) that did not fail and holds both with raw samples
    (paired_interval), one per run. The rows' own timing (every row alternating in the measuring process: the
    tables) is not one of them."""
    runs = [run["timing"] for run in res["timing_runs"]["runs"] if "timing" in run]
    return [i for run in runs if (i := paired_interval(run.get(name), run.get(PEER)))]


def pooled_step_time(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each measured row with a target: its step time over the peer's in every independent run ("runs": [median,
    low, high] each) and, where two or more runs hold it, the runs pooled (foxlib.core.pooled_runs.pooled_interval:
    the geometric mean of their medians, a 95 % interval from the spread between runs, pooled over the rows with a
    target, which were timed in the same runs): "median", "low", "high", "confidence". The measuring script stores
    it ("pooled_step_time"); the checks and the page read it there."""
    per = {name: [(i.median, i.low, i.high) for i in run_intervals(res, name)]
           for name in TARGETS if name in res["variants"]}
    try:
        spread = pooled_runs.run_spread(per.values())
    except ValueError:  # no row with two runs: nothing to pool
        spread = None
    out: dict[str, dict[str, Any]] = {}
    for name, runs in per.items():
        out[name] = {"runs": [list(r) for r in runs]}
        if spread is not None and len(runs) > 1:
            centre, low, high = pooled_runs.pooled_interval(runs, spread)
            out[name].update(median=centre, low=low, high=high, confidence=pooled_runs.CONFIDENCE)
    return out


def target_step(res: dict[str, Any], name: str) -> tuple[RatioInterval | None, int]:
    """(the step-time figure a row with a target is judged on and shown with, the independent runs it rests on): its
    runs pooled where two or more hold it (pooled_step_time, as the file stores it), else its one independent run's
    paired interval, else the all-rows run's (None without raw samples), which is no independent run (0)."""
    p = res["pooled_step_time"].get(name) or {"runs": []}
    if "median" in p:
        return stored_interval(p), len(p["runs"])
    single = run_intervals(res, name)
    if len(single) == 1:
        return single[0], 1
    return step_interval_of(res["ratios"].get(name) or {}), 0


def checks(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets: default no heavier (peak) and no slower; best at most half of both. The measuring script
    stores them ("checks"); a page reads them there (stored_checks). Step time is judged on target_step's interval
    (measured: its centre): met only when its upper end is under the limit (RatioInterval.under, wave 8.12's
    slowdown rule), so a difference inside the interval (a tie) is never a PASS; and only on
    foxlib.core.pooled_runs.MIN_RUNS independent runs or more: with fewer, the check is "inconclusive" (not
    passed), as one run's interval is narrower than the spread between runs of the same code."""
    out = []
    for name, limit in TARGETS.items():
        r = res["ratios"].get(name) or {}
        for key in (k for k in CHECKED if k in r):
            i, n = target_step(res, name) if key == "step_time" else (None, 0)
            if not i:  # a peak, or a step time without raw samples: the ratio against the limit
                out.append({"name": check_name(res, name, key), "measured": r[key], "limit": limit, "unit": "ratio",
                            "passed": r[key] <= limit})
                continue
            # judged on the interval and the runs, not on measured <= limit: the note says what decided it
            enough = n >= pooled_runs.MIN_RUNS
            where = {0: "the all-rows run (no independent run)", 1: "one independent run"}
            what = (f"{n} independent runs pooled: {i.median:.3f} [{i.low:.3f}, {i.high:.3f}]" if n > 1 else
                    f"paired median {i.median:.3f} [{i.low:.3f}, {i.high:.3f}] in {where[n]}")
            out.append({"name": check_name(res, name, key), "measured": i.median, "limit": limit, "unit": "ratio",
                        "passed": enough and i.under(limit), "runs": n,
                        "note": f"{what}: met only when the interval's upper end is under {limit:g}" +
                        ("" if enough else f"; inconclusive: {n} of the {pooled_runs.MIN_RUNS} independent runs "
                                           "a verdict needs"),
                        **({} if enough else {"inconclusive": True})})
    return out


def check_verdict(check: dict[str, Any]) -> str:
    """A stored check as the page and the summary say it: PASS, FAIL or INCONCLUSIVE (too few independent runs)."""
    return "INCONCLUSIVE" if check.get("inconclusive") else "PASS" if check["passed"] else "FAIL"


def stored_checks(res: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """Row `name`'s checks as the file stores them ("checks", by check_name), by the ratio each judges: their limit
    and verdict are read, not judged again. {} for a row without a target."""
    stored = {c["name"]: c for c in res["checks"]}
    return {key: stored[n] for key in CHECKED if (n := check_name(res, name, key)) in stored}


def fast_path_lines(res: dict[str, Any]) -> list[str]:
    """How far the best row is from the fast path's targets: met, not met (by how much), a tie (the
    step-time interval holds the target) or, for step time, inconclusive (fewer independent runs than a verdict
    needs); step time read as its check reads it (target_step)."""
    r = res["ratios"].get("foxlib_best") or {}
    out = []
    for key, limit in FAST_PATH_TARGETS.items():
        if key not in r:
            continue
        i, n = target_step(res, "foxlib_best") if key == "step_time" else (None, 0)
        value = i.median if i else r[key]  # the figure the step-time check reads: the value the answer shows
        shown = f"{value:.3f}x" + (f" [{i.low:.3f}, {i.high:.3f}]" if i else "")
        verdict = (f"inconclusive: {n} of the {pooled_runs.MIN_RUNS} independent runs a verdict needs"
                   if i and n < pooled_runs.MIN_RUNS else
                   "met" if (i.under(limit) if i else value <= limit) else
                   "a tie: the interval holds the target" if i and i.holds(limit) else
                   f"not met ({value - limit:+.3f} over)")
        out.append(f"{label(res, 'foxlib_best')}: {key.replace('_', ' ')} ≤ {limit}x the peer's: {shown}, {verdict}")
    return out


def missing_rows(res: dict[str, Any]) -> list[dict[str, str]]:
    """Every row the file does not hold: {"name", "label", "reason"} (the run's reason: its "not_run")."""
    return [{"name": n, "label": ROWS[n], "reason": res["not_run"][n]}
            for n in ROWS if n not in res["variants"]]


def mb(value: float | None) -> str:
    return "not measured" if value is None else f"{value / MB:,.1f}"


def memory_mb(mem: dict[str, Any], key: str) -> str:
    """One memory category in MB; a step captured as one CUDA graph saves its activations in the graph's
    pool, where no hook sees them (foxlib.memory.cuda_graph.profile_graphed_step): said so."""
    return IN_GRAPH if mem[key] is None and mem.get("cuda_graph") else mb(mem[key])


def ms(seconds: float | None) -> str:
    return "not measured" if seconds is None else f"{seconds * 1e3:,.1f}"


def coverage_pct(res: dict[str, Any]) -> str:
    """The coverage the rows' step-time intervals state (every row is timed in the same rounds: the least of theirs,
    foxlib.harness.timing.shared_confidence), e.g. "95", for the tables' headers; CONFIDENCE where none has one."""
    found = [i for r in res["ratios"].values() if r and (i := step_interval_of(r))]
    return f"{100 * shared_confidence(found):g}"


def interval_text(r: dict[str, Any]) -> str:
    """E.g. "0.89× [0.85, 0.93]" (the median of per-round ratios and its interval, whose coverage is the header's:
    coverage_pct), else the ratio of medians."""
    i = r.get("step_time_interval")
    return f"{r['step_time']:.3f}×" if i is None else f"{i['median']:.3f}× [{i['low']:.3f}, {i['high']:.3f}]"


def table_rows(res: dict[str, Any]) -> list[dict[str, str]]:
    """One row of display strings per measured row, in ROWS order (then any other the file holds)."""
    variants, step_column = res["variants"], f"step time / peer's (ratio [{coverage_pct(res)} % interval])"
    rows = []
    for name in [*(n for n in ROWS if n in variants), *(n for n in variants if n not in ROWS)]:
        v, tm = variants[name], variants[name]["timing"]
        r = res["ratios"].get(name)  # None for the peer
        comp = v.get("compile") or {}
        rows.append({
            "variant": label(res, name),
            "precision": v["precision"],
            "parameters": f"{v['n_parameters']:,}",
            "parameters (MB)": mb(v["parameter_bytes"]),
            "activations (MB)": memory_mb(v["memory"], "activations"),
            "peak (MB)": peak_mb(res, name),
            "step median (ms)": ms(tm["median_s"]),
            "step IQR (ms)": ms(tm["iqr_s"]),
            "peak / peer's (ratio)": (f"{r['peak']:.3f}" if "peak" in r else "n/a") if r is not None else "1",
            step_column: interval_text(r) if r is not None else "1",
            "compile (s)": f"{comp['compile_s']:,.1f}" if comp.get("compile_s") is not None else "",
        })
    return rows


def text_table(res: dict[str, Any]) -> str:
    """The summary the script prints last: the rows, the rows not measured, the checks."""
    rows = table_rows(res)
    out = []
    if rows:
        cols = list(rows[0])
        width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}

        def line(r):
            return "  ".join(r[c].rjust(width[c]) if i else r[c].ljust(width[c]) for i, c in enumerate(cols))
        out += [line({c: c for c in cols}), "  ".join("-" * width[c] for c in cols), *(line(r) for r in rows)]
    out += [f"{m['label']}: {m['reason']}" for m in missing_rows(res)]
    for c in res["checks"]:
        note = f"; {c['note']}" if c.get("note") else ""
        out.append(f"{check_verdict(c)}  {c['name']}: {c['measured']:.3f} (target <= {c['limit']}{note})")
    return "\n".join(out)
