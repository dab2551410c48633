"""Wave 8.11 end to end with tiny parameters: what the notebook wrote, checked against itself."""
import json

import pytest

from foxlib.core.config import MB
from foxlib.waves.wave_8_11 import analysis, records, tables
from tests.conftest import committed, committed_measurement

# two of the four models (the TFT, whose fp16 peak is checked, and the cheapest other): every model given
# is profiled in every precision, and only those (the loop is the same for four)
TINY_8_11 = {"preset": "small", "batch_size": 4, "encoder_length": 10, "models": "tft,dqn", "timing_repeats": 3,
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
    assert set(m["memory"]) == set(m["predicted"]) == {"tft", "dqn"}
    assert all(set(per) == {"fp32", "fp16", "bf16"} for per in [*m["memory"].values(), *m["predicted"].values()])
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


COMMITTED = ("cpu", "h200")


@pytest.mark.parametrize("device", COMMITTED)
def test_the_speed_chart_draws_the_speed_tables_figures(device):
    import matplotlib.pyplot as plt
    from foxlib.report import charts
    m = committed_measurement(device, "8.11")
    ratios = analysis.speed_ratios(m)
    table = tables.speed_table(m).set_index("precision")
    assert list(ratios) == list(table.index) == m.precisions
    named = {f.key.split("/")[-2]: f for f in analysis.named_figures(m) if f.key.endswith("/step_time_ratio")}
    assert set(named) == set(ratios) - {"fp32"}
    for p, r in ratios.items():
        assert table.loc[p, "median of per-round ratios to fp32"] == round(r.median, 3)
        assert table.loc[p, "ratio interval (low, high)"] == f"{r.low:.2f} – {r.high:.2f}"
        if p != "fp32":  # results.json's figure is the table's
            assert (named[p].value, named[p].low, named[p].high) == (r.median, r.low, r.high)
    assert ratios["fp32"].median == ratios["fp32"].low == ratios["fp32"].high == 1.0
    fig = charts.step_time_ratios(ratios, "t")
    points = [c.lines[0].get_xdata()[0] for c in fig.axes[0].containers]
    assert points == [r.median for r in ratios.values()]
    caption, alt = tables.speed_figure_text(ratios)
    assert all(f"{p} {r}" in alt for p, r in ratios.items()) and "95 % bootstrap interval" in caption
    plt.close(fig)


def test_the_first_screens_speed_line_reads_each_interval_against_one(monkeypatch):
    from foxlib.harness.timing import RatioInterval
    m = committed_measurement("cpu", "8.11")  # fp32, fp16, bf16
    monkeypatch.setattr(tables, "speed_ratios", lambda _: {"fp32": RatioInterval(1.0, 1.0, 1.0),
                                                           "fp16": RatioInterval(11.0, 10.2, 11.3),
                                                           "bf16": RatioInterval(0.97, 0.9, 1.02, 0.5)})
    line = tables.speed_line(m)
    assert "fp16 11.00x [10.20, 11.30] of fp32's step time (slower)" in line
    assert "bf16 0.97x [0.90, 1.02] (50 % interval) of fp32's step time (a tie with fp32)" in line
    assert f"fp32's step {1e3 * m.timing['fp32'].median_s:,.1f} ms" in line and '"+20% faster"' in line
    monkeypatch.setattr(tables, "speed_ratios", lambda _: {"fp32": RatioInterval(1.0, 1.0, 1.0),
                                                           "fp16": RatioInterval(0.8, 0.7, 0.99),
                                                           "bf16": RatioInterval(0.8, 0.7, 1.0)})
    assert "(faster)" in tables.speed_line(m) and "bf16 0.80x [0.70, 1.00] of fp32's step time (a tie" in \
        tables.speed_line(m)


@pytest.mark.parametrize("device", COMMITTED)
def test_the_accuracy_chart_draws_the_accuracy_tables_figures_and_the_gates_limit(device):
    import matplotlib.pyplot as plt
    from foxlib.core.budgets import load_budgets
    from foxlib.report import charts
    m = committed_measurement(device, "8.11")
    budgets = load_budgets()
    rows, limit = analysis.quantile_loss_rows(m), analysis.accuracy_limit(m, budgets)
    table = tables.accuracy_table(m)
    shown = table[table["metric"] == "quantile_loss"].set_index("precision")
    assert [r.precision for r in rows] == list(shown.index)
    for r in rows:
        assert shown.loc[r.precision, "mean over seeds"] == round(r.mean, 4)
    # the line is the degradation check's limit in quantile loss: under it exactly when the check passes
    gate = next(c for c in analysis.checks(m, budgets) if c.name.startswith("TFT accuracy degradation"))
    assert limit["limit_quantile_loss"] == pytest.approx(limit["baseline_quantile_loss"] * (1 + gate.limit / 100))
    assert (limit["candidate_quantile_loss"] <= limit["limit_quantile_loss"] and limit["powered"]) == gate.passed
    baseline_line, gate_line = tables.accuracy_lines(limit)
    fig = charts.accuracy_spread(rows, baseline_line, gate_line, "QL", "t")
    ax = fig.axes[0]
    assert [c.lines[0].get_ydata()[0] for c in ax.containers] == [r.mean for r in rows]
    assert gate_line[0] == limit["limit_quantile_loss"] and gate_line[0] in [ln.get_ydata()[0] for ln in ax.get_lines()]
    assert ax.get_ylim()[0] < min(min(r.values) for r in rows) and ax.get_ylim()[1] > gate_line[0]
    caption, alt = tables.accuracy_figure_text(rows, limit)
    assert "does not start at 0" in caption and f"{limit['limit_quantile_loss']:.4f}" in alt
    plt.close(fig)


@pytest.mark.parametrize("device", COMMITTED)
def test_the_harness_table_reads_the_typed_harness(device):
    from foxlib.harness.training import HarnessSettings
    m = committed_measurement(device, "8.11")
    assert isinstance(m.accuracy_harness, HarnessSettings) and m.accuracy_harness.concurrent_runs is None
    table = tables.harness_table(m).set_index("setting")["value"]
    stored = committed(device, "8.11")["accuracy_harness"]
    assert table["step budget"] == str(m.accuracy_harness.max_steps) == str(stored["max_steps"])
    assert table["validation windows"] == str(stored["val_windows"]) and table["target"] == stored["target"]
    assert table["skill needed (%)"] == "2.0" and table["gradient clip (norm)"] == "1.0"
    assert f"hidden_size={m.accuracy_harness.tft_config['hidden_size']}" in table["TFT config"]
    # each run's own harness is the same record, its skill read through it
    assert all(r.harness == m.accuracy_harness and r.has_skill == (r.metrics["skill_score"] >= 0.02)
               for r in m.accuracy_runs)


@pytest.mark.parametrize("broken", [lambda h: {**h, "bogus": 1},
                                    lambda h: {k: v for k, v in h.items() if k != "target"}],
                         ids=["a key too many", "a key too few"])
def test_a_run_whose_harness_is_malformed_is_refused_naming_the_file(broken):
    data = committed("cpu", "8.11")
    runs = [{**r, "harness": broken(r["harness"])} for r in data["accuracy_runs"]]
    with pytest.raises(ValueError, match="cpu.json: a part of this wave 8.11 measurement is malformed"):
        records.Measurement.from_dict({**data, "accuracy_runs": runs}, "cpu.json")
