"""Reading aids every report carries, and the one call at each end of a report that assembles them:
opening() (the link back to reports/index.html, the answer first in numbers: each check's figure,
its margin against the limit, the verdict and what would flip it, decided on the raw values of
results.json's "checks", and what a run changed from the defaults) and closing() (how to reproduce
the report, foxlib/report/reading_reproduce.py; the glossary, foxlib/report/reading_glossary.py;
the link back). Each returns a Block (HTML and Markdown, foxlib/report/reading_block.py); the
tables' styling is foxlib/report/reading_tables.py; all of them are importable from here. MB = 10^6
bytes throughout (foxlib.core.config.MB)."""
from __future__ import annotations

import html
import os
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

from foxlib.core.config import MB
from foxlib.report.reading_block import Block
from foxlib.report.reading_glossary import GLOSSARY, glossary
from foxlib.report.reading_reproduce import (RUN_PARAMETERS, changed_parameters, commands, dataset_description,
                                             default_parameters, differences, reproduce, revisions)
from foxlib.report.reading_tables import (MAX_PAGE_WIDTH_PX, MISSING, NUMERIC_CLASS, REPORT_CSS, css_block, is_number,
                                          mark_numeric_columns, report_css, style_report)

__all__ = ["GLOSSARY", "MAX_PAGE_WIDTH_PX", "MINUS", "MISSING", "NUMERIC_CLASS", "REPORT_CSS", "RUN_PARAMETERS",
           "Block", "INDEX_FILE", "answer_block", "answer_first", "changed_parameters", "check_sentence", "closing",
           "commands", "css_block", "dataset_description", "default_parameters", "differences", "format_difference",
           "format_value", "glossary", "index_href", "index_link", "is_number", "mark_numeric_columns", "opening",
           "relative_to_index", "report_css", "reproduce", "revisions", "style_report"]

MINUS = "\u2212"  # the minus sign of a signed difference ("−9.4 MB")


# ----------------------------------------------------------------------------- the answer first

def format_value(value: float, unit: str) -> str:
    """A check's value as the sentence writes it: bytes in MB (10^6 bytes, one decimal, thousands
    separated), seconds in ms, ratios as 1.23x, percent with a space before %."""
    if unit == "bytes":
        return f"{value / MB:,.1f} MB"
    if unit in ("s", "seconds"):
        return f"{value * 1e3:,.1f} ms"
    if unit in ("ratio", "x"):
        return f"{value:,.2f}x"
    if unit in ("%", "pct", "percent"):
        return f"{value:,.1f} %"
    if unit == "fraction":
        return f"{value * 100:,.1f} %"
    return f"{value:,.4g} {unit}".rstrip()


def format_difference(delta: float, unit: str) -> str:
    """A signed difference in the check's unit: "+188.0 MB", "−9.4 MB" (a true minus sign)."""
    text = format_value(abs(delta), unit)
    return ("+" if delta >= 0 else MINUS) + text


def _field(check: Any, name: str) -> Any:
    return check[name] if isinstance(check, Mapping) else getattr(check, name)


def check_sentence(check: Any) -> str:
    """One check (a budgets.Check or results.json's dict) in words: figure, margin, verdict, flip.

    "TFT peak 1,009.4 MB, 0.9 % over 1,000.0 MB: NO-GO; it would pass at ≤ 1,000.0 MB (−9.4 MB)".
    A check passes when its value is at most its limit; where its recorded verdict disagrees
    with that (a check decided on more than one value, e.g. an interval's upper end), the
    sentence says so instead of inventing a threshold."""
    name, measured, limit = _field(check, "name"), float(_field(check, "measured")), float(_field(check, "limit"))
    unit, passed = _field(check, "unit"), bool(_field(check, "passed"))
    verdict = "GO" if passed else "NO-GO"
    figure = format_value(measured, unit)
    bound = format_value(limit, unit)
    if limit == 0:
        margin = "at the limit" if measured == 0 else f"{format_difference(measured, unit)} against a limit of {bound}"
    elif measured == limit:
        margin = f"exactly at the limit {bound}"
    else:
        pct = abs(measured - limit) / abs(limit) * 100
        margin = f"{pct:,.1f} % {'over' if measured > limit else 'under'} {bound}"
    head = f"{name} {figure}, {margin}: {verdict}"
    if passed != (measured <= limit):
        return (f"{head} (decided on more than this value, see the check's note; "
                f"the limit is {bound})")
    if passed:
        return f"{head}; it would fail above {bound} ({format_difference(limit - measured, unit)})"
    return f"{head}; it would pass at ≤ {bound} ({format_difference(limit - measured, unit)})"


