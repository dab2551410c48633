"""Shared by every test file: the thread policy, the one notebook run the slow tier shares, and the helpers
several files use (committed files read and typed, hand-made profiles, measurements and process outputs).

Two tiers (pyproject.toml's markers; the Makefile runs them):
  make test-fast   pytest -m "not slow": unit tests on hand-made or committed records and small
                   in-process computations; no notebook, no CLI subprocess, no browser. Under a minute
                   on 2 cores.
  make test        everything (the slow tier adds papermill runs, CLI subprocesses and the browser) on two
                   workers (pytest-xdist: pytest_xdist_make_scheduler below), then scripts/test-isa.sh under
                   two capped CPU ISAs. Under 6 minutes on 2 cores.
"""
import os

# One intra-op thread, set before torch is imported (the notebooks' kernels and the CLI subprocesses
# inherit it): the tests' tensors are tiny, and on a 2-core machine a second thread only adds
# synchronisation. Measured on a loaded 2-core machine: the small TFT's profile_step took 0.8-0.9 s
# with one thread and 2.6-5.4 s with two. OMP_NUM_THREADS=2 in the environment overrides it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("FOXLIB_PROGRESS", "0")

import functools  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


# The garbage collector's full collections, and torch.profiler's start, take time in proportion to the
# Python objects alive: after the imports (torch, pandas, matplotlib, nbconvert) about 400,000, which made
# each gc.collect() ~0.17 s and each profile_step of a one-layer model ~0.23 s, most of the fast tier's
# time. Objects that outlive the collection and every earlier test file (modules, caches) are moved to
# gc's permanent generation; collections then scan only what the tests make (profile_step of that model:
# ~0.004 s). Reference counting frees frozen objects as before; only cycles among them are never collected.
def _collect_then_freeze():
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session):
    _collect_then_freeze()


@pytest.fixture(autouse=True, scope="module")
def _freeze_what_earlier_files_left():
    _collect_then_freeze()


# make test runs the tests on two workers (pytest-xdist: -n 2 --dist loadfile). A file's tests go to one
# worker, so that its module-scoped runs (wave 8.11's and 8.13's notebooks, a model built once) are made once;
# the files that read the session's wave 8.10 runs (tiny_8_10 and what is made from it) go together, as one
# unit, so that those are made once too. Each worker has its own temporary folders (pytest's basetemp per
# worker). (--dist loadgroup would say this with marks, but it does not group on pytest 9.2:
# pytest-dev/pytest-xdist#1386.)
@functools.cache
def _reads_tiny_8_10(path: str) -> bool:
    """Whether the test file at `path` uses the tiny_8_10 fixtures."""
    try:
        with open(path) as f:
            return "tiny_8_10" in f.read()
    except OSError:
        return False


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedRunsScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "tiny_8_10" if _reads_tiny_8_10(str(config.rootpath / path)) else path
    return SharedRunsScheduling(config, log)


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


def snapshot(folder):
    """Every file under `folder`, by relative path, with its bytes."""
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="session")
def tiny_8_10_rendered(tiny_8_10, tmp_path_factory):
    """tiny_8_10's measurement rendered as a GPU run's is (the measurements parameter: no measuring) into a
    reports folder that already holds a copy of the committed canonical CPU wave 8.10 report and the index:
    one render shared by the tests of what such a report records and of what it leaves alone.
    Returns (report folder, the measurement file rendered, the reports folder, its files before the render)."""
    import shutil

    from foxlib.core.config import ROOT
    from foxlib.report import index
    from foxlib.run.runner import run_wave
    base = tmp_path_factory.mktemp("rendered")
    source = base / "m.json"
    source.write_bytes((tiny_8_10 / "measurement.json").read_bytes())
    reports = base / "reports"
    shutil.copytree(ROOT / "reports" / "cpu" / "wave-8.10", reports / "cpu" / "wave-8.10")
    index.write_index(reports)
    before = snapshot(reports)
    out = run_wave("8.10", {"measurements": str(source)}, reports_dir=reports, progress=False, allow_dirty=True)
    return out, source, reports, before


# The committed canonical reports (reports/<device>/wave-<N>/), read one way by every test that reads them.
def committed_path(device: str, wave: str, name: str = "measurement.json") -> Path:
    """reports/<device>/wave-<wave>/<name> of this repository: a committed canonical report's file."""
    from foxlib.core.config import ROOT
    return ROOT / "reports" / device / f"wave-{wave}" / name


@functools.cache
def _committed_text(path: Path) -> str:
    return path.read_text()


def committed(device: str, wave: str, name: str = "measurement.json") -> dict:
    """The data of a committed report's file (committed_path): measurement.json by default, or results.json. A new
    dict on each call (tests edit what they get)."""
    return json.loads(_committed_text(committed_path(device, wave, name)))


def typed_measurement(data: dict, source: str):
    """A measurement's data typed as a render reads it: its wave's records.Measurement, from_dict with `source`
    named."""
    from foxlib.core.critical_path import get_wave
    return get_wave(data["wave"]).part("records").Measurement.from_dict(data, source)


def committed_measurement(device: str, wave: str):
    """The committed canonical measurement of a device and wave, typed (typed_measurement)."""
    return typed_measurement(committed(device, wave), str(committed_path(device, wave)))


def measurement_at(path: str | Path):
    """The measurement.json at `path` (a variant's, or one a test wrote), typed (typed_measurement)."""
    return typed_measurement(json.loads(Path(path).read_text()), str(path))


