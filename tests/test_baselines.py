"""The fp32 baselines of each page, side by side (foxlib.report.baselines): collected from figures and the peer
benchmark's row, and a disagreement said only when two intervals at one configuration do not overlap."""
import json

import pytest

from foxlib.harness.timing import median_interval
from foxlib.report import baselines


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _results(value, low, high, page="wave-8-12", config="tft/seed/b32/t60"):
    return {"measured_at_revision": "a" * 40,
            "figures": {f"{config}/fp32/{page}/step_time": {"value": value, "unit": "s", "low": low, "high": high},
                        f"{config}/fp32/model_peak": {"value": 1, "unit": "bytes"}}}


def test_a_median_interval_by_hand():
    assert median_interval([2.0] * 5) == (2.0, 2.0, 2.0, 0.9375)  # 5 samples: 1 - 2 * 0.5**5
    median, low, high, confidence = median_interval([1.0, 2.0, 3.0, 4.0, 100.0, 5.0])
    assert median == 3.5 and 1.0 <= low <= 3.5 <= high <= 100.0 and confidence == 0.95
    with pytest.raises(ValueError):
        median_interval([])


def test_pages_that_disagree_beyond_their_intervals_are_named(tmp_path):
    _write(tmp_path / "cpu/wave-8.12/results.json", _results(5.6, 4.0, 7.2))
    _write(tmp_path / "cpu/wave-8.11/results.json", _results(10.6, 9.0, 16.0, page="wave-8-11"))
    _write(tmp_path / "cpu/peer-benchmark.json",
           {"measured_at_revision": "b" * 40, "arguments": {"preset": "seed"},
            "config": {"batch_size": 32, "encoder_length": 60},
            "variants": {"foxlib_default": {"precision": "fp32", "timing": {"samples_s": [2.7] * 10}}}})
    rows = baselines.rows(tmp_path)["cpu"]
    assert [b.page for b in rows["baselines"]] == ["cpu/wave-8.11/results.json", "cpu/wave-8.12/results.json",
                                                   "cpu/peer-benchmark.json"]
    peer = rows["baselines"][2]
    assert (peer.configuration, peer.median_s, peer.low_s, peer.high_s) == ("tft/seed/b32/t60", 2.7, 2.7, 2.7)
    # 8.11 [9.0, 16.0] and 8.12 [4.0, 7.2] apart; the peer's 2.7 apart from both
    assert len(rows["disagreements"]) == 3
    assert rows["disagreements"][0].startswith("cpu/wave-8.11/results.json 10,600.0 ms [9,000.0, 16,000.0] and "
                                               "cpu/wave-8.12/results.json 5,600.0 ms")
    assert "1.89x" in rows["disagreements"][0]


def test_a_baseline_from_few_rounds_says_its_coverage(tmp_path):
    _write(tmp_path / "cpu/wave-8.12/results.json",
           {**_results(5.6, 4.0, 7.2), "figures": {"tft/seed/b32/t60/fp32/wave-8-12/step_time": {
               "value": 5.6, "unit": "s", "low": 4.0, "high": 7.2, "confidence": 0.5}}})
    _write(tmp_path / "cpu/wave-8.11/results.json", _results(10.6, 9.0, 16.0, page="wave-8-11"))
    b12, b11 = (b for b in sorted(baselines.rows(tmp_path)["cpu"]["baselines"], key=lambda b: b.page, reverse=True))
    assert b12.text() == "5,600.0 ms [4,000.0, 7,200.0] (50 % interval)" and b12.confidence == 0.5
    assert b11.text() == "10,600.0 ms [9,000.0, 16,000.0]" and b11.confidence is None


def test_pages_from_two_machines_say_which(tmp_path):
    """One device folder ("cpu") may hold pages measured on two CPUs: each baseline names its machine, and a
    disagreement between two machines says so."""
    _write(tmp_path / "cpu/wave-8.12/results.json", {**_results(5.6, 4.0, 7.2), "device": {"name": "AMD EPYC"}})
    _write(tmp_path / "cpu/wave-8.11/results.json", {**_results(10.6, 9.0, 16.0, page="wave-8-11"),
                                                    "device": {"name": "Intel(R) Xeon(R) Processor"}})
    rows = baselines.rows(tmp_path)["cpu"]
    assert [b.machine for b in rows["baselines"]] == ["Intel(R) Xeon(R) Processor", "AMD EPYC"]
    assert "(measured on Intel(R) Xeon(R) Processor and on AMD EPYC)" in rows["disagreements"][0]
    _write(tmp_path / "cpu/wave-8.11/results.json", {**_results(10.6, 9.0, 16.0, page="wave-8-11"),
                                                    "device": {"name": "AMD EPYC"}})
    assert "measured on" not in baselines.rows(tmp_path)["cpu"]["disagreements"][0]


def test_overlapping_intervals_or_other_configurations_agree(tmp_path):
    _write(tmp_path / "h200/wave-8.12/results.json", _results(0.070, 0.062, 0.078))
    _write(tmp_path / "h200/wave-8.11/results.json", _results(0.057, 0.050, 0.063, page="wave-8-11"))
    _write(tmp_path / "h200/wave-8.10/results.json", _results(0.010, 0.009, 0.011, page="wave-8-10",
                                                              config="tft/small/b8/t20"))
    rows = baselines.rows(tmp_path)["h200"]
    assert len(rows["baselines"]) == 3 and rows["disagreements"] == []
