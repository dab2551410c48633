"""Every committed report, opened in headless Chromium: charts load, the verdict shows, nothing broken."""
import functools

import pytest

from foxlib.report.browser import check_page
from foxlib.core.config import ROOT

COMMITTED = sorted((ROOT / "reports").glob("*/wave-*/report.html"))


@functools.cache
def _opened(report):
    """What Chromium showed of a committed report in a 1,400 px window: one launch a report, read by both
    tests of this file that open it (check_page's result, not changed by them)."""
    return check_page(report, width_px=1400)


def test_there_are_committed_reports_for_cpu_and_gpu():
    devices = {p.parent.parent.name for p in COMMITTED}
    assert {"cpu", "h200"} <= devices


@pytest.mark.slow
@pytest.mark.parametrize("report", COMMITTED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_report_renders_with_charts_and_verdict(report):
    seen = _opened(report)
    assert seen["images"] >= 1 and seen["broken_images"] == []
    assert seen["verdict_visible"] and seen["verdict_text"] in ("Verdict: GO", "Verdict: NO-GO")
    assert seen["verdict_top_px"] < 600  # at the top, above the fold
    assert seen["tables"] >= 1
    assert seen["title"].startswith("foxlib wave")


@pytest.mark.slow
def test_rendered_fresh_report_in_browser(tiny_8_10):
    seen = check_page(tiny_8_10 / "report.html")
    assert seen["broken_images"] == [] and seen["images"] >= 3 and seen["verdict_visible"]
    # rendered by this tree: every table's text cells and headers left, numeric ones right
    assert seen["table_cells"] > 50 and seen["misaligned_cells"] == []


@pytest.mark.slow
def test_index_page_links_reports():
    index = (ROOT / "reports" / "index.html").read_text()
    for report in COMMITTED:
        assert report.relative_to(ROOT / "reports").as_posix() in index


def _local(page, href):
    """The file a relative link of `page` points to (None for a link off the page's folder tree)."""
    if href.startswith(("http:", "https:", "#", "mailto:")):
        return None
    return (page.parent / href.split("#")[0]).resolve()


@pytest.mark.slow
def test_the_index_opens_with_a_ledger_row_per_seed_claim_whose_links_resolve():
    from foxlib.report.ledger import CLAIMS
    index = ROOT / "reports" / "index.html"
    seen = check_page(index)
    assert seen["ledger_rows"] == len(CLAIMS)
    targets = [_local(index, h) for h in seen["links"]]
    missing = [str(t) for t in targets if t is not None and not t.exists()]
    assert missing == [] and any("wave-8.10/report.html" in str(t) for t in targets)


@pytest.mark.slow
@pytest.mark.parametrize("report", COMMITTED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_figure_has_alt_text_and_a_caption_tables_fit_and_the_index_is_linked(report):
    seen = _opened(report)
    assert seen["images_without_alt"] == [] and seen["images_without_caption"] == []
    assert seen["widest_table_px"] <= 1400
    assert (ROOT / "reports" / "index.html").resolve() in [_local(report, h) for h in seen["links"]]


@pytest.mark.slow
def test_the_alt_check_counts_nbconvert_s_placeholder_as_no_alt_text(tmp_path):
    """nbconvert's HTML export of a bare matplotlib PNG gives its <img> a placeholder alt
    (foxlib.report.captioned.PLACEHOLDER_ALTS): the page's check counts it without alt text, as it does an empty
    alt, and not a described image."""
    import base64

    import nbformat
    from nbconvert import HTMLExporter

    from foxlib.report import captioned
    png = base64.b64encode(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a0c5d1b50000000049454e44ae426082")).decode()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("chart()")
    bare = {"image/png": png, "text/plain": "<Figure>"}  # nbconvert gives it the placeholder
    empty = {"text/html": f'<img src="data:image/png;base64,{png}" alt="">'}
    described = captioned.bundle(base64.b64decode(png), "A dot: one pixel.", "A dot.")[0]
    cell.outputs = [nbformat.v4.new_output("display_data", data=d) for d in (bare, empty, described)]
    nb.cells = [cell]
    body, _ = HTMLExporter(template_name="lab", exclude_input=True).from_notebook_node(nb)
    assert body.count(f'alt="{captioned.PLACEHOLDER_ALTS[0]}"') == 1
    page = tmp_path / "page.html"
    page.write_text(body)
    seen = check_page(page)
    assert seen["images"] == 3 and seen["broken_images"] == [] and len(seen["images_without_alt"]) == 2
