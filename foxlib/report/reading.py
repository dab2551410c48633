"""Reading aids every report carries, each a Block (the same piece as HTML and as Markdown): opening() (the
link back to reports/index.html, the answer first in numbers from results.json's "checks"), closing() (how to
reproduce the report, the glossary, the link back), and the tables' stylesheet with the marking of numeric columns
(style_report, for foxlib.report.render). MB = 10^6 bytes."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

from foxlib.core.figures import DEFINITIONS, display
from foxlib.core.parameters import p_flags, to_assignments
from foxlib.core.results import measured_revision

MINUS = "\u2212"  # the minus sign of a signed difference ("−9.4 MB")
INDEX_FILE = "index.html"


@dataclass(frozen=True, repr=False)
class Block:
    """A piece of a report in both forms a notebook output can carry (shown as a cell's last expression)."""
    html: str
    markdown: str

    def _repr_html_(self) -> str:
        return self.html

    def _repr_markdown_(self) -> str:
        return self.markdown

    __str__ = __repr__ = _repr_markdown_  # __repr__: text/plain of the display bundle


def code_html(escaped: str) -> str:
    """`x` in already escaped text as <code>x</code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


# ----------------------------------------------------------------------------- the answer first

def format_value(value: float, unit: str) -> str:
    """A check's value as every place that shows it writes it (the answer sentence, the verdict banner, the checks
    table, the index's headlines): bytes in MB (one decimal), seconds in ms, ratios as 1.23x
    (foxlib.core.figures.display's units, and their other names)."""
    unit = {"seconds": "s", "x": "ratio", "pct": "%", "percent": "%"}.get(unit, unit)
    if unit in ("bytes", "s", "ratio", "fraction"):
        return display(value, unit)
    if unit == "%":
        return f"{value:,.2f} %"  # an accuracy change of 0.25 % is not rounded to 0.2 % (the tables keep 2 decimals)
    return f"{value:,.4g} {unit}".rstrip()


def format_difference(delta: float, unit: str) -> str:
    """A signed difference in the check's unit: "+188.0 MB", "−9.4 MB" (a true minus sign)."""
    return ("+" if delta >= 0 else MINUS) + format_value(abs(delta), unit)


def _field(check: Any, name: str) -> Any:
    return check[name] if isinstance(check, Mapping) else getattr(check, name)


def check_sentence(check: Any) -> str:
    """One check (a budgets.Check or results.json's dict) in words: figure, margin, verdict, flip.

    "TFT peak 1,009.4 MB, 0.9 % over 1,000.0 MB: NO-GO; it would pass at ≤ 1,000.0 MB (−9.4 MB)".
    A check passes when its value is at most its limit; where its recorded verdict disagrees (a check
    decided on more than one value, e.g. an interval's upper end), the sentence says so."""
    name, measured, limit = _field(check, "name"), float(_field(check, "measured")), float(_field(check, "limit"))
    unit, passed = _field(check, "unit"), bool(_field(check, "passed"))
    verdict = "GO" if passed else "NO-GO"
    figure, bound = format_value(measured, unit), format_value(limit, unit)
    if limit == 0:
        margin = "at the limit" if measured == 0 else f"{format_difference(measured, unit)} against a limit of {bound}"
    elif measured == limit:
        margin = f"exactly at the limit {bound}"
    else:
        pct = abs(measured - limit) / abs(limit) * 100
        margin = f"{pct:,.1f} % {'over' if measured > limit else 'under'} {bound}"
    head = f"{name} {figure}, {margin}: {verdict}"
    if passed != (measured <= limit):
        return f"{head} (decided on more than this value, see the check's note; the limit is {bound})"
    flip = f"it would fail above {bound}" if passed else f"it would pass at ≤ {bound}"
    return f"{head}; {flip} ({format_difference(limit - measured, unit)})"


def answer_block(checks: Iterable[Any], wave: str | None = None) -> Block:
    """A report's opening sentence: the verdict, how many checks passed, each check_sentence."""
    checks = list(checks)
    if not checks:
        raise ValueError("answer_block needs at least one check (results.json's \"checks\": name, measured, "
                         "limit, unit, passed)")
    passed = sum(bool(_field(c, "passed")) for c in checks)
    verdict = "GO" if passed == len(checks) else "NO-GO"
    lead = f"Wave {wave}: {verdict}" if wave else verdict
    rest = f", {passed} of {len(checks)} checks passed. " + "; ".join(check_sentence(c) for c in checks) + "."
    return Block(f'<p class="foxlib-answer"><b>{html.escape(lead)}</b>{html.escape(rest)}</p>', f"**{lead}**{rest}")


# ----------------------------------------------------------------------------- back to the index

def index_href(report_dir: str | Path) -> str:
    """The relative link to reports/index.html: two levels up from reports/<device>/wave-<N>/ (or its
    working copy), three from a variant under reports/<device>/variants/."""
    up = 3 if Path(report_dir).parent.name == "variants" else 2
    return str(PurePosixPath(*([".."] * up)) / INDEX_FILE)


def index_link(report_dir: str | Path) -> Block:
    href = index_href(report_dir)
    return Block(f'<p class="foxlib-back"><a href="{html.escape(href)}">← all reports (index)</a></p>',
                 f"[← all reports (index)]({href})")


# ----------------------------------------------------------------------------- the glossary

def _definition(quantity: str) -> str:
    """A figure's definition as foxlib.core.figures gives it, without its unit suffix."""
    return re.sub(r"\s*\(bytes\)$", "", DEFINITIONS[quantity])


GLOSSARY: dict[str, str] = {
    "VSN (variable selection network)":
        "the TFT block that weighs its input variables at every time step: each variable goes through "
        "its own GRN, a softmax over a GRN of all of them gives the weights, and the output is the "
        "weighted sum (foxlib/models/tft.py, VariableSelectionNetwork).",
    "GRN (gated residual network)":
        "the TFT's basic block: a dense layer, ELU, a second dense layer, a gated linear unit, then a "
        "residual connection and layer normalisation (foxlib/models/tft.py, GatedResidualNetwork).",
    "memory-efficient path":
        "the TFT's `memory_efficient=True` switch: the per-variable GRNs of a VSN run as batched "
        "operations over chunks of variables, the real-valued embeddings are folded into the first "
        "layers (the (batch, time, variables, width) embedding is never built) and attention uses the "
        "fused scaled_dot_product_attention. Same function and parameters as the plain path, up to "
        "floating-point rounding.",
    "floor of 16 B/parameter":
        "what fp32 training with Adam needs per parameter before any activation: 4 bytes of weight, 4 of "
        "gradient and 8 of Adam's two moments (foxlib/memory/theory.py).",
    "CUDA graph":
        "a training step captured once as a graph of GPU kernels and replayed with one launch, "
        "removing the per-kernel launch cost from Python; its tensors live in the graph's private "
        "memory pool, kept between replays (foxlib/memory/cuda_graph.py).",
    "saved for backward (activations)":
        "tensors autograd keeps from the forward pass to compute the gradients in the backward pass; "
        "the reports' activations figure counts them, each storage once, parameters excluded, the "
        "input batch included. Gradient checkpointing saves fewer and recomputes the rest.",
    "allocated vs reserved":
        "allocated: bytes in live tensors (torch.cuda.memory_allocated); reserved: what PyTorch's "
        "caching allocator holds from the driver, allocated plus cached free blocks "
        "(torch.cuda.memory_reserved). nvidia-smi shows reserved plus the CUDA context.",
    "model peak vs process peak":
        f"model peak: {_definition('model_peak')}; process peak: {_definition('process_peak')}. "
        "The card must hold the process peak.",
    "CUDA context":
        "memory the driver and libraries take for a process before any tensor: kernels, cuBLAS/cuDNN "
        "handles; outside PyTorch's allocator, measured as NVML's per-process figure minus reserved.",
    "IQR (interquartile range)":
        "the 75th minus the 25th percentile of repeated timings; the reports give a timing's noise as "
        "IQR / median.",
    "confidence interval, tie":
        "a ratio of step times comes with a bootstrap interval over alternating rounds (foxlib/harness/timing.py: "
        "95 %; fewer than 6 rounds cannot give 95 %, and an interval from them says the coverage they give, "
        "50 % from 2 rounds); two configurations whose intervals overlap are a tie, settled by memory, and a "
        "limit such as the 2x slowdown passes only when the interval's upper end is under it.",
    "skill margin over the naive forecast":
        "how much lower the TFT's validation loss is than that of a naive forecast with no skill; "
        "near zero or negative, the model has learnt nothing and an accuracy comparison between "
        "precisions or strategies has no power.",
    "MB, MiB, a \"4 GB\" card":
        "MB = 10^6 bytes (every report); MiB = 2^20 bytes; a card sold as 4 GB holds 4 GiB = "
        "4,294,967,296 bytes = 4,295.0 MB (budgets.toml).",
}


def glossary(terms: Iterable[str] | None = None) -> Block:
    """The glossary: all terms, or those whose name starts with one of `terms`."""
    items = list(GLOSSARY.items())
    if terms is not None:
        wanted = list(terms)
        if unknown := [t for t in wanted if not any(k.lower().startswith(t.lower()) for k in GLOSSARY)]:
            raise ValueError(f"unknown glossary term(s) {unknown}; known: {', '.join(GLOSSARY)}")
        items = [(k, v) for k, v in items if any(k.lower().startswith(t.lower()) for t in wanted)]
    rows = "".join(f"<dt><b>{html.escape(k)}</b></dt><dd>{code_html(html.escape(v))}</dd>" for k, v in items)
    md = "\n".join(f"- **{k}**: {v}" for k, v in items)
    return Block(f'<details class="foxlib-glossary"><summary><b>Glossary</b></summary><dl>{rows}</dl></details>',
                 "**Glossary**\n\n" + md)


# ----------------------------------------------------------------------------- reproduce this report

def commands(results: Mapping[str, Any]) -> list[str]:
    """The shell commands that reproduce a report from its results.json: `make report WAVE=<N> P="..."`
    (`python -m foxlib report` where a value holds a space or a quote, which make's P cannot carry); for a
    measurement made elsewhere, `python -m foxlib measure` there and `make render` here. The parameters given
    are the run's differences from its device's defaults (results.json's run.differs,
    foxlib.core.parameters.differences), and its budgets file."""
    wave = results["wave"]
    params = dict(results.get("parameters") or {})
    changed = {k: d["value"] for k, d in results["run"]["differs"].items() if k != "budgets_file"}
    budgets = params.get("budgets_file") or ""
    assignments = to_assignments(changed) + ([f"budgets_file={budgets}"] if budgets else [])
    flags = p_flags(assignments)
    if params.get("measurements"):
        device = (results.get("device") or {}).get("type", "cuda")
        measure = to_assignments({**{k: v for k, v in changed.items() if k != "device"}, "device": device})
        where = (results.get("device") or {}).get("name") or device
        return [f"python -m foxlib measure --wave {wave} {p_flags(measure)} --out measured/wave-{wave}.json"
                f"   # on the machine to measure ({where})",
                "make render MEASURED=measured   # here: renders every wave-<N>.json in that folder"
                + (f" (this report also used {flags})" if budgets else "")]
    if any(" " in a or "'" in a or '"' in a for a in assignments):
        return [f"python -m foxlib report --wave {wave} {flags}".rstrip()]
    return [f"make report WAVE={wave}" + (f' P="{" ".join(assignments)}"' if assignments else "")]


def dataset_description() -> str:
    """The data every model uses, with its date range and split, read from foxlib.data.market."""
    from foxlib.data import market as data
    first = next(iter(data.load_ohlcv().values()))
    names = {"sp500": "S&P 500", "nasdaq": "NASDAQ"}
    series = " and ".join(names.get(s, s) for s in data.SERIES)
    return (f"{series} daily prices (open, high, low, close, volume) shipped offline with the `arch` package, "
            f"{first.index[0]:%Y-%m-%d} to {first.index[-1]:%Y-%m-%d} ({len(first):,} trading days on both), "
            f"validation from {data.VALIDATION_START:%Y-%m-%d}; the TFT and Mamba-2 forecast the next day's "
            "return from windows of it, DQN and PPO trade in an environment built on it (foxlib/data/trading_env.py).")


def reproduce(results: Mapping[str, Any], dataset: str | None = None) -> Block:
    """"Reproduce this report": commands, revisions, device, software and data set, from results.json's dict."""
    cmds = commands(results)
    measured = str(measured_revision(results) or "not recorded")
    rendered = str(results.get("rendered_at_revision") or "not recorded")
    dev, env = results.get("device") or {}, results.get("environment") or {}
    device = dev.get("name", "unknown device") + (f" ({dev['type']})" if dev.get("type") else "")
    stack = ", ".join(f"{k} {env[k]}" for k in ("python", "torch", "cuda", "driver") if env.get(k))
    facts = [("measured at revision", measured), ("rendered at revision", rendered), ("device", device),
             ("software", stack or "not recorded"), ("data", dataset or dataset_description())]
    md = ("**Reproduce this report**\n\n```sh\n" + "\n".join(cmds) + "\n```\n\n"
          + "\n".join(f"- {k}: {v}" for k, v in facts))
    rows = "".join(f"<li>{html.escape(k)}: {code_html(html.escape(v))}</li>" for k, v in facts)
    return Block('<div class="foxlib-reproduce"><b>Reproduce this report</b>'
                 f"<pre>{html.escape(chr(10).join(cmds))}</pre><ul>{rows}</ul></div>", md)


# ----------------------------------------------------------------------------- one call at each end

def opening(wave: str, checks: Iterable[Any], report_dir: str | Path = ".") -> Block:
    """The first lines of a report: the link back and the answer in numbers (a variant says what differs in its
    verdict banner: foxlib.run.notebook_cells.verdict_banner)."""
    back, answer = index_link(report_dir), answer_block(checks, wave)
    return Block(back.html + answer.html, back.markdown + "\n\n" + answer.markdown)


def closing(results: Mapping[str, Any], report_dir: str | Path = ".", dataset: str | None = None) -> Block:
    """The last lines of a report: how to reproduce it, the glossary and the link back."""
    parts = [reproduce(results, dataset), glossary(), index_link(report_dir)]
    return Block("".join(p.html for p in parts), "\n\n".join(p.markdown for p in parts))


# ----------------------------------------------------------------------------- tables for readers

MAX_PAGE_WIDTH_PX = 1400  # the window every table must fit in
NUMERIC_CLASS = "foxlib-num"
MISSING = ("", "—", "-", "nan", "NaN", "None", "n/a")
# a table cell that reads as a number: "1,009.4", "−9.4", "0.9 %", "1.19x", "812 MB", "0.73x [0.69, 0.80]"
_NUMBER = re.compile(r"^[+\-\u2212]?\d[\d,]*(\.\d+)?(e[+\-]?\d+)?\s?(%|x|×|MB|MiB|GB|GiB|kB|B|ms|s)?"
                     r"(\s*\[[^\]]*\])?$")
# JupyterLab's stylesheet (nbconvert's "lab" template) right-aligns every cell of an output table with
# ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td" (specificity 0,2,1), which beats
# ".jp-RenderedHTMLCommon table td" (0,1,2): text columns and their headers came out right-aligned. The two
# ":not(.jp-RenderedMarkdown)" rules below add the table element to the lab's selector (0,2,2: text left) and
# the numeric class mark_numeric_columns sets (0,3,2: numbers right); an inline style on a row (pandas'
# <tr style="text-align: right;"> in the header) reaches a cell only where no rule does.
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
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table td,
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table th {{ text-align: left; }}
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table td.{NUMERIC_CLASS},
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table th.{NUMERIC_CLASS} {{ text-align: right; }}
"""


# REPORT_CSS as a <style> element: text left, numeric columns right, no table wider than the window
REPORT_STYLE = f'<style id="foxlib-reading-css">{REPORT_CSS}</style>'


def mark_numeric_columns(page_html: str) -> str:
    """Every cell of an all-numeric table column (missing values aside) and its header given NUMERIC_CLASS;
    tables with spanning cells are left as they are."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(page_html, "html.parser")
    for table in soup.find_all("table"):
        rows = [r.find_all(["td", "th"], recursive=False) for r in table.find_all("tr") if r.find("td")]
        width = len(rows[0]) if rows else 0  # no body row: nothing to mark
        if any(len(r) != width or any(c.get("colspan") or c.get("rowspan") for c in r) for r in rows):
            continue  # spanning cells: leave the table as it is
        for col in range(width):
            values = [t for t in (r[col].get_text(" ", strip=True) for r in rows) if t not in MISSING]
            if not values or not all(_NUMBER.match(t.strip()) for t in values):
                continue
            for r in rows:
                r[col]["class"] = r[col].get("class", []) + [NUMERIC_CLASS]
            for head in (r for r in table.find_all("tr") if not r.find("td")):
                cells = head.find_all("th", recursive=False)
                if len(cells) == width:
                    cells[col]["class"] = cells[col].get("class", []) + [NUMERIC_CLASS]
    return str(soup)


def style_report(page_html: str) -> str:
    """An exported report.html made for readers: REPORT_STYLE in its <head> (once), numeric columns marked."""
    out = mark_numeric_columns(page_html)
    if 'id="foxlib-reading-css"' in out:
        return out
    return out.replace("</head>", REPORT_STYLE + "</head>", 1) if "</head>" in out else REPORT_STYLE + out
