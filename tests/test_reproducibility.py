"""The same parameters and seed give the same CPU memory figures and verdicts; every report
records where and with what it was made."""
import json

import pytest
from conftest import TINY_8_10

pytestmark = pytest.mark.slow  # every test here runs wave 8.10's notebook


def test_second_run_gives_the_same_figures_and_verdict(tiny_8_10, tmp_path):
    from foxlib.run.runner import run_wave
    again = run_wave("8.10", TINY_8_10, reports_dir=tmp_path, progress=False, allow_dirty=True)
    first = json.loads((tiny_8_10 / "results.json").read_text())
    second = json.loads((again / "results.json").read_text())
    assert first["checks"] == second["checks"]
    assert first["verdict"] == second["verdict"]
    m1 = json.loads((tiny_8_10 / "measurement.json").read_text())
    m2 = json.loads((again / "measurement.json").read_text())
    for model in m1["ensemble"]:
        p1, p2 = m1["ensemble"][model]["profile"], m2["ensemble"][model]["profile"]
        for key in ("parameters", "gradients", "optimizer_state", "activations", "peak", "forward_peak"):
            assert p1[key] == p2[key], (model, key)


def test_reports_record_versions_device_and_revision(tiny_8_10):
    res = json.loads((tiny_8_10 / "results.json").read_text())
    assert res["schema_version"] == 2 and res["depends_on"] == []
    assert res["measured_at_revision"] == res["environment"]["git_revision"] and res["rendered_at_revision"]
    env = res["environment"]
    for key in ("python", "torch", "cuda", "platform", "git_revision"):
        assert key in env
    assert env["python"].count(".") == 2 and env["torch"]
    assert res["device"]["type"] == "cpu" and res["device"]["name"]


def test_a_report_rendered_from_a_measurement_records_the_measured_parameters(tiny_8_10, tmp_path):
    """Rendering from a measurement file (a GPU run) must not record the notebook's defaults as if they
    had been measured: the measurement's own parameters win, the run parameters stay."""
    from foxlib.run.runner import run_wave
    source = tmp_path / "m.json"
    source.write_bytes((tiny_8_10 / "measurement.json").read_bytes())
    out = run_wave("8.10", {"measurements": str(source)}, reports_dir=tmp_path / "r", progress=False,
                   allow_dirty=True)
    res = json.loads((out / "results.json").read_text())
    assert res["parameters"]["preset"] == TINY_8_10["preset"] == "small"  # the notebook's default is "seed"
    assert res["parameters"]["batch_size"] == TINY_8_10["batch_size"]
    assert res["parameters"]["measurements"] == str(source.resolve())
    # measured with other parameters than the defaults: a variant, in its own folder, said so
    assert out.parent.name == "variants" and res["run"]["variant"] == tiny_8_10.name.removeprefix("wave-8.10-")
