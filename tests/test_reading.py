"""Reading aids: the answer first, the glossary, how to reproduce a report, the way back, the CSS."""
import json
import shutil
import subprocess

import pytest

from foxlib.report import reading
from foxlib.core.budgets import Check
from tests.conftest import committed, committed_measurement


def _check(measured, limit, passed=None, name="peak", unit="bytes"):
    return {"name": name, "measured": measured, "limit": limit, "unit": unit,
            "passed": measured <= limit if passed is None else passed}


# ----------------------------------------------------------------------------- answer first

def test_a_failing_check_says_its_margin_and_what_would_flip_it():
    s = reading.check_sentence(_check(1_009_400_000, 1_000_000_000))
    assert s == "peak 1,009.4 MB, 0.9 % over 1,000.0 MB: NO-GO; it would pass at ≤ 1,000.0 MB (−9.4 MB)"


def test_a_passing_check_says_how_far_it_is_from_failing():
    s = reading.check_sentence(Check.at_most("TFT peak", 812_000_000, 1_000_000_000, "bytes"))
    assert s == "TFT peak 812.0 MB, 18.8 % under 1,000.0 MB: GO; it would fail above 1,000.0 MB (+188.0 MB)"


def test_exactly_at_the_limit_and_other_units():
    assert "exactly at the limit 2.00x: GO" in reading.check_sentence(_check(2.0, 2.0, unit="ratio"))
    s = reading.check_sentence(_check(2_345_678_901, 4_294_967_296))
    assert "2,345.7 MB" in s and "4,295.0 MB" in s and "(+1,949.3 MB)" in s
    assert reading.format_value(0.0123, "s") == "12.3 ms"
    assert reading.format_value(3.0, "%") == "3.00 %"


@pytest.mark.parametrize("measured, limit, unit, shown", [
    (0.2495729381598863, 5.0, "%", "0.25 %"),  # CPU 8.11's fp16 accuracy degradation: was 0.2 % and 0.25 %
    (-0.20456811133845154, 5.0, "%", "-0.20 %"),
    (0.05094225866919584, 2.0, "x", "0.05x"),  # H200 8.12's slowdown: was 0.05x and 0.0509 x
    (0.9224013951779202, 0.98, "ratio", "0.92x"),
    (812_000_000, 1_000_000_000, "bytes", "812.0 MB"),
])
def test_a_check_is_written_alike_by_the_sentence_the_banner_the_table_and_the_index(measured, limit, unit, shown):
    """One figure, one value: each place a check's value appears writes it with format_value."""
    from foxlib.report import index
    from foxlib.run import notebook_cells
    check = Check("c", measured, limit, unit, passed=False)
    assert f"c {shown}, " in reading.check_sentence(check)
    assert notebook_cells.checks_table([check]).loc[0, "measured"] == shown
    assert f"<li>c: {shown} &gt; limit" in notebook_cells.verdict_banner("8.12", [check], committed_measurement("cpu", "8.12"))
    assert index.margin(_check(measured, limit, False, "c", unit)).startswith(f"c: {shown} vs limit")


def test_a_verdict_decided_on_more_than_the_value_is_not_explained_away():
    s = reading.check_sentence(_check(1.89, 2.0, passed=False, name="slowdown", unit="ratio"))
    assert s.startswith("slowdown 1.89x, 5.5 % under 2.00x: NO-GO (decided on more than this value")
    assert "would pass" not in s


def test_the_answer_counts_and_orders():
    text = reading.answer_block([_check(1_009_400_000, 1_000_000_000), _check(1.19, 2.0, unit="ratio",
                                                                             name="slowdown")], wave="8.11").markdown
    assert text.startswith("**Wave 8.11: NO-GO**, 1 of 2 checks passed. peak 1,009.4 MB")
    assert text.index("peak") < text.index("slowdown") and text.endswith(".")
    go = reading.answer_block([_check(1, 2)])
    assert go.markdown.startswith("**GO**, 1 of 1 checks passed.") and "<b>GO</b>" in go.html
    with pytest.raises(ValueError, match="at least one check"):
        reading.answer_block([])


