"""The same parameters and seed give the same CPU memory figures and verdicts; every report
records where and with what it was made."""
import json

import pytest
from conftest import TINY_8_10

pytestmark = pytest.mark.slow  # every test here reads wave 8.10's tiny notebook run (conftest's tiny_8_10)

PROFILE_KEYS = ("parameters", "gradients", "optimizer_state", "activations", "peak", "forward_peak")


def test_second_run_gives_the_same_figures_and_verdict(tiny_8_10):
    """The measurement made again, here, with the parameters the notebook measured with (its
    measure_parameters): the same figures, checks and verdict as the notebook's run wrote. The second
    measurement is the one the notebook makes (the wave's measure()), in this process rather than in a
    second papermill run (the notebook's path is tiny_8_10's)."""
    from foxlib.core import results
    from foxlib.core.budgets import load_budgets, verdict
    from foxlib.waves.wave_8_10 import analysis, measuring, records
    first = json.loads((tiny_8_10 / "results.json").read_text())
    m1 = json.loads((tiny_8_10 / "measurement.json").read_text())
    assert m1["measure_parameters"] == {**m1["measure_parameters"], **TINY_8_10}
    again = measuring.measure(**m1["measure_parameters"])
    assert type(again) is records.Measurement and again.measure_parameters == m1["measure_parameters"]
    checks = analysis.checks(again, load_budgets())
    second = json.loads(json.dumps(results.build("8.10", first["parameters"], again.to_dict(), checks)))
    assert first["checks"] == second["checks"]
    assert first["verdict"] == second["verdict"] == verdict(checks)
    m2 = again.to_dict()
    assert set(m1["ensemble"]) == set(m2["ensemble"]) == {"dqn", "ppo", "mamba2"}
    for model in ["tft", *m1["ensemble"]]:
        p1 = (m1 if model == "tft" else m1["ensemble"])[model]["profile"]
        p2 = (m2 if model == "tft" else m2["ensemble"])[model]["profile"]
        for key in PROFILE_KEYS:
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


def test_a_report_rendered_from_a_measurement_records_the_measured_parameters(tiny_8_10, tiny_8_10_rendered):
    """Rendering from a measurement file (a GPU run) must not record the notebook's defaults as if they
    had been measured: the measurement's own parameters win, the run parameters stay."""
    out, source, _, _ = tiny_8_10_rendered
    res = json.loads((out / "results.json").read_text())
    assert res["parameters"]["preset"] == TINY_8_10["preset"] == "small"  # the notebook's default is "seed"
    assert res["parameters"]["batch_size"] == TINY_8_10["batch_size"]
    # named as the report keeps it, not by a path of the machine that rendered it; the kept file is the source's data
    assert res["parameters"]["measurements"] == "measurement.json"
    assert json.loads((out / "measurement.json").read_text()) == json.loads(source.read_text())
    # measured with other parameters than the defaults: a variant, in its own folder, said so
    assert out.parent.name == "variants" and res["run"]["variant"] == tiny_8_10.name.removeprefix("wave-8.10-")
