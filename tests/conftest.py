import os

import pytest

os.environ.setdefault("FOXLIB_PROGRESS", "0")

# The smallest wave 8.10 that still walks the real path: every model, tiny presets, CPU.
TINY_8_10 = {"preset": "small", "batch_size": 4, "encoder_length": 10, "ensemble_preset": "small",
             "device": "cpu"}


@pytest.fixture(scope="session")
def tiny_8_10(tmp_path_factory):
    """Wave 8.10 run once through papermill with tiny parameters into a temporary reports folder: a variant,
    <reports>/cpu/variants/wave-8.10-<name>/ (tests run from uncommitted trees: allow_dirty)."""
    from foxlib.run.runner import run_wave
    reports = tmp_path_factory.mktemp("reports")
    return run_wave("8.10", TINY_8_10, reports_dir=reports, progress=False, allow_dirty=True)
