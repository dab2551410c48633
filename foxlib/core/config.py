"""Paths and names the whole project shares."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # foxlib/core/config.py -> the repository
NOTEBOOKS_DIR = ROOT / "notebooks"
REPORTS_DIR = Path(os.environ.get("FOXLIB_REPORTS", ROOT / "reports"))
BUDGETS_FILE = Path(os.environ.get("FOXLIB_BUDGETS", ROOT / "budgets.toml"))
# where a wave notebook opened in JupyterLab and run there ("Run All", not by the runner) writes its files:
# never notebooks/ or reports/ (foxlib.run.notebook_cells.parameters)
SCRATCH_DIR = Path(os.environ.get("FOXLIB_SCRATCH", ROOT / "scratch"))
KERNEL_NAME = "foxlib"  # the Jupyter kernel `make venv` registers for papermill

MB = 10**6  # reports show MB = 10^6 bytes throughout; JSON holds bytes


def to_mb(x: float | None, digits: int = 1) -> float | None:
    """Bytes as a table's MB figure, rounded to `digits`; None where not measured."""
    return None if x is None else round(x / MB, digits)


def env_flag(name: str) -> bool:
    """An on/off setting from the environment (e.g. FOXLIB_ALLOW_DIRTY=1): 1, true or yes is on."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")
