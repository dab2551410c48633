"""foxlib.report.render on a hand-made executed notebook: report.html without code, stderr or prompts,
with the reading stylesheet and numeric columns marked; report.md with the figure as a file."""
import base64

import nbformat
import pandas as pd
import pytest

from foxlib.report import captioned, reading, render

# a 1 x 1 PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def _executed(tmp_path):
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("secret_call(42)", execution_count=1)
    table = pd.DataFrame({"check": ["peak", "params"], "measured": ["938.0 MB", "72.6 MB"], "result": ["PASS", "FAIL"]})
    data, metadata = captioned.bundle(PNG, "A dot: one pixel.", "The smallest chart")
    code.outputs = [nbformat.v4.new_output("stream", name="stderr", text="Executing: 50%|#####\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="printed for readers\n"),
                    nbformat.v4.new_output("display_data", data={"text/html": table.to_html(index=False)}),
                    nbformat.v4.new_output("display_data", data=data, metadata=metadata)]
    lab_note = nbformat.v4.new_markdown_cell("*Opened in JupyterLab*, this notebook writes to scratch/",
                                             metadata={"tags": [render.NOTEBOOK_ONLY]})
    nb.cells = [nbformat.v4.new_markdown_cell("# Wave 0.0 — hand-made"), lab_note, code, nbformat.v4.new_code_cell("")]
    path = tmp_path / "executed.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("render")
    out = tmp / "out"
    out.mkdir()
    html_path, md_path = render.render(_executed(tmp), out, title="foxlib wave 0.0")
    return out, html_path.read_text(), md_path.read_text()


def test_the_html_is_for_readers(rendered):
    out, page, _ = rendered
    assert (out / "report.html").is_file() and "<title>foxlib wave 0.0</title>" in page
    assert "Wave 0.0 — hand-made" in page and "printed for readers" in page
    assert "secret_call" not in page and "Executing: 50%" not in page  # no code, no stderr
    assert "Opened in JupyterLab" not in page and "Opened in JupyterLab" not in rendered[2]  # the notebook's own note
    assert "[1]:" not in page  # no prompts (the cell ran as execution 1)
    assert page.count('id="foxlib-reading-css"') == 1
    assert page.count(f'class="{reading.NUMERIC_CLASS}"') == 3  # the measured column: header and two cells
    assert "<td>peak</td>" in page and "<td>PASS</td>" in page  # text columns are not marked
    assert 'alt="A dot: one pixel."' in page and "<figcaption" in page and "data:image/png;base64," in page


def test_the_table_alignment_rules_are_in_the_head_once(rendered):
    """The rules that beat JupyterLab's right-aligned cells are part of the reading stylesheet, in the head once."""
    _, page, _ = rendered
    head = page.split("</head>")[0]
    assert f":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table td.{reading.NUMERIC_CLASS}," in reading.REPORT_CSS
    rule = ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table td,"
    assert head.count(rule) == 1 and head.index('id="foxlib-reading-css"') < head.index(rule)


@pytest.mark.slow
def test_text_cells_left_numbers_right_in_a_browser(rendered):
    """As drawn by Chromium over JupyterLab's stylesheet, which right-aligns every output cell."""
    from foxlib.report.browser import check_page
    out, _, _ = rendered
    seen = check_page(out / "report.html")
    assert seen["table_cells"] == 9 and seen["misaligned_cells"] == []  # 3 columns x (header + 2 rows)


def test_the_markdown_refers_to_the_figure_file(rendered):
    out, _, md = rendered
    figures = sorted((out / captioned.FIGURES_DIR).iterdir())
    assert len(figures) == 1 and figures[0].read_bytes() == PNG
    assert f"![A dot: one pixel.]({captioned.FIGURES_DIR}/{figures[0].name})" in md
    assert "*Figure: The smallest chart*" in md and "# Wave 0.0 — hand-made" in md
    assert "secret_call" not in md and "Executing: 50%" not in md
