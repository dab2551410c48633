"""The jinja2 templates of the pages not made from a notebook (the index, the benchmarks' pages). Apart from
render.py, which needs nbformat: a GPU machine without Jupyter writes the benchmarks' pages too."""
from __future__ import annotations

from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).parent / "templates"


def template(name: str, **options) -> jinja2.Template:
    """The jinja2 template `name` of TEMPLATES, its block tags trimmed (trim_blocks, lstrip_blocks); `options`: the
    page's other jinja2.Environment settings (autoescape, undefined, ...)."""
    loader = jinja2.FileSystemLoader(TEMPLATES)
    return jinja2.Environment(loader=loader, trim_blocks=True, lstrip_blocks=True, **options).get_template(name)