def fresh_process_output(samples: dict, profiles: dict | None = None) -> dict:
    """A fresh process's output as foxlib.harness.fresh_process.measure_in_fresh_process writes it: per variant its
    step times (s), their median and its profile's dict (None where not profiled)."""
    profiles = profiles or {}
    return {"variants": {n: {"profile": profiles.get(n), "step_s_samples": s, "step_s_median": sorted(s)[len(s) // 2]}
                         for n, s in samples.items()}, "cublas_workspace_config": None, "env": {}}


def hand_harness(**kw):
    """The accuracy harness of hand-made runs (foxlib.harness.training.harness_config): the small TFT, one step."""
    from foxlib.harness.training import harness_config
    from foxlib.models import MODELS
    return harness_config(MODELS["tft"].preset("small"), max_steps=1, eval_every=1, patience=1, val_windows=8, **kw)


def typed_8_12(m):
    """Wave 8.12's record of a typed measurement (records.Measurement812.from_measurement), as the notebook makes it."""
    from foxlib.waves.wave_8_12 import records
    return records.Measurement812.from_measurement(m)


def step_profile(**kw):
    """A typed eager step profile (foxlib.memory.profile.MemoryProfile), every category 10 MB but those given."""
    from foxlib.core.config import MB
    from foxlib.memory.profile import MemoryProfile
    from foxlib.memory.tolerances import CATEGORIES
    base = dict(device="cpu", device_name="cpu", precision="fp32", n_parameters=0, activations_by_module={},
                saved_tensor_saves=0, buffers={}, live_before_step=0, loss=0.0, peak_method="test")
    return MemoryProfile(**base | {c: 10 * MB for c in CATEGORIES} | kw)


def graphed_profile(**kw):
    """A typed CUDA-graph step profile (foxlib.memory.cuda_graph.GraphedProfile), 10 MB a category but those given."""
    from foxlib.core.config import MB
    from foxlib.memory.cuda_graph import GraphedProfile
    base = dict(device="cuda:0", device_name="test", precision="fp32", n_parameters=0, parameters=10 * MB,
                gradients=10 * MB, optimizer_state=10 * MB, batch=10 * MB, peak=10 * MB, workspace_bytes=0, loss=0.0,
                peak_method="test", warmup_steps=3, cuda={})
    return GraphedProfile(**base | kw)


ROUNDS_8_12 = 6  # the timing rounds of hand_8_12_measurement's strategies


def hand_8_12_measurement(rows):
    """A typed, checked wave 8.12 measurement (records.Measurement, the header included) with strategies (name,
    precision, peak MB, step s, quantile loss, own runs?); every round's step takes the same time (so each ratio's
    interval is that ratio, exactly)."""
    from foxlib.core.config import MB
    from foxlib.harness.floors import floors
    from foxlib.harness.timing import Timing
    from foxlib.waves.wave_8_12 import records
    from foxlib.waves.wave_8_12.strategies import BASELINE
    harness = hand_harness().to_dict()
    m = {"wave": "8.12", "measured_at": "2026-01-01T00:00:00+00:00", "measure_parameters": {"preset": "seed"},
         "device": {"type": "cpu", "name": "test", "short": "cpu"},
         "environment": {"python": "3.11.7", "torch": "test", "cuda": None, "platform": "test",
                         "git_revision": "abc1234"},
         "base_config": {"batch_size": 32, "encoder_length": 60},
         "strategies": {}, "skipped": {}, "memory": {}, "predicted": {}, "timing": {}, "accuracy_runs": {},
         "accuracy_source": {}, "claim_runs": {"skipped_all": "not asked"},
         "accuracy_harness": harness,
         "cublas_workspace": {"skipped_all": "not asked"}, "accuracy_preset": "seed", "same_function": {},
         "floors": floors(1_000_000, None, "test").to_dict()}
    for name, precision, peak, step, loss, own in rows:
        m["strategies"][name] = {"precision": precision, "overrides": {}, "seed_guess": None, "changes_numerics": own,
                                 "cuda_graph": False}
        m["memory"][name] = step_profile(peak=peak * MB, activations=0, n_parameters=1_000_000).to_dict()
        m["timing"][name] = Timing(name, (step,) * ROUNDS_8_12).to_dict()
        if own:
            m["accuracy_runs"][name] = [{
                "precision": precision, "seed": 0, "steps": 1, "best_step": 1, "stopped_early": False, "seconds": 1.0,
                "history": [], "harness": harness, "metrics": {
                    "quantile_loss": loss, "naive_quantile_loss": 1.2, "skill_score": 1 - loss / 1.2,
                    "coverage_10_90": 0.8, "naive_coverage_10_90": 0.8}}]
        m["accuracy_source"][name] = name if own else BASELINE
    return records.Measurement.from_dict(m)


def recorded_training_steps(monkeypatch, module) -> list:
    """Every TrainingStep (foxlib.memory.step) that `module` makes from now on, each with `losses`: the loss
    (a float) of each of its calls."""
    from foxlib.memory.step import TrainingStep
    made = []

    class Recorded(TrainingStep):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.losses = []
            made.append(self)

        def __call__(self, *args, **kwargs):
            loss = super().__call__(*args, **kwargs)
            self.losses.append(loss.item())
            return loss

    monkeypatch.setattr(module, "TrainingStep", Recorded)
    return made
