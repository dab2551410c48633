"""foxlib.core.results on hand-made measurements: what build() writes, the verdict it carries, and the
atomic write / read round trip with the errors a reader gets for a bad file."""
import json
import math

import numpy as np
import pytest

from foxlib.core import provenance, results
from foxlib.core.budgets import Check, verdict

MEASUREMENT = {"wave": "8.10", "measured_at": "2026-12-01T00:00:00+00:00", "device": {"type": "cpu", "short": "cpu"},
               "environment": {"python": "3.11", "git_revision": "abc1234"},
               "measure_parameters": {"batch_size": 8, "output_dir": "/elsewhere"}}


@pytest.fixture(autouse=True)
def _revision(monkeypatch):
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "feed123")


def test_build_carries_the_wave_its_parameters_revisions_and_checks():
    checks = [Check.at_most("peak", 900, 1000, "bytes"), Check.at_most("params", 10, 20, "bytes", note="n")]
    res = results.build("8.10", {"batch_size": 32, "preset": "seed", "output_dir": "out"}, MEASUREMENT, checks,
                        extra_field=(1, 2))
    assert res["wave"] == "8.10" and res["title"] == "TFT GPU memory profile"
    assert res["schema_version"] == results.SCHEMA_VERSION == 2
    # measured elsewhere: the measurement's own parameters win over the run's; output_dir is never recorded
    assert res["parameters"] == {"batch_size": 8, "preset": "seed"}
    assert res["measured_at_revision"] == "abc1234" and res["rendered_at_revision"] == "feed123"
    assert res["measured_at"] == MEASUREMENT["measured_at"] and res["device"] == MEASUREMENT["device"]
    assert res["depends_on"] == [] and res["extra_field"] == [1, 2]  # tuples become lists
    assert res["checks"] == [c.to_dict() for c in checks] and res["checks"][1]["note"] == "n"
    assert res["verdict"] == "GO"
    assert json.loads(json.dumps(res, allow_nan=False)) == res  # JSON as it stands


def test_the_verdict_is_go_only_when_every_check_passed_and_there_is_one():
    ok, over = Check.at_most("a", 1, 2, "bytes"), Check.at_most("b", 3, 2, "bytes")
    assert over.passed is False and Check.at_most("c", 2, 2, "bytes").passed  # at the limit passes
    assert verdict([ok]) == "GO" and verdict([ok, over]) == "NO-GO" and verdict([]) == "NO-GO"
    assert results.build("8.10", {}, MEASUREMENT, [ok, over])["verdict"] == "NO-GO"
    assert results.build("8.10", {}, MEASUREMENT, [])["verdict"] == "NO-GO"


def test_measured_revision_prefers_the_measurements_own_field():
    assert results.measured_revision({"measured_at_revision": "1111111", "environment": {"git_revision": "2"}}) \
        == "1111111"
    assert results.measured_revision({"environment": {"git_revision": "2222222"}}) == "2222222"
    assert results.measured_revision({}) is None


def test_non_finite_numbers_become_null_and_numpy_scalars_plain_numbers():
    clean = results.json_safe({"nan": math.nan, "inf": -math.inf, "n": np.int64(3), "x": np.float32(0.5),
                            "t": (np.float64(1.5), "s"), 7: None})
    assert clean == {"nan": None, "inf": None, "n": 3, "x": 0.5, "t": [1.5, "s"], "7": None}
    assert type(clean["n"]) is int and type(clean["x"]) is float


def test_write_then_read_is_a_round_trip_and_leaves_no_temporary_file(tmp_path):
    res = results.build("8.10", {}, MEASUREMENT, [Check.at_most("a", 1, 2, "bytes")])
    path = results.write_json(tmp_path / "deep" / "folder" / results.RESULTS_FILE, {**res, "bad": math.nan})
    assert results.read_json(path) == {**res, "bad": None}
    assert sorted(p.name for p in path.parent.iterdir()) == [results.RESULTS_FILE]
    assert "NaN" not in path.read_text() and path.read_text().endswith("}\n")
    results.write_json(path, {"wave": "8.10"})  # replaced whole
    assert results.read_json(path) == {"wave": "8.10"}


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = results.write_json(tmp_path / "r.json", {"old": 1})
    with pytest.raises(TypeError):
        results.write_json(path, {"new": object()})  # not JSON: nothing is replaced
    assert results.read_json(path) == {"old": 1} and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_read_json_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="none.json not found"):
        results.read_json(tmp_path / "none.json")
    cut = tmp_path / "cut.json"
    cut.write_text('{"wave": "8.1')
    with pytest.raises(ValueError, match="is not valid JSON .*it may be truncated"):
        results.read_json(cut)
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="is not valid JSON"):
        results.read_json(binary)
    with pytest.raises(ValueError, match="is a folder, not a JSON file"):
        results.read_json(tmp_path)
