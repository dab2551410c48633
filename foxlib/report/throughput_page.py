"""The throughput benchmark's page (benchmarks/throughput_tft.py's JSON -> Markdown through
templates/throughput.md.j2): the answer first, measured and published figures labelled as such."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from foxlib.core import provenance
from foxlib.core.results import read_json, write_text
from foxlib.report.page_template import template


def device(data: dict[str, Any]) -> str:
    return data["device"].get("name") or data["device"].get("type")


def render(data: dict[str, Any], rendered_at_revision: str | None = None) -> str:
    rows = data["rows"]
    if not rows:
        raise ValueError("the throughput measurement has no rows: nothing ran")
    best = max(rows, key=lambda r: r["items_per_s"])
    return template("throughput.md.j2", undefined=jinja2.StrictUndefined, keep_trailing_newline=True).render(
        **{k: v for k, v in data.items() if k != "device"}, best=best, device=device(data),
        rendered_at_revision=rendered_at_revision or provenance.git_revision())


def write(json_path: str | Path, md_path: str | Path, html_path: str | Path | None = None, *,
          allow_dirty: bool = False) -> Path:
    """The page as Markdown at md_path and, with html_path, as HTML (the same text through mistune,
    the Markdown renderer nbconvert uses). ProvenanceError, unless allow_dirty, when this tree has
    uncommitted changes or the measurement names no clean commit of this repository."""
    import mistune

    data = read_json(json_path)
    revision = provenance.check_tree(allow_dirty, "a rendered page", data, str(json_path))
    md = render(data, revision)
    write_text(md_path, md)
    if html_path:  # no block tags in it: trimming them changes nothing
        write_text(html_path, template("throughput.html.j2").render(body=mistune.html(md), device=device(data)))
    return Path(md_path)


if __name__ == "__main__":  # python -m foxlib.report.throughput_page <json> <md> [<html>]
    import sys

    from foxlib.core.config import env_flag
    try:
        print(write(*sys.argv[1:4], allow_dirty=env_flag("FOXLIB_ALLOW_DIRTY")))
    except provenance.ProvenanceError as exc:
        sys.exit(f"throughput page: {exc}")
