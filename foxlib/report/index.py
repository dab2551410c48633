"""reports/index.html and `python -m foxlib waves`: every wave's canonical verdict on each device.

Only canonical reports (`reports/<device>/wave-<N>/`, made with the defaults) count: a variant
(`reports/<device>/variants/wave-<N>-<name>/`) never enters the ledger, the table or the critical
path; it is listed on its own."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from foxlib.core import config, results, seed_claims
from foxlib.core.card_classes import classes_for, nearest_class
from foxlib.core.figures import display
from foxlib.core.critical_path import DEPLOYMENT, WAVES
from foxlib.report.page_template import template
from foxlib.report.reading import format_value

PEER_PAGES = ("peer-benchmark*.html", "throughput-benchmark*.html")  # the benchmarks' pages, per device folder


def _files(reports_dir: Path, *patterns: str) -> list[Path]:
    """Every file under reports_dir matching one of `patterns` (sorted, pattern by pattern), hidden folders left out."""
    return [p for pattern in patterns for p in sorted(reports_dir.glob(pattern))
            if not any(part.startswith(".") for part in p.relative_to(reports_dir).parts)]


def _read(reports_dir: Path, pattern: str) -> list[tuple[Path, dict[str, Any]]]:
    """(path, results) of every readable results.json of a wave under reports_dir matching `pattern`."""
    found = []
    for path in _files(reports_dir, f"{pattern}/{results.RESULTS_FILE}"):
        try:
            res = results.read_json(path)
        except ValueError:
            continue
        if res.get("wave") in WAVES:
            found.append((path, {**res, "_dir": path.parent.relative_to(reports_dir).as_posix()}))
    return found


def canonical_pages(reports_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(path, JSON) of every canonical page's results: reports_dir/<device>/wave-<N>/results.json and the peer
    benchmark's JSON (variants and hidden work folders left out)."""
    return [(p, results.read_json(p)) for p in _files(reports_dir, f"*/wave-*/{results.RESULTS_FILE}",
                                                       "*/peer-benchmark*.json")]


