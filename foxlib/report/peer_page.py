"""reports/<device>/peer-benchmark.html: the peer benchmark's page (benchmarks/peer_tft.py writes the JSON),
rendered through templates/peer-benchmark.html.j2. The first screen answers in numbers: each foxlib row's peak
and step time over the peer's at the same configuration (foxlib/report/peer_figures.py), the rows not run and
why, the device and the revisions.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from foxlib.core import provenance
from foxlib.core.config import MB
from foxlib.core.results import measured_revision, read_json, write_json
from foxlib.harness.step_options import StepOptions
from foxlib.report import peer_figures as fig

MEMORY_CATEGORIES = {"parameters": "parameters", "gradients": "gradients", "optimizer_state": "optimizer state",
                     "activations": "activations", "forward_peak": "forward peak", "peak": "step peak"}


def citations(res: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """What the page says of depends_on: each citation with `verified` (the published file is the one read)."""
    cited = res["depends_on"]
    items = []
    for c in cited:
        try:
            provenance.verify([c], base)
            items.append({**c, "verified": True, "problem": ""})
        except provenance.ProvenanceError as exc:
            items.append({**c, "verified": False, "problem": str(exc)})
    return {"state": "cited" if cited else "none", "items": items}


def relative_source(text: str) -> str:
    """best.source names an absolute path where the run read reports outside the repository (--reports-dir):
    shown from reports/ on."""
    return re.sub(r"(?:/[^\s/()]+)+?/(reports/)", r"\1", text or "")


def best_step(res: dict[str, Any]) -> str:
    """How the best configuration's step ran: its CUDA graph (applied, or not on this device) and its step
    options (foxlib.harness.step_options); "" for a plain eager step."""
    best = res["best"]
    row = res["variants"].get("foxlib_best") or {}
    parts = []
    if best["cuda_graph"]:
        parts.append("the whole step as one CUDA graph" if row.get("cuda_graph")
                     else "its CUDA graph not applied on this device (eager steps)")
    options = StepOptions.from_dict(best["options"]).label()
    if options:
        parts.append(f"step options: {options}")
    return "; ".join(parts)


def _answer_row(res: dict[str, Any], name: str) -> dict[str, Any]:
    variants = res.get("variants", {})
    v, peer = variants.get(name), variants.get(fig.PEER)
    row: dict[str, Any] = {"name": name, "label": fig.label(res, name), "measured": v is not None,
                           "target": fig.TARGETS.get(name)}
    if v is None or peer is None:
        return {**row, "reason": next((m["reason"] for m in fig.missing_rows(res) if m["name"] == name), "")}
    r = res["ratios"].get(name) or {}
    i = r.get("step_time_interval")
    tm = v.get("timing") or {}
    row.update(precision=v.get("precision", "?"), peak_ratio=r.get("peak"),
               peak_mb=fig.POOL_UNSEEN if fig.peak_unseen(res, name) else fig.mb(v["memory"]["peak"]),
               step_ms=fig.ms(tm.get("median_s")), step_ratio=r.get("step_time"), interval=i,
               compile_s=(v.get("compile") or {}).get("compile_s"))
    if row["target"] is not None:
        limit = row["target"]
        row["peak_passed"] = r.get("peak") is not None and r["peak"] <= limit
        row["step_passed"] = r.get("step_time") is not None and r["step_time"] <= limit
        row["step_within_noise"] = bool(i and i["low"] <= limit <= i["high"])
    return row


def context(res: dict[str, Any], cites: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the template shows, as plain values (no HTML)."""
    variants = res.get("variants", {})
    peer = variants.get(fig.PEER)
    checks = res.get("checks") or []
    passed = all(c["passed"] for c in checks) if checks else None
    measured, rendered = measured_revision(res), res.get("rendered_at_revision")
    best = res.get("best") or {}
    return {
        "title": res.get("title", "Peer benchmark"),
        "device": res.get("device") or {},
        "generated_at": res.get("generated_at", ""),
        "measured_at": measured or "unknown", "rendered_at": rendered or "not rendered yet",
        "dirty": not all(provenance.is_clean(r) for r in (measured, rendered) if r),
        "verdict": {True: "all targets met", False: "targets not all met", None: "no checks"}[passed],
        "verdict_class": {True: "pass", False: "fail", None: "none"}[passed],
        "peer": None if peer is None else {
            "label": fig.label(res, fig.PEER), "precision": peer.get("precision", "?"),
            "peak_mb": fig.mb(peer["memory"]["peak"]), "step_ms": fig.ms((peer.get("timing") or {}).get("median_s"))},
        "answer": [_answer_row(res, n) for n in fig.FOXLIB_ROWS],
        "peer_defaults": [_answer_row(res, n) for n in fig.PF_ROWS if n != fig.PEER],
        "peers": fig.peers_table(res),
        "missing": fig.missing_rows(res),
        "rounds": len(((peer or {}).get("timing") or {}).get("samples_s") or []),
        "same_configuration": res.get("same_configuration", ""),
        "rows": fig.table_rows(res),
        "fast_path": fig.fast_path_lines(res),
        "checks": checks,
        "memory_columns": list(MEMORY_CATEGORIES.values()),
        "memory": [{"label": fig.label(res, n), "cells": [fig.memory_mb(v["memory"], k) for k in MEMORY_CATEGORIES]}
                   for n, v in variants.items()],
        "peak_method": (peer or {}).get("memory", {}).get("peak_method", ""),
        "timing": [{"label": fig.label(res, n), "median": fig.ms(v["timing"]["median_s"]),
                    "iqr": fig.ms(v["timing"]["iqr_s"]), "repeats": len(v["timing"].get("samples_s") or []),
                    "noisy": "yes" if v["timing"].get("noisy") else "no"}
                   for n, v in variants.items() if v.get("timing")],
        "compile": {**res["compile"],  # setting, enabled, reason, backend, explain
                    "rows": [{"label": fig.label(res, n), **variants[n]["compile"]}
                             for n in fig.COMPILED if n in variants and variants[n].get("compile")]},
        "notes": (res.get("notes") or []) + [fig.peak_unseen_note(res, n) for n in variants if fig.peak_unseen(res, n)],
        "blocks": [{"label": fig.label(res, n), "items": list((v.get("by_block") or {}).items())}
                   for n, v in variants.items()],
        "config": list((res.get("config") or {}).items()),
        "best": {"precision": best.get("precision"), "overrides": json.dumps(best.get("tft_overrides", {})),
                 "step": best_step(res), "source": relative_source(str(best.get("source", "")))},
        "citations": cites if cites is not None else citations(res),
        "environment": res.get("environment") or {},
        "architectures": [{"label": fig.label(res, n), "items": list(v["architecture"].items())}
                          for n, v in variants.items() if n in fig.OTHER_PEERS and v.get("architecture")],
        "MB": MB,
    }