def _answer_parts(checks: Iterable[Any], wave: str | None) -> tuple[str, str]:
    checks = list(checks)
    if not checks:
        raise ValueError("answer_first needs at least one check (results.json's \"checks\": name, measured, "
                         "limit, unit, passed)")
    passed = sum(bool(_field(c, "passed")) for c in checks)
    verdict = "GO" if passed == len(checks) else "NO-GO"
    lead = f"Wave {wave}: {verdict}" if wave else verdict
    return lead, f", {passed} of {len(checks)} checks passed. " + "; ".join(check_sentence(c) for c in checks) + "."


def answer_first(checks: Iterable[Any], wave: str | None = None) -> str:
    """A report's opening sentence: the verdict, how many checks passed, and each check's numbers
    with its margin and what would flip it (check_sentence), in the order given. Markdown."""
    lead, rest = _answer_parts(checks, wave)
    return f"**{lead}**{rest}"


def answer_block(checks: Iterable[Any], wave: str | None = None) -> Block:
    """answer_first as a Block (a paragraph, the verdict in bold)."""
    lead, rest = _answer_parts(checks, wave)
    return Block(f'<p class="foxlib-answer"><b>{html.escape(lead)}</b>{html.escape(rest)}</p>', f"**{lead}**{rest}")


# ----------------------------------------------------------------------------- back to the index

INDEX_FILE = "index.html"


def index_href(report_dir: str | Path) -> str:
    """The relative link from a report folder to reports/index.html: two levels up from
    reports/<device>/wave-<N>/ (or its .wave-<N>.partial working copy), three from a variant under
    reports/<device>/variants/wave-<N>-<name>/."""
    folder = Path(report_dir)
    up = 3 if folder.parent.name == "variants" else 2
    return str(PurePosixPath(*([".."] * up)) / INDEX_FILE)


def index_link(report_dir: str | Path) -> Block:
    """"← all reports": a link back to the index from the report written into `report_dir`."""
    href = index_href(report_dir)
    return Block(f'<p class="foxlib-back"><a href="{html.escape(href)}">← all reports (index)</a></p>',
                 f"[← all reports (index)]({href})")


def relative_to_index(report_dir: str | Path, reports_root: str | Path) -> str:
    """The same link computed from the real folders (a check of index_href for unusual layouts)."""
    return Path(os.path.relpath(Path(reports_root) / INDEX_FILE, Path(report_dir))).as_posix()


# ----------------------------------------------------------------------------- one call at each end

def opening(wave: str, checks: Iterable[Any], report_dir: str | Path = ".",
            parameters: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None) -> Block:
    """The first lines of a report: the link back to the index, the answer in numbers
    (answer_first) and, for a run whose parameters differ from the notebook's defaults, what differs."""
    back, answer = index_link(report_dir), answer_block(checks, wave)
    diff = differences(wave, parameters, defaults) if parameters else ""
    note_md = f"\n\n*Not the defaults: {diff}.*" if diff else ""
    note_html = f'<p class="foxlib-variant"><i>Not the defaults: {html.escape(diff)}.</i></p>' if diff else ""
    return Block(back.html + answer.html + note_html, back.markdown + "\n\n" + answer.markdown + note_md)


def closing(results: Mapping[str, Any], report_dir: str | Path = ".", defaults: Mapping[str, Any] | None = None,
            dataset: str | None = None) -> Block:
    """The last lines of a report: how to reproduce it, the glossary and the link back to the index,
    from results.json's dict (as notebook.finish returns it) and the report's folder."""
    parts = [reproduce(results, defaults, dataset), glossary(), index_link(report_dir)]
    return Block("".join(p.html for p in parts), "\n\n".join(p.markdown for p in parts))