def collect(reports_dir: Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """{wave: {device: results}} for every report under reports_dir/<device>/wave-<N>/."""
    found: dict[str, dict[str, dict[str, Any]]] = {w: {} for w in WAVES}
    for path, res in _read(Path(reports_dir or config.REPORTS_DIR), "*/wave-*"):
        found[res["wave"]][path.parent.parent.name] = res
    return found


def collect_variants(reports_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every variant report's results, with "_dir" (relative to reports_dir) and "_device"."""
    return [{**res, "_device": path.parent.parent.parent.name}
            for path, res in _read(Path(reports_dir or config.REPORTS_DIR), "*/variants/wave-*")]


def devices(found: dict[str, dict[str, Any]]) -> list[str]:
    return sorted({d for per in found.values() for d in per}, key=lambda d: (d == "cpu", d))  # GPUs first


def status_lines(reports_dir: Path | None = None) -> list[str]:
    found = collect(reports_dir)
    devs = devices(found)
    lines = []
    for wave in WAVES.values():
        state = "built" if wave.built else "not built yet"
        per = ", ".join(f"{d}: {found[wave.id][d]['verdict']}" for d in devs if d in found[wave.id]) or "no report yet"
        lines.append(f"{wave.id}  {wave.title:<28} [{state}]  {per}")
    dep = ", ".join(f"{d}: {found['8.13'].get(d, {}).get('verdict', 'not run')}" for d in devs)  # 8.14 follows 8.13
    lines.append(f"{DEPLOYMENT}  {'Ensemble deployment':<28} [follows 8.13]  " + (dep or "no report yet"))
    if variants := collect_variants(reports_dir):
        lines.append("variants (other parameters than the defaults; never on the critical path):")
        lines += [f"  {v['wave']}  {v['_device']}: {v['verdict']}  {v['_dir']}" for v in variants]
    return lines


def margin(check: dict[str, Any]) -> str:
    """A check as a reader needs it: measured against the limit, and by how much it passes or fails."""
    unit, measured, limit = check.get("unit", ""), check.get("measured"), check.get("limit")
    result = "PASS" if check.get("passed") else "FAIL"
    if measured is None or limit is None:
        return f"{check['name']}: {result}"
    off = f", {abs(100 * (measured - limit) / limit):.1f} % {'over' if measured > limit else 'under'}" if limit else ""
    return f"{check['name']}: {format_value(measured, unit)} vs limit {format_value(limit, unit)} ({result}{off})"


def headline(res: dict[str, Any]) -> list[str]:
    """At most three checks, the failing ones first, each with its margin."""
    checks = sorted(res.get("checks", []), key=lambda c: c.get("passed", False))
    return [margin(c) for c in checks[:3]]


def tightest(res: dict[str, Any]) -> str:
    """The smallest margin among a report's byte checks, as a reader needs it: what is left under the limit
    (or how far over), and of which check."""
    byte_checks = [c for c in res.get("checks", []) if c.get("unit") == "bytes" and c.get("limit")]
    if not byte_checks:
        return ""
    c = min(byte_checks, key=lambda c: (c["limit"] - c["measured"]) / c["limit"])
    left = c["limit"] - c["measured"]
    return (f"margin {display(left, 'bytes')} ({100 * left / c['limit']:.0f} % of {display(c['limit'], 'bytes')}) "
            f"at its tightest check, {c['name']}" if left >= 0 else
            f"{display(-left, 'bytes')} over at {c['name']}")


def answers_for(res: dict[str, Any], device_type: str) -> str:
    """The card class a report answers for: the one it names (wave 8.13's card_class), else its device's own
    (foxlib.core.card_classes.nearest_class: a GPU older than every class, the fp16 class): a canonical run is made
    for the class of the device it ran on."""
    named = (res.get("card_class") or {}).get("name")
    return named or nearest_class(res["device"].get("capability"), device_type).name


def answer(found: dict[str, dict[str, Any]], devs: list[str], variants: list[dict[str, Any]]) -> list[str]:
    """The page's first lines: per class of card (foxlib.core.card_classes), GO or NO-GO for deployment (8.14,
    from wave 8.13's run for that class: the device's canonical report for its own class, a card_class variant, one
    that differs in card_class alone, for another), the configuration to ship (wave 8.12's for the class) and the
    margin."""
    lines = []
    for d in devs:
        device_type = "cpu" if d == "cpu" else "cuda"  # reports/<device>/: cpu, or a GPU's short name
        canonical = found.get("8.13", {}).get(d)
        runs = {answers_for(canonical, device_type): canonical} if canonical else {}
        for v in variants:
            differs = set((v.get("run") or {}).get("differs") or {})
            if v["wave"] == "8.13" and v["_device"] == d and differs == {"card_class"}:
                runs.setdefault(answers_for(v, device_type), v)
        per_class = (found.get("8.12", {}).get(d) or {}).get("recommended_per_class") or {}
        for c in classes_for(device_type):
            res, rec = runs.get(c.name), per_class.get(c.name) or {}
            ship = f"ship {rec['strategy']}" if rec.get("strategy") else "8.12 has no recommendation for it"
            if res is None:
                lines.append(f"{c.title}: no verdict — {ship}, but wave 8.13 has not validated it under a 4 GiB cap "
                             f"on {d} yet.")
                continue
            limits = ", ".join(x for x in ("no bf16" if "bf16" not in c.precisions else "",
                                           "TF32 off" if not c.tf32 and c.device_type == "cuda" else "") if x)
            where = (f"emulated on the {res['device']['name']} under a 4 GiB cap ({limits}; speed and CUDA context "
                     "are that GPU's)" if (res.get("card_class") or {}).get("emulated")
                     else f"validated on the {res['device']['name']}")
            lines.append(f"{c.title}: deployment (8.14) {res['verdict']} — {ship}; {tightest(res)}; {where}.")
    return lines


def short_revision(rev: str) -> str:
    """A full 40-hex git revision as its first 7 characters, as the index shows every revision;
    anything else (a short revision already, "?") as it is."""
    rev = str(rev)
    return rev[:7] if len(rev) == 40 and all(c in "0123456789abcdef" for c in rev.lower()) else rev


def _cell(res: dict[str, Any] | None, md: str = "report.md", headline_lines: bool = True) -> dict[str, Any] | None:
    """One report's cell on the critical path: verdict, links, headline, device and revisions."""
    if res is None:
        return None
    return {"verdict": res["verdict"], "link": f"{res['_dir']}/report.html", "md": f"{res['_dir']}/{md}",
            "headline": headline(res) if headline_lines else [], "device_name": res["device"]["name"],
            "measured_at_revision": short_revision(res.get("measured_at_revision", "?")),
            "rendered_at_revision": short_revision(res.get("rendered_at_revision", "?"))}


def write_index(reports_dir: Path | None = None) -> Path:
    """reports/index.html from the canonical reports: the answer, the seed's claims ledger, the critical path."""
    from foxlib.report import baselines, ledger
    reports_dir = Path(reports_dir or config.REPORTS_DIR)
    found = collect(reports_dir)
    variants = collect_variants(reports_dir)
    devs = devices(found)
    waves = [{"id": w.id, "title": w.title, "question": w.question,
              "cells": {d: _cell(found[w.id].get(d)) for d in devs}} for w in WAVES.values()]
    waves.append({"id": DEPLOYMENT, "title": "Ensemble deployment", "question": "GO when 8.13 is GO on that device",
                  "cells": {d: _cell(found["8.13"].get(d), "deployment.md", False) for d in devs}})
    peer = {d: pages for d in devs if (pages := [{"href": f"{d}/{p.name}", "name": f"{d}: {p.stem}"}
                                                  for p in _files(reports_dir / d, *PEER_PAGES)])}
    page = template("index.html.j2", autoescape=True).render(
        answer=answer(found, devs, variants), ledger=ledger.rows(found, devs), speed_reading=seed_claims.SPEED_READING,
        devices=devs, waves=waves, baselines=baselines.rows(reports_dir), deployment=DEPLOYMENT, peer=peer,
        variants=[{"link": f"{v['_dir']}/report.html", "name": v["_dir"], "device": v["_device"], "verdict": v["verdict"],
                   "differs": ", ".join(f"{k} = {val.get('value')!r}"
                                        for k, val in ((v.get("run") or {}).get("differs") or {}).items())}
                  for v in variants])
    return results.write_text(reports_dir / "index.html", page)  # two runs finishing together: each writes whole
