"""Progress bars for long work (training, sweeps, waves), on stderr so reports stay clean."""
from __future__ import annotations

import contextlib
import os
import sys

from tqdm import tqdm


class _Bar:
    def __init__(self, bar):
        self._bar = bar

    def describe(self, text: str) -> None:
        """Say what is being done now."""
        self._bar.set_description_str(text)

    def advance(self, n: int = 1, **metrics) -> None:
        if metrics:
            self._bar.set_postfix(metrics)
        self._bar.update(n)


@contextlib.contextmanager
def progress(total: int, what: str):
    """A bar of `total` steps; FOXLIB_PROGRESS=0 silences it."""
    disable = os.environ.get("FOXLIB_PROGRESS", "1") == "0"
    with tqdm(total=total, desc=what, file=sys.stderr, disable=disable, leave=True,
              dynamic_ncols=True, mininterval=1.0) as bar:
        yield _Bar(bar)