def render(res: dict[str, Any], cites: dict[str, Any] | None = None) -> str:
    """The page's HTML for a results dict (nothing written)."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("peer-benchmark.html.j2").render(**context(res, cites))


def render_file(json_path: Path, html_path: Path | None = None, *, allow_dirty: bool = False,
                base: Path | None = None) -> Path:
    """Verify the file's citations, stamp its revisions, rewrite it and write its page (default: beside it).
    provenance.ProvenanceError on a dirty tree or a measurement made from one (unless allow_dirty), or when a cited file
    (relative paths under `base`, default the repository) is missing or no longer has the cited sha256."""
    json_path = Path(json_path)
    res = read_json(json_path)
    revision = provenance.check_tree(allow_dirty, "a rendered page")
    provenance.check_measured(measured_revision(res), allow_dirty, str(json_path))
    cites = citations(res, base)
    bad = [c["problem"] for c in cites["items"] if not c["verified"]]
    if bad:
        raise provenance.ProvenanceError(f"{json_path}: the best configuration's source changed: {'; '.join(bad)}. Measure the "
                            "peer benchmark again against the published wave 8.12 results (make peer-bench)")
    res["measured_at_revision"] = measured_revision(res)
    res["rendered_at_revision"] = revision
    write_json(json_path, res)
    html_path = Path(html_path) if html_path else json_path.with_suffix(".html")
    html_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = html_path.with_name(f".{html_path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(render(res, cites))
        tmp.replace(html_path)
    finally:
        tmp.unlink(missing_ok=True)
    return html_path
