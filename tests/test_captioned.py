"""Figures with alt text and captions: in the HTML export, in the Markdown export with its file."""
import base64

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402
from nbconvert import HTMLExporter, MarkdownExporter  # noqa: E402

from foxlib.report import captioned  # noqa: E402

ALT = "Bar chart of the peak memory of three strategies in MB; checkpoint all is lowest at 300 MB."
CAPTION = "Peak memory per strategy (MB = 10^6 bytes); the dashed line is the 1,000 MB budget."


def images_without_alt(page_html: str) -> list[str]:
    """The <img> tags of an HTML page without alt text: none, blank or an exporter's placeholder
    (captioned.has_alt_text; their first 80 characters)."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(page_html, "html.parser")
    return [str(img)[:80] for img in soup.find_all("img") if not captioned.has_alt_text(img.get("alt"))]


def figures_without_caption(page_html: str) -> list[str]:
    """The <img> tags of an HTML page that are not inside a <figure> with a non-empty <figcaption>."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(page_html, "html.parser")
    out = []
    for img in soup.find_all("img"):
        fig = img.find_parent("figure")
        cap = fig.find("figcaption") if fig else None
        if cap is None or not cap.get_text(strip=True):
            out.append(str(img)[:80])
    return out


def _fig():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(["fp32", "fp16", "checkpoint all"], [1009, 930, 300])
    return fig


def _notebook(outputs):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("chart()")
    cell.outputs = outputs
    nb.cells = [nbformat.v4.new_markdown_cell("# a report"), cell]
    return nb


def _figure_output(alt=ALT, caption=CAPTION, fig=None):
    data, metadata = captioned.bundle(captioned.png_bytes(fig or _fig()), alt, caption)
    plt.close("all")
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata)


def _plain_png_output():
    png = captioned.png_bytes(_fig())
    plt.close("all")
    return nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(png).decode(),
                                                        "text/plain": "<Figure>"})


def test_html_export_has_alt_and_caption_on_every_image():
    nb = _notebook([_figure_output(), _figure_output(caption="A second chart of the same bars.")])
    body, _ = HTMLExporter(template_name="lab", exclude_input=True).from_notebook_node(nb)
    assert body.count("<img") == 2
    assert images_without_alt(body) == []
    assert figures_without_caption(body) == []
    assert ALT in body.replace("&#x27;", "'")
    assert "A second chart of the same bars." in body


def test_the_checks_find_a_plain_matplotlib_output():
    """What nbconvert does today with a bare PNG: a placeholder alt, no caption. The checks must see it."""
    nb = _notebook([_plain_png_output(), _figure_output()])
    body, _ = HTMLExporter(template_name="lab", exclude_input=True).from_notebook_node(nb)
    # the placeholder is one captioned.PLACEHOLDER_ALTS names (else nbconvert changed it: add the new one there)
    assert any(f'alt="{p}"' in body for p in captioned.PLACEHOLDER_ALTS)
    assert len(images_without_alt(body)) == 1
    assert len(figures_without_caption(body)) == 1


def test_markdown_export_writes_the_file_and_the_caption():
    nb = captioned.for_markdown(_notebook([_figure_output(), _figure_output(caption="Second.")]))
    body, resources = MarkdownExporter(exclude_input=True).from_notebook_node(
        nb, resources={"output_files_dir": captioned.FIGURES_DIR})
    files = sorted(resources["outputs"])
    assert len(files) == 2 and all(f.startswith("figures/") and f.endswith(".png") for f in files)
    assert all(resources["outputs"][f][:8] == b"\x89PNG\r\n\x1a\n" for f in files)
    for f in files:
        assert f"]({f})" in body
    assert f"![{ALT}]" in body
    assert f"*Figure: {CAPTION}*" in body and "*Figure: Second.*" in body
    assert "data:image/png;base64" not in body  # the file, not an inline copy


def test_markdown_export_without_the_rewrite_keeps_alt_and_caption_inline():
    body, resources = MarkdownExporter(exclude_input=True).from_notebook_node(
        _notebook([_figure_output()]), resources={"output_files_dir": captioned.FIGURES_DIR})
    assert 'alt="' in body and "<figcaption" in body and CAPTION in body
    assert any(f.endswith(".png") for f in resources["outputs"])


