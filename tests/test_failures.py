"""Bad input and failure: a message that says what was wrong and what to do, a non-zero exit,
and the last good report untouched (no half-written report that looks whole)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from foxlib.core.config import ROOT


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _cli(reports, *args, timeout=600):
    env = {**os.environ, "FOXLIB_REPORTS": str(reports), "FOXLIB_PROGRESS": "0", "FOXLIB_ALLOW_DIRTY": "1"}
    return subprocess.run([sys.executable, "-m", "foxlib", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


@pytest.fixture
def reports(tmp_path, monkeypatch):
    """A reports folder holding a copy of the committed CPU wave 8.10 report (no notebook runs here)."""
    import shutil
    monkeypatch.setenv("FOXLIB_ALLOW_DIRTY", "1")
    r = tmp_path / "reports"
    shutil.copytree(ROOT / "reports" / "cpu" / "wave-8.10", r / "cpu" / "wave-8.10")
    return r


@pytest.mark.parametrize("args, exit_code, message", [
    (["report", "--wave", "8.7"], 2, "valid waves: 8.10, 8.11, 8.12, 8.13"),
    (["report", "--wave", "8.10", "-p", "presett=seed"], 2, "valid parameters: preset"),
    (["report", "--wave", "8.10", "-p", "batch_size=3.5"], 2, "must be int"),
    (["report", "--wave", "8.10", "-p", "ensemble=maybe"], 2, "must be bool"),
    (["report", "--wave", "8.10", "-p", "preset=huge"], 2, "valid presets: seed, small"),
    (["report", "--wave", "8.10", "-p", "precision=fp8"], 2, "valid precisions: fp32, fp16, bf16"),
    (["report", "--wave", "8.11", "-p", "models=tft,gpt"], 2, "valid models: tft, dqn, ppo, mamba2"),
    (["report", "--wave", "8.12", "-p", "strategies=fp4"], 2, "valid strategies"),
    (["report", "--wave", "8.10", "-p", "device=tpu"], 2, "valid devices: auto, cpu, cuda"),
    (["report", "--wave", "8.10", "-p", "no_equals_sign"], 2, "name=value"),
    (["report", "--wave", "8.10", "-p", "batch_size=-3"], 2, "'batch_size' must be at least 1, got -3"),
    (["report", "--wave", "8.12", "-p", "timing_warmup=-1"], 2, "'timing_warmup' must be at least 0"),
    (["report", "--wave", "8.11", "-p", "precisions=fp16"], 2, "must include fp32 (the baseline) and the candidate"),
    (["report", "--wave", "8.10", "-p", "measurements=/no/such/file.json"], 2, "measurement file /no/such/file.json not found"),
    (["report", "--wave", "8.10", "-p", f"measurements={ROOT / 'reports'}"], 2, "is a folder; give the measurement file"),
    (["report", "--wave", "8.14"], 2, "wave 8.14 (ensemble deployment) is not run: it is GO when wave 8.13 is"),
    (["report", "--wave", "8.10", "-p", "budgets_file=/no/such.toml"], 2,
     "budgets file /no/such.toml not found; check the path, or leave budgets_file empty"),
])
def test_bad_input_fails_clearly_and_touches_nothing(reports, args, exit_code, message, capsys):
    from foxlib.run.cli import main
    before = _snapshot(reports)
    assert main([*args, "--reports-dir", str(reports)]) == exit_code
    assert message in capsys.readouterr().err
    assert _snapshot(reports) == before


def test_malformed_budgets_file(reports, tmp_path, capsys):
    from foxlib.run.cli import main
    bad = tmp_path / "budgets.toml"
    bad.write_text("[tft]\npeak_training_mb = 'lots'\n")
    before = _snapshot(reports)
    assert main(["report", "--wave", "8.10", "-p", f"budgets_file={bad}", "--reports-dir", str(reports)]) == 2
    err = capsys.readouterr().err
    assert "peak_training_mb must be a positive number" in err
    assert "section [ensemble] is missing" in err  # and what else is wrong
    assert _snapshot(reports) == before


def test_corrupt_measurement_file(reports, tmp_path, capsys):
    from foxlib.run.cli import main
    bad = tmp_path / "m.json"
    bad.write_text('{"wave": "8.10", "device": {"short": "h2')  # cut off mid-write
    before = _snapshot(reports)
    assert main(["report", "--wave", "8.10", "-p", f"measurements={bad}", "--reports-dir", str(reports)]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "truncated" in err
    assert _snapshot(reports) == before


def test_missing_or_corrupt_market_data(monkeypatch):
    import arch.data.sp500

    from foxlib.data import market as data
    data.load_ohlcv.cache_clear()
    data.market_features.cache_clear()
    monkeypatch.setattr(arch.data.sp500, "load", lambda: (_ for _ in ()).throw(FileNotFoundError("sp500.csv.gz")))
    with pytest.raises(data.MarketDataError, match="could not load the offline market data.*make venv"):
        data.load_ohlcv()
    import pandas as pd
    monkeypatch.setattr(arch.data.sp500, "load", lambda: pd.DataFrame({"Open": [1.0], "Close": [1.0]}))
    with pytest.raises(data.MarketDataError, match="incomplete.*reinstall"):
        data.load_ohlcv()
    data.load_ohlcv.cache_clear()
    data.market_features.cache_clear()


def test_cuda_asked_for_where_there_is_none():
    from foxlib.memory.devices import DeviceError, resolve_device
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceError, match="no CUDA GPU.*device=cpu"):
        resolve_device("cuda")


def test_loss_turning_nan_during_training():
    from foxlib.memory import NonFiniteLossError
    from foxlib.models import MODELS
    from foxlib.harness.training import train_tft
    cfg = MODELS["tft"].config("small", lr=1e30)
    with pytest.raises(NonFiniteLossError, match="lower the learning rate"):
        train_tft(cfg, max_steps=50, eval_every=25, val_windows=16, show_progress=False, grad_clip=1e30)


def _kernel_runs_a_cell(partial):
    """Papermill saves the executed notebook as each cell starts: a cell marked running (or done) means the
    notebook runs in its kernel. (The file may be caught mid-write: then not yet.)"""
    try:
        return any(c.get("metadata", {}).get("papermill", {}).get("status") in ("running", "completed")
                   for c in json.loads((partial / "notebook.ipynb").read_text())["cells"])
    except (OSError, ValueError, KeyError):
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig, exit_codes", [(signal.SIGINT, (130,)), (signal.SIGKILL, (-9,))])
def test_interrupted_run_leaves_the_last_report(tiny_8_10, tmp_path, sig, exit_codes):
    """A run of the same report (tiny_8_10's measurement rendered again: the same variant, without
    measuring it again) interrupted while its notebook runs in the kernel: the last report stays as it was."""
    reports = tiny_8_10.parents[2]
    before = _snapshot(tiny_8_10)
    source = tmp_path / "m.json"
    source.write_bytes((tiny_8_10 / "measurement.json").read_bytes())
    env = {**os.environ, "FOXLIB_REPORTS": str(reports), "FOXLIB_PROGRESS": "0", "FOXLIB_ALLOW_DIRTY": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "foxlib", "report", "--wave", "8.10", "-p", f"measurements={source}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a test runner started in the background inherits SIGINT ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    partials = lambda: list(tiny_8_10.parent.glob(f".{tiny_8_10.name}.*.partial"))  # noqa: E731 — beside the report
    deadline = time.time() + 120
    while not (running := any(_kernel_runs_a_cell(p) for p in partials())) and proc.poll() is None \
            and time.time() < deadline:
        time.sleep(0.05)  # until the notebook runs in its kernel
    if not running or proc.poll() is not None:  # the signal must land mid-run
        proc.kill()
        pytest.fail(f"the run was not caught running its notebook (exit {proc.poll()}): {proc.communicate()[1]}")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in exit_codes, err
    if sig == signal.SIGINT:
        assert "interrupted" in err and not partials()  # cleaned up
    assert _snapshot(tiny_8_10) == before
