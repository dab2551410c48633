"""reports/index.html and `python -m foxlib waves`: every wave's canonical verdict on each device.

Only canonical reports (`reports/<device>/wave-<N>/`, made with the defaults) count: a variant
(`reports/<device>/variants/wave-<N>-<name>/`) never enters the table or the critical path;
`python -m foxlib waves` lists variants on their own lines."""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from foxlib import config, results
from foxlib.waves import DEPLOYMENT, WAVES

PEER_PAGES = "peer-benchmark*.html"  # benchmarks/peer_tft.py's pages, per device folder


def collect(reports_dir: Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """{wave: {device: results}} for every report under reports_dir/<device>/wave-<N>/."""
    reports_dir = Path(reports_dir or config.REPORTS_DIR)
    found: dict[str, dict[str, dict[str, Any]]] = {w: {} for w in WAVES}
    for path in sorted(reports_dir.glob(f"*/wave-*/{results.RESULTS_FILE}")):
        try:
            res = results.read_json(path)
        except ValueError:
            continue
        wave, device = res.get("wave"), path.parent.parent.name
        if wave in found:
            found[wave][device] = {**res, "_dir": path.parent.relative_to(reports_dir).as_posix()}
    return found


def collect_variants(reports_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every variant report's results, with "_dir" (relative to reports_dir) and "_device"."""
    reports_dir = Path(reports_dir or config.REPORTS_DIR)
    out = []
    for path in sorted(reports_dir.glob(f"*/variants/wave-*/{results.RESULTS_FILE}")):
        try:
            res = results.read_json(path)
        except ValueError:
            continue
        if res.get("wave") in WAVES:
            out.append({**res, "_dir": path.parent.relative_to(reports_dir).as_posix(),
                        "_device": path.parent.parent.parent.name})
    return out


def devices(found: dict[str, dict[str, Any]]) -> list[str]:
    names = sorted({d for per in found.values() for d in per})
    return sorted(names, key=lambda d: (d == "cpu", d))  # GPUs first


def deployment_verdicts(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    """8.14 (ensemble deployment) follows 8.13 on each device."""
    return {d: found.get("8.13", {}).get(d, {}).get("verdict", "not run") for d in devices(found)}


def status_lines(reports_dir: Path | None = None) -> list[str]:
    found = collect(reports_dir)
    devs = devices(found)
    lines = []
    for wave in WAVES.values():
        state = "built" if wave.built else "not built yet"
        per = ", ".join(f"{d}: {found[wave.id][d]['verdict']}" for d in devs if d in found[wave.id]) or "no report yet"
        lines.append(f"{wave.id}  {wave.title:<28} [{state}]  {per}")
    dep = deployment_verdicts(found)
    lines.append(f"{DEPLOYMENT}  {'Ensemble deployment':<28} [follows 8.13]  "
                 + (", ".join(f"{d}: {v}" for d, v in dep.items()) or "no report yet"))
    variants = collect_variants(reports_dir)
    if variants:
        lines.append("variants (other parameters than the defaults; never on the critical path):")
        lines += [f"  {v['wave']}  {v['_device']}: {v['verdict']}  {v['_dir']}" for v in variants]
    return lines


def _badge(verdict: str) -> str:
    colour = {"GO": "#1a7f37", "NO-GO": "#cf222e"}.get(verdict, "#6e7781")
    return f'<span class="verdict" style="color:#fff;background:{colour};padding:2px 8px;border-radius:4px">{html.escape(verdict)}</span>'


def write_index(reports_dir: Path | None = None) -> Path:
    reports_dir = Path(reports_dir or config.REPORTS_DIR)
    found = collect(reports_dir)
    devs = devices(found)
    head = "".join(f"<th>{html.escape(d)}</th>" for d in devs)
    rows = []
    for wave in WAVES.values():
        cells = []
        for d in devs:
            res = found[wave.id].get(d)
            if res is None:
                cells.append("<td>—</td>")
            else:
                link = f"{res['_dir']}/report.html"
                cells.append(f'<td>{_badge(res["verdict"])} <a href="{html.escape(link)}">report</a> · '
                             f'<a href="{html.escape(res["_dir"])}/report.md">md</a><br>'
                             f'<small>{html.escape(res["device"]["name"])}<br>{html.escape(res["generated_at"])}</small></td>')
        rows.append(f"<tr><th>{wave.id}</th><td>{html.escape(wave.title)}<br><small>{html.escape(wave.question)}</small></td>"
                    + "".join(cells) + "</tr>")
    dep = deployment_verdicts(found)
    rows.append(f"<tr><th>{DEPLOYMENT}</th><td>Ensemble deployment<br><small>GO when 8.13 is GO on that device</small></td>"
                + "".join(f"<td>{_badge(dep[d])}</td>" for d in devs) + "</tr>")
    peer = {d: sorted((reports_dir / d).glob(PEER_PAGES)) for d in devs}
    if any(peer.values()):
        rows.append("<tr><th>peer</th><td>foxlib's TFT against pytorch-forecasting's<br><small>same configuration, "
                    "alternating in one run (benchmarks/peer_tft.py)</small></td>"
                    + "".join("<td>" + ("<br>".join(f'<a href="{d}/{p.name}">{html.escape(p.stem)}</a>' for p in peer[d])
                                        or "—") + "</td>" for d in devs) + "</tr>")
    steps = [(w, {d: found[w].get(d, {}).get("verdict", "—") for d in devs}) for w in WAVES] + [(DEPLOYMENT, dep)]
    path_items = " → ".join(f"{w} " + "/".join(_badge(v[d]) for d in devs) for w, v in steps)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>foxlib reports</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;width:100%}}td,th{{border:1px solid #d0d7de;padding:8px;text-align:left;vertical-align:top}}</style>
</head><body>
<h1>foxlib — the ensemble's memory workbook</h1>
<p>Critical path (verdicts per device: {html.escape(", ".join(devs)) or "none yet"}):<br>{path_items}</p>
<table><tr><th>wave</th><th>question</th>{head}</tr>
{''.join(rows)}
</table>
<p><small>Memory in MB = 10^6 bytes. Each report says what it measured and how. Regenerate with <code>make reports</code>.</small></p>
</body></html>
"""
    out = reports_dir / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".index.html.{os.getpid()}.tmp")  # two runs finishing together: each writes whole
    try:
        tmp.write_text(page)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out
