"""One validation layer: every input that looks harmless but would fail in a notebook, or falsify a
report, is refused before anything is written, exit 2, naming what is valid. No notebook runs here."""
import copy
import json
import math
import re
import types

import pytest

from foxlib.run import preflight

from foxlib.core import results
from foxlib.run.cli import main
from foxlib.core.budgets import BudgetsError, load_budgets
from foxlib.core.config import ROOT
from foxlib.core.parameters import ParameterError, read_parameters, resolve
from foxlib.core.critical_path import WAVES

from tests.conftest import committed, committed_measurement, committed_path


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def reports(tmp_path, monkeypatch):
    """A reports folder with a canonical report in it, and a clean-looking tree (no dirty refusal first)."""
    monkeypatch.setenv("FOXLIB_ALLOW_DIRTY", "1")
    r = tmp_path / "reports"
    (r / "cpu" / "wave-8.12").mkdir(parents=True)
    (r / "cpu" / "wave-8.12" / "results.json").write_text('{"wave": "8.12", "verdict": "GO"}')
    return r


@pytest.mark.parametrize("args, message", [
    (["report", "--wave", "8.12", "-p", "strategies="], "parameter 'strategies' is empty"),
    (["report", "--wave", "8.12", "-p", "strategies= ; "], "parameter 'strategies' is empty"),
    (["report", "--wave", "8.11", "-p", "models="], "parameter 'models' is empty"),
    (["report", "--wave", "8.11", "-p", "precisions=,"], "parameter 'precisions' is empty"),
    (["report", "--wave", "8.11", "-p", "models=dqn,ppo"], "must include tft"),
    (["reports", "-p", "foo=1"], "unknown parameter(s) foo: no wave has them"),
    (["report", "--wave", "8.13", "-p", "card_gb=inf"], "'card_gb' must be a finite number"),
    (["report", "--wave", "8.13", "-p", "card_gb=nan"], "'card_gb' must be a finite number"),
    (["report", "--wave", "8.13", "-p", "card_gb=-1"], "card_gb must be positive"),
    (["report", "--wave", "8.10", "-p", "encoder_length=100000"], "'encoder_length' must be at most"),
    (["report", "--wave", "8.10", "-p", "seed=99999999999"], "'seed' must be at most"),
    (["report", "--wave", "8.10", "-p", "snapshot_path=/no/such/folder/s.pickle"], "does not exist"),
    (["report", "--wave", "8.12", "--parameters", "strategies='bf16"], "cannot be split"),
])
def test_harmless_looking_input_is_refused(reports, args, message, capsys):
    before = _snapshot(reports)
    assert main([*args, "--reports-dir", str(reports)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert _snapshot(reports) == before


def test_reports_checks_every_wave_before_running_any(reports, capsys, monkeypatch):
    import foxlib.run.runner
    monkeypatch.setattr(foxlib.run.runner, "run_wave", lambda *a, **k: pytest.fail("a wave ran"))
    assert main(["reports", "-p", "card_gb=0", "--reports-dir", str(reports)]) == 2  # 8.13's, found before 8.10 runs
    assert "card_gb" in capsys.readouterr().err


def test_the_dependency_order_of_the_waves():
    assert list(WAVES) == ["8.10", "8.11", "8.12", "8.13"]


def test_parameters_reject_nan_and_inf():
    declared = read_parameters(WAVES["8.13"].notebook)
    for bad in ("nan", "inf", "-inf", "1e999"):
        with pytest.raises(ParameterError, match="must be a finite number"):
            resolve(declared, {"card_gb": bad})
    with pytest.raises(ParameterError, match="must be a finite number"):
        resolve(declared, {"card_gb": math.inf})
    assert resolve(declared, {"card_gb": "2.5"})["card_gb"] == 2.5


# ----------------------------------------------------------------------------- budgets

BUDGETS = (ROOT / "budgets.toml").read_text()


@pytest.mark.parametrize("text, message", [
    (BUDGETS.replace("peak_training_mb = 1000", "peak_training_mb = nan"), "peak_training_mb must be a positive number"),
    (BUDGETS.replace("peak_training_mb = 1000", "peak_training_mb = inf"), "peak_training_mb must be a positive number"),
    (BUDGETS.replace("max_slowdown = 2.0", "max_slowdown = -inf"), "max_slowdown must be a positive number"),
    (BUDGETS + "\n[tft2]\npeak_training_mb = 1\n", "section [tft2] is not a known section (known: tft, ensemble"),
    (BUDGETS.replace("[speed]", "[speed]\nmax_slowdwn = 3"), "max_slowdwn is not a known budget"),
])
def test_budgets_reject_non_finite_values_and_unknown_sections(tmp_path, text, message):
    path = tmp_path / "budgets.toml"
    path.write_text(text)
    with pytest.raises(BudgetsError, match=re.escape(message)):
        load_budgets(path)


def test_a_nan_budget_is_refused_by_the_cli(reports, tmp_path, capsys):
    path = tmp_path / "b.toml"
    path.write_text(BUDGETS.replace("peak_training_mb = 1000", "peak_training_mb = nan"))
    before = _snapshot(reports)
    assert main(["report", "--wave", "8.10", "-p", f"budgets_file={path}", "--reports-dir", str(reports)]) == 2
    assert "peak_training_mb must be a positive number (finite), got nan" in capsys.readouterr().err
    assert _snapshot(reports) == before


# ----------------------------------------------------------------------------- measurement files

def _edit(data, path, value):
    *head, last = path
    obj = data
    for k in head:
        obj = obj[k]
    if value is KeyError:
        del obj[last]
    else:
        obj[last] = value
    return data


@pytest.mark.parametrize("path, value, message", [
    (("device", "short"), "../../outside", "is not a plain device name"),
    (("device", "short"), "", "is not a plain device name"),
    (("device", "short"), "H200", "is not a plain device name"),
    (("device", "short"), "/tmp/x", "is not a plain device name"),
    (("device", "type"), "tpu", "device.type 'tpu' is not one of cpu, cuda"),
    (("device",), KeyError, "has no device record"),
    (("tft", "profile", "peak"), -5, "tft.profile.peak is -5 bytes"),
    (("tft", "profile", "activations"), float("nan"), "tft.profile.activations is nan"),
    (("tft", "profile", "peak"), float("inf"), "tft.profile.peak is inf"),
    (("schema_version",), 0, "schema_version 0; this foxlib reads 2"),
    (("schema_version",), KeyError, "schema_version 1; this foxlib reads 2"),
    (("bogus",), 1, "holds bogus, which a wave 8.10 measurement does not"),
    (("schema_version",), 99, "schema_version 99"),
    (("tft",), KeyError, "lacks tft"),
    (("tft", "profile", "activations_by_module"), KeyError, "malformed (TypeError: MemoryProfile.__init__() missing"),
    (("environment",), KeyError, "lacks environment"),
    (("environment", "torch"), KeyError, "malformed (TypeError: Environment.__init__() missing 1 required keyword"),
    (("device", "memory"), 1, "malformed (TypeError: Device.__init__() got an unexpected keyword argument 'memory'"),
    (("wave",), "8.11", "is not a wave 8.10 measurement"),
    (("measure_parameters", "batch_size"), "lots", "must be int"),
    (("measure_parameters", "batch_size"), -3, "'batch_size' must be at least 1"),
    (("depends_on",), [{"path": "reports/cpu/wave-8.12/results.json", "revision": "abc", "sha256": "0" * 64}],
     "changed since it was used"),
])
def test_bad_measurement_files_are_refused_before_anything_is_written(reports, tmp_path, path, value, message,
                                                                       capsys):
    data = _edit(committed("cpu", "8.10"), path, value)
    source = tmp_path / "m.json"
    source.write_text(json.dumps(data))  # json writes NaN and Infinity as such: a file foxlib never writes
    before = _snapshot(reports)
    assert main(["report", "--wave", "8.10", "-p", f"measurements={source}", "--reports-dir", str(reports)]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert _snapshot(reports) == before
    assert not (tmp_path / "outside").exists()


def test_every_committed_measurement_passes_and_is_in_its_records_form(tmp_path):
    """Canonical and variant reports alike, each re-rendered from its measurement.json: it passes the checks
    before a render (preflight, the wave its folder names), and, migrated once, it is byte for byte what its
    wave's typed Measurement writes (to_dict, as notebook_cells.finish writes it), so a render copies it
    unchanged and no older layout is read."""
    paths = sorted((ROOT / "reports").glob("**/wave-*/measurement.json"))
    assert len(paths) >= 10  # 4 waves on 2 devices, and the H200's variants
    for path in paths:
        m = preflight.check_measurement(path.parent.name.removeprefix("wave-")[:4], path)
        assert results.write_json(tmp_path / "m.json", m.to_dict()).read_bytes() == path.read_bytes(), path


def _required(wave):
    """The keys a wave's measurement must hold: its type's fields without a default."""
    from foxlib.core.critical_path import get_wave
    keys = get_wave(wave).part("records").Measurement.required()
    return [k for k in keys if k not in ("wave", "device", "schema_version")]  # (their own messages: test_bad_...)


@pytest.mark.parametrize("wave", list(WAVES))
def test_only_the_named_parts_of_a_measurement_are_optional(wave):
    """Pinned here, not read from the type: a field that wrongly gained a default would drop out of the checks."""
    from foxlib.core.critical_path import get_wave
    m = get_wave(wave).part("records").Measurement
    assert set(m.keys()) - set(m.required()) == ({"resumed", "schema_version", "timelines"} if wave == "8.12" else set())


@pytest.mark.parametrize("wave", list(WAVES))
def test_a_measurement_without_its_models_is_refused(wave):
    data = committed("cpu", wave)
    for key in _required(wave):
        broken = copy.deepcopy(data)
        del broken[key]
        with pytest.raises(ValueError, match=f"lacks {key}"):
            preflight.check_measurement_data(wave, broken)


def test_wave_8_12_may_lack_only_its_optional_parts():
    """timelines (timelines=False) and resumed (a run not resumed) may be absent; a key it does not hold is
    refused; typed, the measurement writes back the file it was read from, key for key."""
    data = committed("h200", "8.12")
    assert {"timelines", "resumed"} <= set(data) and "schema_version" not in data
    for key in ("timelines", "resumed"):
        preflight.check_measurement_data("8.12", {k: v for k, v in data.items() if k != key})
    with pytest.raises(ValueError, match="lacks floors"):  # every run takes them (measuring.step_floors)
        preflight.check_measurement_data("8.12", {**data, "floors": None})
    with pytest.raises(ValueError, match="holds bogus, which a wave 8.12 measurement does not"):
        preflight.check_measurement_data("8.12", {**data, "bogus": 1})
    with pytest.raises(ValueError, match="schema_version 2; this foxlib reads 1"):
        preflight.check_measurement_data("8.12", {**data, "schema_version": 2})


@pytest.mark.parametrize("wave", list(WAVES))
def test_the_notebook_reads_its_measurement_typed_and_checked(wave, tmp_path):
    """measure_or_load gives the wave's records.Measurement, which writes back the file it read; a file its
    type refuses fails there, naming the file."""
    from foxlib.run import notebook_cells
    m = notebook_cells.measure_or_load(wave, {"measurements": str(committed_path("cpu", wave))})
    assert type(m) is WAVES[wave].part("records").Measurement
    bad = tmp_path / "measurement.json"
    bad.write_text(json.dumps({**m.to_dict(), "bogus": 1}))
    with pytest.raises(ValueError, match=f"{re.escape(str(bad))} holds bogus"):
        notebook_cells.measure_or_load(wave, {"measurements": str(bad)})


def test_truncated_and_folder_measurements(tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text('{"wave": "8.10", "dev')
    with pytest.raises(ValueError, match="not valid JSON"):
        preflight.check_measurement("8.10", bad)
    with pytest.raises(ValueError, match="not found"):
        preflight.check_measurement("8.10", tmp_path / "none.json")
    assert results.read_json  # noqa: B018


# ----------------------------------------------------------------------------- memory

def test_a_run_that_cannot_fit_is_refused_naming_both_figures(monkeypatch):
    monkeypatch.setattr(preflight, "free_bytes", lambda device: (50_000_000, "available RAM (test)"))
    predicted, real = [], preflight.predicted_peak  # the TFT's real prediction, made once for both calls

    def once(*args):
        predicted[:] = predicted or [real(*args)]
        return predicted[0]
    monkeypatch.setattr(preflight, "predicted_peak", once)
    params = resolve(read_parameters(WAVES["8.10"].notebook), {"preset": "small", "batch_size": "4",
                                                              "encoder_length": "10", "device": "cpu"})
    with pytest.raises(preflight.MemoryRefused, match=r"predicted to peak at [\d,.]+ MB .*50\.0 MB of available "
                                                      r"RAM \(test\).*--force"):
        preflight.check_memory("8.10", params)
    out = preflight.check_memory("8.10", params, force=True)
    assert 0 < out["predicted_bytes"] < out["needed_bytes"] and out["free_bytes"] == 50_000_000


def test_memory_refusal_from_the_cli_writes_nothing(reports, monkeypatch, capsys):
    monkeypatch.setattr(preflight, "free_bytes", lambda device: (1, "available RAM (test)"))
    monkeypatch.setattr(preflight, "predicted_peak",
                        lambda wave, params, device, checked=None: (5_000_000, "the step (test)"))
    before = _snapshot(reports)
    args = ["report", "--wave", "8.10", "-p", "preset=small", "-p", "batch_size=2", "-p", "encoder_length=5",
            "-p", "device=cpu", "--reports-dir", str(reports)]
    assert main(args) == 2
    assert "would not fit" in capsys.readouterr().err
    assert _snapshot(reports) == before


def test_free_memory_on_the_cpu_is_memavailable():
    import torch
    free, what = preflight.free_bytes(torch.device("cpu"))
    assert "MemAvailable" in what and free > 0


def test_wave_8_13_is_judged_by_its_four_models_together(monkeypatch):
    """The sum of the four models' predicted step peaks, each at its own configuration and precision."""

    import torch

    import foxlib.memory
    seen = []

    def fake(card, cfg, precision="fp32", **kwargs):
        seen.append((card.name if hasattr(card, "name") else card.title, precision))
        return types.SimpleNamespace(peak=1_000_000 * len(seen))
    monkeypatch.setattr(foxlib.memory, "predict_step", fake)
    params = resolve(read_parameters(WAVES["8.13"].notebook), {"preset": "small", "device": "cpu",
                                                              "tft_config": '{"precision": "bf16"}'})
    total, what = preflight.predicted_peak("8.13", params, torch.device("cpu"))
    assert "four training steps" in what and len(seen) == 4 and total == 10_000_000
    assert sorted(p for _, p in seen) == ["bf16", "fp32", "fp32", "fp32"]


def test_the_8_13_preflight_predicts_the_tft_of_the_runs_card_class(monkeypatch):
    """The memory preflight predicts the TFT that wave 8.13 validates: 8.12's recommendation for the run's card class
    (an emulated fp16 class's on a bf16 GPU, not the device's own), resolved as measure resolves it."""
    import torch

    import foxlib.memory
    from foxlib.core.schema import Device
    from foxlib.waves.wave_8_13 import measuring, tft
    asked = []

    def spy(tft_config, preset, device_short, card_class=None, **kwargs):
        asked.append(card_class)
        return tft.resolve_tft('{"precision": "fp32"}', preset, device_short)
    # an H200 (compute capability 9.0: the bf16 class) without touching CUDA
    monkeypatch.setattr(measuring, "resolve_device", lambda device: torch.device("cuda", 0))
    monkeypatch.setattr(measuring, "describe", lambda dev: Device("cuda", "NVIDIA H200", "h200", capability="9.0"))
    monkeypatch.setattr(measuring, "short_name", lambda dev: "h200")
    monkeypatch.setattr(measuring, "resolve_tft", spy)
    monkeypatch.setattr(foxlib.memory, "predict_step", lambda *a, **k: types.SimpleNamespace(peak=1))
    params = resolve(read_parameters(WAVES["8.13"].notebook), {"preset": "small", "card_class": "fp16"})
    preflight.predicted_peak("8.13", params, torch.device("cuda", 0))
    assert asked == ["fp16"]  # the emulated class's recommendation, not the GPU's own (bf16)


@pytest.mark.parametrize("command", ["report", "measure"])
def test_one_8_13_preflight_resolves_its_tft_once(command, reports, monkeypatch):
    """A run's preflight checks wave 8.13's parameters (runner.plan: preflight.check) and predicts its peak
    (preflight.check_memory) from one measuring.CheckedRun: the TFT (8.12's results read and cited) is resolved
    once before the run starts, not once for each."""
    import foxlib.memory
    from foxlib.run import notebook_cells, runner
    from foxlib.waves.wave_8_13 import measuring, tft
    resolved, at_start = [], []

    def spy(*args, **kwargs):
        resolved.append(args)
        return tft.resolve_tft(*args, **kwargs)

    def start(*args, **kwargs):  # where the run would begin: the notebook (report) or measure (measure)
        at_start.append(len(resolved))
        raise ValueError("stopped where the run starts (test)")
    monkeypatch.setattr(measuring, "resolve_tft", spy)
    monkeypatch.setattr(foxlib.memory, "predict_step", lambda *a, **k: types.SimpleNamespace(peak=1))
    monkeypatch.setattr(runner, "_execute", start)
    monkeypatch.setattr(notebook_cells, "measure", start)
    where = ["--reports-dir", str(reports)] if command == "report" else ["--out", str(reports / "m.json")]
    assert main([command, "--wave", "8.13", "-p", "preset=small", "-p", "device=cpu", "--force", *where]) == 2
    assert at_start == [1]


def test_typed_parts_keep_absent_and_none_as_they_are():
    """core.schema.typed, the one rule Sparse records and 8.13's measurement type their parts by: a part absent stays
    absent, a None (a record per model, too) stays None, a list becomes a tuple of records."""
    import dataclasses as dc
    from foxlib.core.schema import Record, Sparse, typed

    @dc.dataclass(frozen=True)
    class P(Record):
        x: int

    @dc.dataclass(frozen=True)
    class S(Sparse):
        one: P | None = None
        each: dict[str, P] | None = None
        PARTS = {"one": P}
        MANY = {"each": P}

    assert typed({"one": P}, {"each": P}, {"one": [{"x": 1}], "each": None}) == {"one": (P(1),), "each": None}
    assert S.from_dict({"each": None}) == S() and S.from_dict({"each": {"a": {"x": 2}}}).each == {"a": P(2)}
    assert S().to_dict() == {} and S(P(3)).to_dict() == {"one": {"x": 3}}


def test_one_rule_leaves_out_a_field_that_holds_its_default():
    """core.schema.written, the rule Sparse records and every wave's measurement are written by: a field that holds
    its default is absent (an absent key reads as it), any other value written, None included where it is no default."""
    import dataclasses as dc
    from foxlib.core.schema import Sparse, written

    @dc.dataclass(frozen=True)
    class S(Sparse):
        kept: int | None
        level: int = 1
        note: str | None = None

    assert S(None).to_dict() == {"kept": None} and S.from_dict({"kept": None}) == S(None)
    assert S(2, 3, "x").to_dict() == {"kept": 2, "level": 3, "note": "x"}
    assert written(S(2, 3), ["level", "kept"]) == {"level": 3, "kept": 2}
    cpu = committed_measurement("cpu", "8.12")  # 8.12's schema_version (default 1) is absent, as its file has it
    assert cpu.schema_version == 1 and cpu.resumed is None and "timelines" in cpu.to_dict()
    assert "schema_version" not in cpu.to_dict() and "resumed" not in cpu.to_dict()
    assert "schema_version" not in committed("cpu", "8.12")