def test_identical_figures_get_distinct_files():
    out = _figure_output()
    nb = captioned.for_markdown(_notebook([out, nbformat.from_dict(out)]))
    names = [o.metadata["filename"] for o in nb.cells[1].outputs]
    assert len(set(names)) == 2
    body, resources = MarkdownExporter(exclude_input=True).from_notebook_node(
        nb, resources={"output_files_dir": "figures"})
    assert len(resources["outputs"]) == 2


def test_alt_text_is_escaped_and_required():
    html = captioned.figure_html(b"\x89PNG", 'a "quoted" <b>alt</b>', "c & d")
    assert 'alt="a &quot;quoted&quot; &lt;b&gt;alt&lt;/b&gt;"' in html
    assert "c &amp; d" in html
    for alt, caption in (("", "c"), ("a", " "), (None, "c"), (captioned.PLACEHOLDER_ALTS[0], "c")):
        with pytest.raises(ValueError, match="alt text|caption"):
            captioned.figure_html(b"", alt, caption)


def test_show_figure_displays_one_bundle_and_closes(monkeypatch):
    import IPython.display
    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append((a, k)))
    fig = _fig()
    captioned.show_figure(fig, CAPTION, ALT)
    assert not plt.fignum_exists(fig.number)
    (data,), kwargs = calls[0]
    assert kwargs["raw"] is True and kwargs["metadata"][captioned.META] == {"alt": ALT, "caption": CAPTION}
    assert set(data) == {"text/html", "image/png", "text/plain"}
    assert base64.b64decode(data["image/png"])[:4] == b"\x89PNG"


def test_describe_reads_bars_axes_and_series():
    fig, ax = plt.subplots()
    ax.bar(["fp32", "fp16"], [1009.4, 930.0], label="peak")
    ax.axhline(1000, ls="--", label="budget 1,000 MB")
    ax.set_title("Peak per precision")
    ax.set_ylabel("MB (10^6 bytes)")
    ax.set_yscale("log")
    ax.legend()
    text = captioned.describe(fig)
    plt.close(fig)
    assert text.startswith('A chart "Peak per precision"')
    assert "y axis MB (10^6 bytes) (log scale)" in text and "x axis unlabelled" in text
    assert "bars peak: fp32 1,009, fp16 930" in text and "series: budget 1,000 MB" in text


def test_show_figure_without_alt_uses_the_description(monkeypatch):
    import IPython.display
    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append((a, k)))
    fig = _fig()
    expected = captioned.describe(fig)
    captioned.show_figure(fig, CAPTION)
    assert calls[0][1]["metadata"][captioned.META]["alt"] == expected
    assert "bars fp32 1,009, fp16 930, checkpoint all 300" in expected


def test_render_writes_alt_text_and_caption(tmp_path):
    """foxlib.report.render on an executed notebook with a captioned chart: report.html has alt text and a
    caption on every image; report.md has the caption and alt text (with for_markdown in render: the file)."""
    from foxlib.report import render
    nb = _notebook([_figure_output()])
    path = tmp_path / "notebook.ipynb"
    nbformat.write(nb, path)
    html_path, md_path = render.render(path, tmp_path, "test")
    page = html_path.read_text()
    assert images_without_alt(page) == [] and figures_without_caption(page) == []
    md = md_path.read_text()
    assert CAPTION in md and ALT in md.replace("&#x27;", "'")


def test_for_markdown_prefers_an_output_s_own_markdown():
    from foxlib.report import reading
    block = reading.index_link("reports/h200/wave-8.10")
    both = nbformat.v4.new_output("display_data", data={"text/html": block.html, "text/markdown": block.markdown})
    table = nbformat.v4.new_output("display_data", data={"text/html": "<table><tr><td>1</td></tr></table>"})
    nb = captioned.for_markdown(_notebook([both, table]))
    body, _ = MarkdownExporter(exclude_input=True).from_notebook_node(nb)
    assert "[← all reports (index)](../../index.html)" in body and 'class="foxlib-back"' not in body
    assert "<table><tr><td>1</td></tr></table>" in body