def test_the_answer_on_a_committed_report():
    res = committed("h200", "8.13", "results.json")
    text = reading.answer_block(res["checks"], res["wave"]).markdown
    assert f"**Wave 8.13: {res['verdict']}**" in text
    assert f"{res['checks'][0]['measured'] / 1e6:,.1f} MB" in text


# ----------------------------------------------------------------------------- glossary

def test_glossary_defines_the_terms_the_reports_use():
    block = reading.glossary()
    for term in ("VSN", "GRN", "memory-efficient path", "16 B/parameter", "CUDA graph", "saved for backward",
                 "reserved", "IQR", "confidence interval", "model peak vs process peak", "MB", "skill margin"):
        assert term in block.markdown and term in block.html
    from foxlib.core.figures import DEFINITIONS
    peaks = reading.GLOSSARY["model peak vs process peak"]
    assert DEFINITIONS["process_peak"].removesuffix(" (bytes)") in peaks  # one definition, foxlib.core.figures'
    assert "workspaces once per stream" in peaks and "CUDA context" in peaks
    assert "4,294,967,296" in block.markdown
    assert reading.glossary(["VSN", "IQR"]).markdown.count("- **") == 2
    with pytest.raises(ValueError, match="known: VSN"):
        reading.glossary(["FLOP"])


# ----------------------------------------------------------------------------- reproduce

DEFAULTS = {"preset": "seed", "batch_size": 32, "tft_config": "auto", "device": "auto", "measurements": "",
            "budgets_file": ""}


def _results(**params):
    """A results.json of wave 8.10 whose run differs from its device's defaults by `params` (run.differs, as
    foxlib.core.parameters.differences writes it; run parameters such as measurements are not compared)."""
    differs = {k: {"value": v, "default": DEFAULTS.get(k)} for k, v in params.items() if k != "measurements"}
    return {"wave": "8.10", "parameters": {**DEFAULTS, **params}, "run": {"differs": differs},
            "device": {"type": "cpu", "name": "Intel Xeon", "short": "cpu"},
            "environment": {"python": "3.11", "torch": "2.11.0", "git_revision": "abc1234"},
            "measured_at_revision": "808f685", "rendered_at_revision": "9c4a2b5"}


def test_reproduce_names_only_what_the_run_changed():
    assert reading.commands(_results()) == ["make report WAVE=8.10"]
    assert reading.commands(_results(preset="small", batch_size=8)) == \
        ['make report WAVE=8.10 P="preset=small batch_size=8"']
    # the device's own defaults are no change (a CPU run's smaller defaults: run.differs is empty), even where
    # they differ from the notebook's: make report applies them again
    cpu_defaults = _results()
    cpu_defaults["parameters"]["batch_size"] = 8
    assert reading.commands(cpu_defaults) == ["make report WAVE=8.10"]


def test_a_value_with_spaces_uses_the_python_command():
    cmd = reading.commands(_results(tft_config='{"precision": "bf16"}'))
    assert cmd == ["python -m foxlib report --wave 8.10 -p 'tft_config={\"precision\": \"bf16\"}'"]


def test_a_measurement_made_elsewhere_is_measure_then_render():
    res = _results(measurements="/x/wave-8.10.json", batch_size=8)
    res["device"] = {"type": "cuda", "name": "NVIDIA H200", "short": "h200"}
    cmds = reading.commands(res)
    assert cmds[0].startswith("python -m foxlib measure --wave 8.10 -p batch_size=8 -p device=cuda "
                              "--out measured/wave-8.10.json")
    assert "NVIDIA H200" in cmds[0] and cmds[1].startswith("make render MEASURED=measured")


def test_reproduce_block_has_revisions_device_and_data():
    b = reading.reproduce(_results(), dataset="the data")
    for text in ("make report WAVE=8.10", "measured at revision: 808f685", "rendered at revision: 9c4a2b5",
                 "device: Intel Xeon (cpu)", "torch 2.11.0", "data: the data"):
        assert text in b.markdown
    old = _results()
    del old["measured_at_revision"], old["rendered_at_revision"]
    b = reading.reproduce(old, dataset="the data").markdown
    assert "measured at revision: abc1234" in b and "rendered at revision: not recorded" in b


