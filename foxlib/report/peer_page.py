"""reports/<device>/peer-benchmark.html: the peer benchmark's page (benchmarks/peer_tft.py writes the JSON),
rendered through templates/peer-benchmark.html.j2. The first screen answers in numbers: each foxlib row's peak
and step time over the peer's at the same configuration (foxlib/report/peer_figures.py), the rows not run and
why, the device and the revisions. A results file is checked once, naming every key it lacks (check_results);
the page then reads them directly.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2

from foxlib.core import provenance
from foxlib.core.pooled_runs import MIN_RUNS
from foxlib.core.results import measured_revision, read_json, write_json, write_text
from foxlib.harness.step_options import StepOptions
from foxlib.report import peer_figures as fig
from foxlib.report.page_template import template

MEMORY_CATEGORIES = {"parameters": "parameters", "gradients": "gradients", "optimizer_state": "optimizer state",
                     "activations": "activations", "forward_peak": "forward peak", "peak": "step peak"}
# what the page reads of a results file, all written by benchmarks/peer_tft.py (check_results names what is missing).
# Optional by design, read with defaults: rendered_at_revision (set by render_file), a row's compile (the torch.compile
# rows only), a graphed row's memory.cuda_graph, timing.samples_s (fig.paired_interval: none, no interval), a ratio's
# peak (fig.peak_unseen) and step_time_interval, compile.explain's fields, a library's version (None: not installed);
# every row but the peer (not run: not_run says why).
REQUIRED = ("title", "generated_at", "device", "environment", "arguments", "config", "same_configuration", "best",
            "depends_on", "compile", "not_run", "variants", "timing_runs", "ratios", "pooled_step_time",
            "ratios_by_peer", "checks", "notes")
REQUIRED_IN = {"device": ("name", "type", "short"),
               "environment": ("python", "torch", "pytorch_forecasting", "neuralforecast", "darts", "lightning",
                               "pandas", "threads"),
               "best": ("precision", "tft_overrides", "source", "cuda_graph", "options"),
               "compile": ("setting", "enabled", "reason", "backend", "explain"),
               "arguments": ("runs",),
               "timing_runs": ("rows", "runs")}
ROW_KEYS = ("label", "precision", "n_parameters", "parameter_bytes", "by_block", "memory", "timing")
ROW_MEMORY_KEYS = (*MEMORY_CATEGORIES, "peak_method")
ROW_TIMING_KEYS = ("median_s", "iqr_s", "noisy")


def missing_keys(res: dict[str, Any]) -> list[str]:
    """Every key of REQUIRED (and below) the results lack, as dotted paths: the peer's row, each measured row's
    figures (another library's its architecture, foxlib_best its cuda_graph, a compiled row its compile), each
    row's ratios to the peer, each peer row's ratios_by_peer, each ratio with a target its check (the page shows
    the file's verdict: fig.stored_checks) and each row not measured its not_run reason."""
    out = [k for k in REQUIRED if k not in res]
    out += [f"{k}.{s}" for k, keys in REQUIRED_IN.items() if k in res for s in keys if s not in res[k]]
    variants = res.get("variants", {})
    out += [f"variants.{fig.PEER}"] if fig.PEER not in variants else []
    for name, v in variants.items():
        need = (*ROW_KEYS, *(("architecture",) if name in fig.OTHER_PEERS else ()),
                *(("cuda_graph",) if name == "foxlib_best" else ()), *(("compile",) if name in fig.COMPILED else ()))
        out += [f"variants.{name}.{k}" for k in need if k not in v]
        out += [f"variants.{name}.memory.{k}" for k in ROW_MEMORY_KEYS if "memory" in v and k not in v["memory"]]
        out += [f"variants.{name}.timing.{k}" for k in ROW_TIMING_KEYS if "timing" in v and k not in v["timing"]]
        if name != fig.PEER and "ratios" in res and "step_time" not in res["ratios"].get(name, {}):
            out.append(f"ratios.{name}.step_time")
        if name in fig.PEER_ROWS and "ratios_by_peer" in res and name not in res["ratios_by_peer"]:
            out.append(f"ratios_by_peer.{name}")
        if name in fig.TARGETS and "label" in v and "ratios" in res and "checks" in res:  # a target's ratio: checked
            named = {c.get("name") for c in res["checks"]}
            out += [f"checks.{name}.{k}" for k in fig.CHECKED
                    if k in res["ratios"].get(name, {}) and fig.check_name(res, name, k) not in named]
    if "not_run" in res:
        out += [f"not_run.{n}" for n in fig.ROWS if n not in variants and n not in res["not_run"]]
    return out


def check_results(res: dict[str, Any], where: str = "the results") -> None:
    """ValueError naming every key the page needs that `res` lacks (missing_keys), or a file whose figures pool its
    all-rows run (an earlier layout: it made one independent timing run fewer than it asked for, counting itself);
    the page reads the keys directly."""
    if missing := missing_keys(res):
        raise ValueError(f"{where}: not a complete peer benchmark results file (benchmarks/peer_tft.py writes one): "
                         f"missing {', '.join(missing)}")
    asked, made = res["arguments"]["runs"], len(res["timing_runs"]["runs"])
    if made != asked:
        raise ValueError(f"{where}: asked for {asked} independent timing runs and holds {made}: "
                         "measured before each run was a fresh process (its targets pool the all-rows run); measure "
                         "it again (make peer-bench)")


def citations(res: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """What the page says of depends_on: each citation with `verified` (the published file is the one read)."""
    cited = res["depends_on"]
    items = []
    for c in cited:
        try:
            provenance.verify([provenance.Citation.from_dict(c)], base)  # typed where the file's data is read
            items.append({**c, "verified": True, "problem": ""})
        except provenance.ProvenanceError as exc:
            items.append({**c, "verified": False, "problem": str(exc)})
    return {"state": "cited" if cited else "none", "items": items}


def relative_source(text: str) -> str:
    """best.source names an absolute path where the run read reports outside the repository (--reports-dir):
    shown from reports/ on."""
    return re.sub(r"(?:/[^\s/()]+)+?/(reports/)", r"\1", text)


def best_step(res: dict[str, Any]) -> str:
    """How the best configuration's step ran: its CUDA graph (applied, or not on this device) and its step
    options (foxlib.harness.step_options); "" for a plain eager step."""
    best, row = res["best"], res["variants"].get("foxlib_best")  # the row: not run where not selected
    parts = []
    if best["cuda_graph"]:
        parts.append("the whole step as one CUDA graph" if row is not None and row["cuda_graph"]
                     else "its CUDA graph not applied on this device (eager steps)")
    if options := StepOptions.from_dict(best["options"]).label():
        parts.append(f"step options: {options}")
    return "; ".join(parts)


def _answer_row(res: dict[str, Any], name: str) -> dict[str, Any]:
    v = res["variants"].get(name)
    row: dict[str, Any] = {"name": name, "label": fig.label(res, name), "measured": v is not None}
    if v is None:
        return {**row, "reason": res["not_run"][name]}
    r, checked = res["ratios"][name], fig.stored_checks(res, name)
    row.update(precision=v["precision"], peak_ratio=r.get("peak"), peak_mb=fig.peak_mb(res, name),
               step_ms=fig.ms(v["timing"]["median_s"]), step_ratio=r["step_time"], interval=fig.step_interval_of(r),
               compile_s=(v.get("compile") or {}).get("compile_s"),
               target=checked["step_time"]["limit"] if checked else None)  # the limit the file's checks judged
    if row["target"] is not None:
        judged, runs = fig.target_step(res, name)  # the figure the file's step-time check read
        # the file's verdicts (a peak not shown has no check: not passed)
        row.update(peak_passed="peak" in checked and checked["peak"]["passed"], judged=judged, runs=runs,
                   step_verdict=fig.check_verdict(checked["step_time"]),
                   step_within_noise=bool(judged and judged.holds(row["target"])))
    return row


def timing_runs_text(res: dict[str, Any]) -> str:
    """How many independent timing runs the targets rest on, and any that failed, in words."""
    tr = res["timing_runs"]
    rows = ", ".join(fig.label(res, n) for n in tr["rows"])
    if not tr["runs"]:
        return (f"this file holds no independent timing run of {rows}: none was asked for (--runs 0), or it was "
                "measured before the benchmark made them")
    made = sum("timing" in run for run in tr["runs"])
    failed = [run["error"] for run in tr["runs"] if "error" in run]
    text = (f"{made} independent timing run{'s' if made != 1 else ''} of {rows}, each in a fresh process with these "
            "rows only")
    return text + (f"; {len(failed)} failed: {'; '.join(failed)}" if failed else "")


def context(res: dict[str, Any], cites: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the template shows, as plain values (no HTML), from results that pass check_results."""
    variants, peer, checks, best = res["variants"], res["variants"][fig.PEER], res["checks"], res["best"]
    verdicts = {fig.check_verdict(c) for c in checks}
    state = "none" if not checks else "fail" if "FAIL" in verdicts else "inconclusive" if "INCONCLUSIVE" in verdicts \
        else "pass"
    measured, rendered = measured_revision(res), res.get("rendered_at_revision")
    return {
        **{k: res[k] for k in ("title", "device", "generated_at", "same_configuration", "environment")},
        "measured_at": measured or "unknown", "rendered_at": rendered or "not rendered yet",
        "dirty": not all(provenance.is_clean(r) for r in (measured, rendered) if r),
        "verdict": {"pass": "all targets met", "fail": "targets not all met", "none": "no checks",
                    "inconclusive": "none failed, not all judged: too few independent runs"}[state],
        "verdict_class": "none" if state == "inconclusive" else state,
        "min_runs": MIN_RUNS, "timing_runs": timing_runs_text(res),
        "peer": {"label": fig.label(res, fig.PEER), "precision": peer["precision"],
                 "peak_mb": fig.peak_mb(res, fig.PEER), "step_ms": fig.ms(peer["timing"]["median_s"])},
        "answer": [_answer_row(res, n) for n in fig.FOXLIB_ROWS],
        "peer_defaults": [_answer_row(res, n) for n in fig.PF_ROWS if n != fig.PEER],
        "peers": fig.peers_table(res),
        "missing": fig.missing_rows(res),
        "rounds": len(peer["timing"].get("samples_s") or []),
        "coverage_pct": fig.coverage_pct(res),
        "rows": fig.table_rows(res),
        "fast_path": fig.fast_path_lines(res),
        "checks": [{**c, "verdict": fig.check_verdict(c)} for c in checks],
        "memory_columns": list(MEMORY_CATEGORIES.values()),
        "memory": [{"label": fig.label(res, n), "cells": [fig.memory_mb(v["memory"], k) for k in MEMORY_CATEGORIES]}
                   for n, v in variants.items()],
        "peak_method": peer["memory"]["peak_method"],
        "timing": [{"label": fig.label(res, n), "median": fig.ms(v["timing"]["median_s"]),
                    "iqr": fig.ms(v["timing"]["iqr_s"]), "repeats": len(v["timing"].get("samples_s") or []),
                    "noisy": "yes" if v["timing"]["noisy"] else "no"} for n, v in variants.items()],
        "compile": {**res["compile"],  # setting, enabled, reason, backend, explain
                    "rows": [{"label": fig.label(res, n), **variants[n]["compile"]}
                             for n in fig.COMPILED if n in variants]},
        "notes": res["notes"] + [fig.peak_unseen_note(res, n) for n in variants if fig.peak_unseen(res, n)],
        "blocks": [{"label": fig.label(res, n), "items": list(v["by_block"].items())} for n, v in variants.items()],
        "config": list(res["config"].items()),
        "best": {"precision": best["precision"], "overrides": json.dumps(best["tft_overrides"]),
                 "step": best_step(res), "source": relative_source(best["source"])},
        "citations": cites if cites is not None else citations(res),
        "architectures": [{"label": fig.label(res, n), "items": list(v["architecture"].items())}
                          for n, v in variants.items() if n in fig.OTHER_PEERS],
    }


def render(res: dict[str, Any], cites: dict[str, Any] | None = None) -> str:
    """The page's HTML for a results dict (nothing written); ValueError where it lacks keys (check_results)."""
    check_results(res)
    page = template("peer-benchmark.html.j2", autoescape=True, undefined=jinja2.StrictUndefined)
    return page.render(**context(res, cites))


def render_file(json_path: Path, html_path: Path | None = None, *, allow_dirty: bool = False,
                base: Path | None = None) -> Path:
    """Verify the file's citations, stamp its revisions, rewrite it and write its page (default: beside it).
    ValueError where the file lacks keys the page reads (check_results); provenance.ProvenanceError on a dirty tree
    or a measurement made from one (unless allow_dirty), or when a cited file (relative paths under `base`, default
    the repository) is missing or no longer has the cited sha256."""
    json_path = Path(json_path)
    res = read_json(json_path)
    check_results(res, str(json_path))
    revision = provenance.check_tree(allow_dirty, "a rendered page", res, str(json_path))
    cites = citations(res, base)
    if bad := [c["problem"] for c in cites["items"] if not c["verified"]]:
        raise provenance.ProvenanceError(f"{json_path}: the best configuration's source changed: {'; '.join(bad)}. "
                                         "Measure the peer benchmark again against the published wave 8.12 results "
                                         "(make peer-bench)")
    res.update(measured_at_revision=measured_revision(res), rendered_at_revision=revision)
    write_json(json_path, res)
    return write_text(Path(html_path) if html_path else json_path.with_suffix(".html"), render(res, cites))
