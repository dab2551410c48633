"""Tables made for readers (foxlib.report.render styles every exported report.html with
style_report): a stylesheet that left-aligns text, right-aligns numeric columns and wraps long
text so that no table is wider than a MAX_PAGE_WIDTH_PX window, and the marking of every
all-numeric column (tests/test_reading.py)."""
from __future__ import annotations

import re

from foxlib.report.reading_block import Block

MAX_PAGE_WIDTH_PX = 1400  # the window every table must fit in
NUMERIC_CLASS = "foxlib-num"
MISSING = ("", "—", "-", "nan", "NaN", "None", "n/a")
_NUMBER = re.compile(r"^[+\-\u2212]?\d[\d,]*(\.\d+)?(e[+\-]?\d+)?\s?(%|x|×|MB|MiB|GB|GiB|kB|B|ms|s)?"
                     r"(\s*\[[^\]]*\])?$")

REPORT_CSS = f"""
.jp-RenderedHTMLCommon table, table.dataframe, table.foxlib-table {{
  max-width: 100%; border-collapse: collapse; table-layout: auto; font-size: 12px; }}
.jp-RenderedHTMLCommon table th {{ white-space: normal; }}
.jp-RenderedHTMLCommon table td, .jp-RenderedHTMLCommon table th,
table.dataframe td, table.dataframe th, table.foxlib-table td, table.foxlib-table th {{
  text-align: left; vertical-align: top; white-space: normal; overflow-wrap: anywhere;
  max-width: 18em; padding: 0.2em 0.4em; }}
.jp-RenderedHTMLCommon table .{NUMERIC_CLASS}, table .{NUMERIC_CLASS} {{
  text-align: right; white-space: normal; font-variant-numeric: tabular-nums; }}
.jp-OutputArea-output {{ max-width: 100%; overflow-x: auto; }}
.jp-Notebook {{ max-width: {MAX_PAGE_WIDTH_PX}px; box-sizing: border-box; }}
figure.foxlib-figure img {{ max-width: 100%; height: auto; }}
figure.foxlib-figure figcaption {{ max-width: 60em; }}
"""


def report_css() -> str:
    """The report's stylesheet for readers, as a <style> element: text columns left-aligned,
    numeric columns (marked by mark_numeric_columns) right-aligned, long text wrapped so that no
    table is wider than a MAX_PAGE_WIDTH_PX window."""
    return f'<style id="foxlib-reading-css">{REPORT_CSS}</style>'


def css_block() -> Block:
    """report_css as a Block, for a notebook to display once (the Markdown export leaves it out)."""
    return Block(report_css(), "")


def is_number(text: str) -> bool:
    """A table cell that reads as a number: "1,009.4", "−9.4", "0.9 %", "1.19x", "812 MB", "0.73x [0.69, 0.80]"."""
    return bool(_NUMBER.match(text.strip()))


def _mark_table(table) -> None:
    body_rows = [r for r in table.find_all("tr") if r.find("td")]
    if not body_rows:
        return
    width = len(body_rows[0].find_all(["td", "th"], recursive=False))
    rows = [r.find_all(["td", "th"], recursive=False) for r in body_rows]
    if any(len(r) != width or any(c.get("colspan") or c.get("rowspan") for c in r) for r in rows):
        return  # spanning cells: leave the table as it is
    for col in range(width):
        texts = [r[col].get_text(" ", strip=True) for r in rows]
        values = [t for t in texts if t not in MISSING]
        if not values or not all(is_number(t) for t in values):
            continue
        for r in rows:
            r[col]["class"] = r[col].get("class", []) + [NUMERIC_CLASS]
        for head in (r for r in table.find_all("tr") if not r.find("td")):
            cells = head.find_all("th", recursive=False)
            if len(cells) == width:
                cells[col]["class"] = cells[col].get("class", []) + [NUMERIC_CLASS]


def mark_numeric_columns(page_html: str) -> str:
    """`page_html` with every cell of an all-numeric table column (missing values aside) and its
    header given the class NUMERIC_CLASS, which report_css right-aligns. Tables with spanning
    cells are left as they are."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(page_html, "html.parser")
    for table in soup.find_all("table"):
        _mark_table(table)
    return str(soup)


def style_report(page_html: str) -> str:
    """A whole exported report.html made for readers: report_css in its <head> (once) and the
    numeric columns of every table marked (for foxlib.report.render, after HTMLExporter)."""
    out = mark_numeric_columns(page_html)
    if 'id="foxlib-reading-css"' in out:
        return out
    if "</head>" in out:
        return out.replace("</head>", report_css() + "</head>", 1)
    return report_css() + out
