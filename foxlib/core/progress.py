"""Progress bars for long work (training, sweeps, waves), on stderr so reports stay clean."""
from __future__ import annotations

import os
import sys

from tqdm import tqdm


class Bar(tqdm):
    describe = tqdm.set_description_str  # bar.describe(text): say what is being done now

    def advance(self, n: int = 1, **metrics) -> None:
        if metrics:
            self.set_postfix(metrics)
        self.update(n)


def progress(total: int, what: str, show: bool = True) -> Bar:
    """A bar of `total` steps, for a with block; `show` False or FOXLIB_PROGRESS=0 silences it."""
    return Bar(total=total, desc=what, file=sys.stderr,
               disable=not show or os.environ.get("FOXLIB_PROGRESS", "1") == "0",
               leave=True, dynamic_ncols=True, mininterval=1.0)
