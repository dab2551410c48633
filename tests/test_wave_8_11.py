"""Wave 8.11 end to end with tiny parameters: what the notebook wrote, checked against itself."""
import json

import pytest

from foxlib.core.config import MB

TINY_8_11 = {"preset": "small", "batch_size": 4, "encoder_length": 10, "timing_repeats": 3,
             "accuracy_seeds": 2, "accuracy_steps": 10, "accuracy_eval_every": 5, "accuracy_val_windows": 64,
             "device": "cpu"}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from foxlib.run.runner import run_wave
    return run_wave("8.11", TINY_8_11, reports_dir=tmp_path_factory.mktemp("r"), progress=False, allow_dirty=True)


@pytest.mark.slow
def test_results_and_measurement_agree(report):
    res = json.loads((report / "results.json").read_text())
    m = json.loads((report / "measurement.json").read_text())
    assert res["wave"] == "8.11" and res["title"] == "Mixed precision"
    assert set(m["memory"]) == {"tft", "dqn", "ppo", "mamba2"}
    assert all(set(per) == {"fp32", "fp16", "bf16"} for per in m["memory"].values())
    assert set(m["timing"]) == {"fp32", "fp16", "bf16"}
    assert all(len(t["samples_s"]) == 3 and t["median_s"] > 0 for t in m["timing"].values())
    # every precision trained with both seeds; the gate's figure is recomputed from the runs
    runs = m["accuracy_runs"]
    assert sorted((r["precision"], r["seed"]) for r in runs) == sorted(
        (p, s) for p in ("fp32", "fp16", "bf16") for s in (0, 1))
    # the gate's power: every fp32 run beats climatology by the harness's min_skill, recomputed from the runs
    fp32 = [r for r in runs if r["precision"] == "fp32"]
    assert all(r["metrics"]["skill_score"] == pytest.approx(1 - r["metrics"]["quantile_loss"] / r["metrics"]["naive_quantile_loss"])
               for r in runs)
    worst = max(r["metrics"]["quantile_loss"] / r["metrics"]["naive_quantile_loss"] for r in fp32)
    power = next(c for c in res["checks"] if c["name"].startswith("TFT fp32 validation quantile loss / climatology"))
    assert power["measured"] == pytest.approx(worst) and power["limit"] == pytest.approx(0.98)
    assert power["passed"] == (worst <= 0.98)
    # the degradation over the seeds whose fp32 run has skill (all seeds, and failing, when none has: no power)
    powered = [r["seed"] for r in fp32 if r["has_skill"]]
    used = powered or [0, 1]
    mean = lambda p: sum(r["metrics"]["quantile_loss"] for r in runs if r["precision"] == p and r["seed"] in used) / len(used)  # noqa: E731
    expected = 100 * (mean("fp16") - mean("fp32")) / mean("fp32")
    gate = next(c for c in res["checks"] if c["name"].startswith("TFT accuracy degradation in fp16"))
    assert gate["measured"] == pytest.approx(expected)
    assert gate["limit"] == 5 and gate["passed"] == (bool(powered) and expected <= 5)
    assert ("no power" in gate["note"]) == (not powered)
    assert m["accuracy_harness"]["max_steps"] == 10 and m["accuracy_harness"]["target"] == "return"
    peak = next(c for c in res["checks"] if c["name"] == "TFT peak training memory in fp16")
    assert peak["measured"] == m["memory"]["tft"]["fp16"]["peak"] and peak["limit"] == 1000 * MB
    assert res["verdict"] == ("GO" if all(c["passed"] for c in res["checks"]) else "NO-GO")


@pytest.mark.slow
def test_report_shows_the_seeds_guesses_and_says_which_preset_trained(report):
    html = (report / "report.html").read_text()
    assert "Verdict:" in html and "data:image/png;base64" in html
    assert "seed&#x27;s expectation" in html or "seed's expectation" in html
    assert "+20% faster" in html
    assert "climatology QL" in html and "skill score per seed (%)" in html and "naive forecast" in html
    m = json.loads((report / "measurement.json").read_text())
    assert m["accuracy_preset"] == "small"  # "auto" on the CPU
    # the note appears only when the accuracy runs trained another preset than the one profiled
    assert ("accuracy runs used the" in html) == (m["accuracy_preset"] != "small")