def test_the_data_set_is_read_from_foxlib_data():
    text = reading.dataset_description()
    assert "S&P 500 and NASDAQ" in text and "`arch`" in text
    assert "1999-01-04 to 2018-12-31" in text and "validation from 2015-01-01" in text


# ----------------------------------------------------------------------------- back to the index

@pytest.mark.parametrize("folder, href", [
    ("reports/h200/wave-8.12", "../../index.html"),
    ("reports/cpu/.wave-8.10.partial", "../../index.html"),
    ("reports/h200/variants/wave-8.10-batch_size-8", "../../../index.html"),
])
def test_index_href_reaches_the_index(tmp_path, folder, href):
    assert reading.index_href(tmp_path / folder) == href
    assert f'href="{href}"' in reading.index_link(folder).html


# ----------------------------------------------------------------------------- CSS

def test_numbers_right_text_left():
    import pandas as pd
    df = pd.DataFrame({"check": ["peak", "slowdown"], "measured (MB)": ["1,009.4", "—"],
                       "ratio": ["0.73x [0.69, 0.80]", "−1.2x"], "note": ["a 1", "2"]})
    out = reading.mark_numeric_columns(df.to_html(index=False))
    assert out.count(f'class="{reading.NUMERIC_CLASS}"') == 2 * 3  # header + 2 rows, 2 columns
    assert "<td>peak</td>" in out and "<td>a 1</td>" in out and "<td>2</td>" in out
    assert "text-align: left" in reading.REPORT_CSS and "text-align: right" in reading.REPORT_CSS


def test_style_report_injects_the_css_once():
    page = "<html><head><title>t</title></head><body><table><tr><td>1.0</td></tr></table></body></html>"
    once = reading.style_report(page)
    assert once.count('id="foxlib-reading-css"') == 1 and reading.NUMERIC_CLASS in once
    assert reading.style_report(once).count('id="foxlib-reading-css"') == 1


@pytest.mark.slow
def test_a_wide_table_fits_a_1400_px_window(tmp_path):
    """A table with a long note column, exported as a report is, stays within 1,400 px in Chromium
    (without the stylesheet this table is ~3,070 px wide)."""
    import nbformat
    import pandas as pd
    from nbconvert import HTMLExporter
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no Chromium")
    df = pd.DataFrame({f"column {i} (MB)": [f"{1234.5 * i:,.1f}"] * 3 for i in range(8)})
    df["note"] = ["a long explanation of how the figure was measured, " * 12] * 3
    df["path"] = ["/work/" + "x" * 300] * 3
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("t")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": df.to_html(index=False)})]
    nb.cells = [cell]
    body, _ = HTMLExporter(template_name="lab", exclude_input=True).from_notebook_node(nb)
    probe = ("<script>window.addEventListener('load',()=>{document.body.setAttribute('data-w',"
             "JSON.stringify([...document.querySelectorAll('table')].map(t=>t.getBoundingClientRect().right)))})"
             "</script></body>")
    page = tmp_path / "page.html"
    page.write_text(reading.style_report(body).replace("</body>", probe, 1))
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                          f"--user-data-dir={tmp_path}/profile", "--virtual-time-budget=5000", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    import re
    widths = json.loads(re.search(r'data-w="([^"]*)"', out.stdout).group(1).replace("&quot;", '"'))
    assert widths and max(widths) <= 1400


def test_opening_and_closing():
    checks = [_check(1_009_400_000, 1_000_000_000)]
    head = reading.opening("8.10", checks, "reports/h200/variants/wave-8.10-b8")
    assert head.markdown.startswith("[← all reports (index)](../../../index.html)\n\n**Wave 8.10: NO-GO**")
    tail = reading.closing(_results(), "reports/cpu/wave-8.10", dataset="the data")
    assert "Reproduce this report" in tail.markdown and "**Glossary**" in tail.markdown
    assert tail.markdown.endswith("(../../index.html)")


def test_a_block_displays_as_html_markdown_and_text():
    from IPython.core.formatters import DisplayFormatter
    data, _ = DisplayFormatter().format(reading.index_link("reports/h200/wave-8.10"))
    assert data["text/html"].startswith('<p class="foxlib-back"><a href="../../index.html">')
    assert data["text/markdown"] == data["text/plain"] == "[← all reports (index)](../../index.html)"
