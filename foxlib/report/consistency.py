"""Do the committed reports agree with each other? One figure, one value; citations that hold.

Checked over every canonical report of each device (`reports/<device>/wave-<N>/` and the peer
benchmark's pages; variants are not compared):
- a figure key (foxlib.core.figures) listed by several reports of one device has one value;
- each report's page (report.md) shows each of its memory figures as `figures.display` writes it (MB, one
  decimal; other units are formatted by their tables);
- each wave page shows each of its checks' measured values as `reading.format_value` writes it (the answer
  sentence, the banner, the checks table and the index write them so);
- every dependency citation ({path, revision, sha256}) matches the published file;
- every report names a clean measured-at and rendered-at revision.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from foxlib.core import config
from foxlib.core.figures import display
from foxlib.core.provenance import Citation, ProvenanceError, is_clean, verify
from foxlib.report.index import canonical_pages
from foxlib.report.reading import format_value


def problems(reports_dir: Path | None = None) -> list[str]:
    """Every disagreement found, one line each; [] when the reports agree."""
    reports_dir = Path(reports_dir or config.REPORTS_DIR).resolve()
    base = reports_dir.parent
    out: list[str] = []
    seen: dict[tuple[str, str], tuple[Any, Path]] = {}
    for path, res in canonical_pages(reports_dir):
        rel = path.relative_to(base)
        device = path.relative_to(reports_dir).parts[0]
        out += [f"{rel}: {k} is {res.get(k)!r}, not a clean commit"
                for k in ("measured_at_revision", "rendered_at_revision") if not is_clean(res.get(k))]
        for c in map(Citation.from_dict, res.get("depends_on") or []):
            try:
                verify([c], base)  # the file exists and has the cited sha256
            except ProvenanceError as exc:
                out.append(f"{rel}: {exc}")  # "the cited file ... is missing" or "... changed since it was used"
        page = path.parent / "report.md" if path.name == "results.json" else path.with_suffix(".md")
        text = page.read_text() if page.is_file() else None
        if text is not None and path.name == "results.json":
            out += [f"{rel}: check {c['name']!r} = {shown} is not shown on {page.relative_to(base)}"
                    for c in res.get("checks") or [] if (shown := format_value(c["measured"], c["unit"])) not in text]
        for key, fig in (res.get("figures") or {}).items():
            if not (isinstance(fig, dict) and "value" in fig and "unit" in fig):
                out.append(f"{rel}: figure {key} is {fig!r}, not {{value, unit}} (foxlib.core.figures)")
                continue
            value, unit = fig["value"], fig["unit"]
            other_value, other = seen.setdefault((device, key), (value, path))  # the first report listing it
            if other_value != value:  # intervals come with their value
                out.append(f"{key} ({device}): {display(value, unit)} in {rel} but {display(other_value, unit)} in "
                           f"{other.relative_to(base)}")
            # a memory figure as a page's table shows it: the number (its unit is in the column's header)
            if text is not None and value is not None and unit == "bytes" and \
                    display(value, unit).removesuffix(" MB") not in text:
                out.append(f"{rel}: figure {key} = {display(value, unit)} is not shown on {page.relative_to(base)}")
    return out


if __name__ == "__main__":
    import sys
    found = problems()
    print("\n".join(found) or "the committed reports agree")
    sys.exit(1 if found else 0)
