"""Block, the form every reading aid of a report takes (foxlib/report/reading.py): the same piece
as HTML and as Markdown, which a notebook shows by making it a cell's last expression or with
`IPython.display.display`; code_html marks `code` spans in already escaped text."""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, repr=False)
class Block:
    """A piece of a report in both forms a notebook output can carry."""
    html: str
    markdown: str

    def _repr_html_(self) -> str:
        return self.html

    def _repr_markdown_(self) -> str:
        return self.markdown

    def __str__(self) -> str:
        return self.markdown

    __repr__ = __str__  # text/plain of the display bundle


def code_html(escaped: str) -> str:
    """`x` in already escaped text as <code>x</code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
