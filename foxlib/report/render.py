"""From an executed notebook to report.html (self-contained, no code) and report.md (+ figures). The pages made
from templates/ (the index, the benchmarks' pages) get theirs from page_template."""
from __future__ import annotations

from pathlib import Path

import nbformat

from foxlib.report import captioned, reading

NOTEBOOK_ONLY = "notebook-only"  # the tag of a cell written for whoever runs the notebook (in JupyterLab), not for readers


def for_readers(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what a reader should not see: cells tagged NOTEBOOK_ONLY (how the notebook behaves when run in
    JupyterLab) and the code cells' stderr (progress bars, warnings)."""
    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if NOTEBOOK_ONLY not in c.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    return nb


def render(executed: Path, out_dir: Path, title: str = "foxlib report") -> tuple[Path, Path]:
    """Write report.html and report.md (figures under figures/) from the executed notebook."""
    from nbconvert import HTMLExporter, MarkdownExporter
    nb = for_readers(nbformat.read(executed, as_version=4))
    html_exporter = HTMLExporter(template_name="lab", exclude_input=True,
                                 exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = html_exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    html_path = out_dir / "report.html"
    html_path.write_text(reading.style_report(body))  # text columns left, numbers right, tables within the window

    body, resources = MarkdownExporter(exclude_input=True).from_notebook_node(
        captioned.for_markdown(nb), resources={"output_files_dir": captioned.FIGURES_DIR})
    for name, data in resources.get("outputs", {}).items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    md_path = out_dir / "report.md"
    md_path.write_text(body)
    return html_path, md_path
