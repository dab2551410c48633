"""From an executed notebook to report.html (self-contained, no code) and report.md (+ figures)."""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbconvert import HTMLExporter, MarkdownExporter

from foxlib.report import captioned, reading

FIGURES_DIR = "figures"

# JupyterLab's stylesheet (nbconvert's "lab" template) right-aligns every cell of an output table with
# ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td" (specificity 0,2,1), which beats the reading
# stylesheet's ".jp-RenderedHTMLCommon table td" (0,1,2): text columns and their headers came out
# right-aligned. These rules add the table element to the lab's selector (0,2,2: text left) and the
# numeric class reading.mark_numeric_columns sets (0,3,2: numbers right); an inline style on a row
# (pandas' <tr style="text-align: right;"> in the header) reaches a cell only where no rule does.
ALIGN_ID = "foxlib-table-align"
ALIGN_CSS = (f'<style id="{ALIGN_ID}">\n'
             ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table td,\n"
             ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table th { text-align: left; }\n"
             f":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table td.{reading.NUMERIC_CLASS},\n"
             f":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table th.{reading.NUMERIC_CLASS} "
             "{ text-align: right; }\n</style>")


def align_tables(page_html: str) -> str:
    """`page_html` (already through reading.style_report) with ALIGN_CSS in its <head>, once."""
    if f'id="{ALIGN_ID}"' in page_html:
        return page_html
    if "</head>" in page_html:
        return page_html.replace("</head>", ALIGN_CSS + "</head>", 1)
    return ALIGN_CSS + page_html


def _for_readers(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what a reader should not see: stderr (progress bars, warnings) and empty code cells."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    return nb


def render(executed: Path, out_dir: Path, title: str = "foxlib report") -> tuple[Path, Path]:
    """Write report.html and report.md (figures under figures/) from the executed notebook."""
    nb = _for_readers(nbformat.read(executed, as_version=4))
    html_exporter = HTMLExporter(template_name="lab", exclude_input=True,
                                 exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = html_exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    body = align_tables(reading.style_report(body))  # text columns left, numbers right, tables within the window
    html_path = out_dir / "report.html"
    html_path.write_text(body)

    md_exporter = MarkdownExporter(exclude_input=True)
    body, resources = md_exporter.from_notebook_node(captioned.for_markdown(nb),
                                                     resources={"output_files_dir": FIGURES_DIR})
    for name, data in resources.get("outputs", {}).items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    md_path = out_dir / "report.md"
    md_path.write_text(body)
    return html_path, md_path
