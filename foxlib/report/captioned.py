"""Charts with alt text and a caption, in the notebook, in report.html and in report.md.

`show_figure` displays a matplotlib figure as one output: text/html (a <figure> with the PNG inline, its alt
text and a <figcaption>: what HTML export and JupyterLab show), image/png (written to figures/ by nbconvert)
and text/plain (the caption), with the alt text and caption in its metadata under META. nbconvert's Markdown
export prefers text/html, which would leave the PNG in figures/ unreferenced: `for_markdown` rewrites each
such output to `![alt](figures/<name>.png)` + the caption, naming the extracted file.
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
from typing import Any

import nbformat

from foxlib.core.figures import slug

META = "foxlib_figure"
FIGURES_DIR = "figures"  # the folder beside report.md (foxlib.report.render writes it)
DPI = 110
# alt text an exporter writes into an <img> that has none, describing nothing: nbconvert's HTMLExporter (7.x,
# exporters/html.py) writes this one into every <img> without alt (a bare matplotlib PNG) and warns "Alternative
# text is missing"
PLACEHOLDER_ALTS = ("No description has been provided for this image",)


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes at DPI (tight bounding box)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def has_alt_text(alt: str | None) -> bool:
    """Whether `alt` says something: not missing, not blank, not an exporter's placeholder (PLACEHOLDER_ALTS, in any
    case). The browser check of a page (foxlib.report.browser) counts images by the same rule."""
    return isinstance(alt, str) and alt.strip().casefold() not in {"", *(p.casefold() for p in PLACEHOLDER_ALTS)}


def figure_html(png: bytes, alt: str, caption: str) -> str:
    """A self-contained <figure>: the PNG inline with its alt text, and a <figcaption>."""
    if not has_alt_text(alt):
        raise ValueError("a figure needs alt text: one or two sentences saying what the chart shows "
                         "(its axes, the marks and the values a reader should see)")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError("a figure needs a caption: what it shows and how to read it")
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure class="foxlib-figure" style="margin:1em 0">'
            f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" '
            f'style="max-width:100%;height:auto">'
            f'<figcaption style="font-size:0.95em;max-width:60em">{html.escape(caption)}</figcaption></figure>')


def bundle(png: bytes, alt: str, caption: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of the display_data output for one figure."""
    data = {"text/html": figure_html(png, alt, caption),
            "image/png": base64.b64encode(png).decode("ascii"),
            "text/plain": f"Figure: {caption}"}
    return data, {META: {"alt": alt, "caption": caption}}


def _axis(ax, which: str) -> str:
    label, scale = getattr(ax, f"get_{which}label")() or "unlabelled", getattr(ax, f"get_{which}scale")()
    return f"{which} axis {label}" + (f" ({scale} scale)" if scale != "linear" else "")


def describe(fig, max_items: int = 12) -> str:
    """Alt text read from a matplotlib figure: per chart its title, axes (and any log scale), its named series
    and each bar's label and value."""
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    charts = []
    for ax in fig.get_axes():
        if not ax.get_visible() or not ax.has_data():
            continue
        parts = [f"chart \"{ax.get_title()}\"" if ax.get_title() else "chart",
                 _axis(ax, "x") + ", " + _axis(ax, "y")]
        named = [a.get_label() for a in list(ax.get_lines()) + list(ax.collections)
                 if not str(a.get_label()).startswith("_")]
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        for c in bars:
            named = [n for n in named if n != c.get_label()]
            ticks = [t.get_text() for t in (ax.get_xticklabels() if c.orientation == "vertical"
                                             else ax.get_yticklabels())]
            values = [(r.get_height() if c.orientation == "vertical" else r.get_width()) for r in c.patches]
            names = ticks if len(ticks) == len(values) and all(ticks) else [str(i + 1) for i in range(len(values))]
            items = [f"{n} {v:,.4g}" for n, v in zip(names, values)][:max_items]
            label = "" if str(c.get_label()).startswith("_") else f"{c.get_label()}: "
            parts.append(f"bars {label}" + ", ".join(items) + ("…" if len(values) > max_items else ""))
        if named:
            parts.append("series: " + ", ".join(named[:max_items]))
        points = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
        if points and not bars:
            parts.append(f"{points} points")
        charts.append("; ".join(parts))
    if not charts:
        return "an empty figure"
    return ("A figure of " + str(len(charts)) + " charts. " if len(charts) > 1 else "A ") + " | ".join(charts) + "."


def show_figure(fig, caption: str, alt: str | None = None) -> None:
    """Display a matplotlib figure once, with a caption (what it shows, how to read it) and alt text (default:
    describe(fig)), and close it."""
    import matplotlib.pyplot as plt
    from IPython.display import display
    try:
        alt = alt if alt is not None else describe(fig)
        data, metadata = bundle(png_bytes(fig), alt, caption)
    finally:
        plt.close(fig)
    display(data, metadata=metadata, raw=True)


def for_markdown(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of `nb` for MarkdownExporter(output_files_dir=FIGURES_DIR): every show_figure output becomes
    text/markdown (the image with its alt text, then the caption in italics) with its PNG, named in its "filename"
    metadata (a slug of the caption + a hash of the image, unique in the notebook). An output with both HTML and its
    own Markdown (reading's blocks) keeps the Markdown; other outputs are untouched."""
    nb = nbformat.from_dict(nb)
    used: set[str] = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/html" in data and "text/markdown" in data and META not in out.get("metadata", {}):
                del data["text/html"]  # an output with its own Markdown (foxlib.report.reading's blocks) uses it
            info = out.get("metadata", {}).get(META)
            if out.get("output_type") not in ("display_data", "execute_result") or not info or "image/png" not in data:
                continue
            digest = hashlib.sha1(data["image/png"].encode("ascii")).hexdigest()[:8]
            # the caption's slug (40 characters at most) and the image's hash
            first = f"{slug(info['caption'])[:40].strip('-') or 'figure'}-{digest}"
            name, k = first, 1
            while name in used:
                k += 1
                name = f"{first}-{k}"
            used.add(name)
            out["metadata"]["filename"] = f"{name}.png"
            alt = info["alt"].replace("[", "(").replace("]", ")").replace("\n", " ")
            md = f"![{alt}]({FIGURES_DIR}/{name}.png)\n\n*Figure: {info['caption'].strip()}*\n"
            out["data"] = {"text/markdown": md, "image/png": data["image/png"]}
    return nb

