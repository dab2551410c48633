"""Wave 8.12: the typed record, the recommendation and Pareto logic on hand-made data (raw values, intervals,
ties settled by memory), the committed measurements read back, and the notebook run tiny."""
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from foxlib.core.budgets import load_budgets
from foxlib.core.config import MB
from foxlib.core.schema import Device
from foxlib.harness.floors import floors
from foxlib.harness.step_options import StepOptions
from foxlib.harness.timing import RatioInterval, Timing
from foxlib.waves.wave_8_12 import analysis, records, strategies, tables
from foxlib.waves.wave_8_12.strategies import BASELINE
from tests.conftest import ROUNDS_8_12 as ROUNDS, committed, hand_8_12_measurement as hand_measurement
from tests.conftest import measurement_at, typed_8_12 as typed

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def test_recommends_the_fastest_under_budget_within_accuracy_tolerance():
    budgets = load_budgets()
    m = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.00, True),
            ("light but slow", "fp32", 400, 1.8, 1.00, False),
            ("light and fast", "fp32", 600, 0.5, 1.00, False),
            ("fastest, inaccurate", "fp16", 500, 0.3, 1.10, True),
            ("fastest, too heavy", "fp32", 1100, 0.2, 1.00, False)])
    rec = analysis.recommend(typed(m), budgets)
    assert rec["strategy"] == "light and fast"
    assert rec["peak_bytes"] == 600 * MB and rec["step_time_ratio"] == 0.5
    assert rec["peak_over_floor"] == pytest.approx(600 * MB / (16 * 1_000_000))
    checks = analysis.checks(typed(m), budgets)
    assert [c.passed for c in checks] == [True, True]
    m.timing["light and fast"] = Timing("light and fast", (0.4, 0.5, 0.5, 0.5, 0.5, 0.6))
    df = tables.table(typed(m)).set_index("strategy")
    assert df.loc["light and fast", "step time (ms, median)"] == 500.0
    assert df.loc["light and fast", "step spread (IQR % of median)"] == 10.0
    assert df.loc["light and fast", "time per window, 95 % interval"] == "[0.45, 0.55]"
    # the front ignores accuracy: "light and fast" is beaten on both axes by "fastest, inaccurate"
    assert sorted(analysis.pareto(typed(m))) == ["fastest, inaccurate", "fastest, too heavy", "light but slow"]


def test_the_minor_page_faults_of_each_step_are_shown_where_they_were_counted():
    """Timings with minor-fault counts (the CPU's) give each strategy its median, a table column and a sentence
    naming fp32's and the recommended strategy's counts; the record keeps them through its dict. Without counts
    (a GPU's timing, or one measured before they were counted) there is neither column nor sentence, and the
    record's dict holds no key for them."""
    m = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.00, True), ("light", "fp32", 600, 0.5, 1.00, False)])
    column = "minor page faults per step (thousands, median)"
    assert tables.faults_text(typed(m), "light") == "" and column not in tables.table(typed(m)).columns
    assert "minor_faults_samples" not in typed(m).to_dict()["strategies"][0]
    for name, faults in ((BASELINE, (745_000, 745_200, 745_400)), ("light", (12, 10, 14))):
        m.timing[name] = Timing(name, (1.0 if name == BASELINE else 0.5,) * 3, faults)
    rec = typed(m)
    assert [s.timing.median_minor_faults for s in rec.strategies] == [745_200, 12]
    assert records.Measurement812.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    assert tables.table(rec).set_index("strategy")[column].to_dict() == {BASELINE: 745.2, "light": 0.0}
    assert "fp32's step took a median of 745,200 minor faults, light's 12:" in tables.faults_text(rec, "light")
    assert "fp32's step took a median of 745,200 minor faults:" in tables.faults_text(rec, BASELINE)


def test_lightest_no_slower_than_fp32_within_accuracy():
    m = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.00, True),
            ("lightest, slow", "fp32", 300, 1.3, 1.00, False),
            ("light, as fast", "fp32", 450, 1.0, 1.00, False),
            ("lighter, inaccurate", "fp16", 350, 0.8, 1.10, True),
            ("fastest", "fp32", 800, 0.5, 1.00, False)])
    light = analysis.lightest_at_full_speed(typed(m), load_budgets())
    assert light["strategy"] == "light, as fast" and light["step_time_ratio"] == 1.0
    assert light["peak_over_floor"] == pytest.approx(450 * MB / (16 * 1_000_000))
    assert tables.figures(light) == ("peak 450.0 MB (28.12 × floor), time "
                                   "1.00x [1.00, 1.00] of fp32 per window, accuracy impact +0.00 %")
    assert tables.lightest_text(typed(m), load_budgets()).endswith(f"**light, as fast** — {tables.figures(light)}.")
    assert analysis.recommend(typed(m), load_budgets())["strategy"] == "fastest"
    slow = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.00, True), ("slow", "fp32", 300, 1.3, 1.00, False)])
    assert analysis.lightest_at_full_speed(typed(slow), load_budgets())["strategy"] == BASELINE
    # not shown no slower: a median under 1 whose interval reaches over 1
    maybe = _record(_sr("maybe as fast", 300, (0.95, 0.85, 1.05)))
    assert analysis.lightest_at_full_speed(maybe, load_budgets())["strategy"] == BASELINE


def test_a_smaller_batch_is_judged_per_training_window():
    """batch ÷4: each step is shorter, but four are needed per window of the baseline's: 0.4 s a step
    is 1.6 × the baseline's time per window, so the faster-per-window strategy is recommended."""
    m = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.00, True), ("batch ÷4", "fp32", 500, 0.4, 1.00, True),
            ("efficient", "fp32", 800, 0.6, 1.00, False)])
    m.strategies["batch ÷4"] = dataclasses.replace(m.strategies["batch ÷4"], overrides={"batch_size": 0.25})
    m.timing["batch ÷4"] = Timing("batch ÷4", (0.38, 0.4, 0.42) * 2)
    rec = analysis.recommend(typed(m), load_budgets())
    assert rec["strategy"] == "efficient" and rec["time_per_window_ratio"] == 0.6
    assert tables.table(typed(m)).set_index("strategy").loc["batch ÷4", "time per window ratio"] == 1.6
    r = typed(m)["batch ÷4"]
    assert r.batch_size == 8 and r.window_ratio == r.step_ratio.scaled(4)
    assert r.window_ratio.low == pytest.approx(4 * 0.38) and r.window_ratio.high == pytest.approx(4 * 0.42)
    assert analysis.lightest_at_full_speed(typed(m), load_budgets())["strategy"] == "efficient"


def test_no_strategy_fits_is_a_failed_check():
    m = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.0, True), ("other", "fp32", 1100, 0.9, 1.0, False)])
    rec = analysis.recommend(typed(m), load_budgets())
    assert rec["strategy"] is None
    [check] = analysis.checks(typed(m), load_budgets())
    assert not check.passed and "other 1,100.0 MB, 0.90x [0.90, 0.90] of fp32 per window" in check.note


def test_cuda_graph_strategies_compete_and_the_kinds_can_be_asked_apart():
    m = hand_measurement([(BASELINE, "fp32", 1200, 1.0, 1.00, True), ("efficient", "fp32", 800, 0.6, 1.00, False),
            ("efficient + graph", "fp32", 810, 0.2, 1.00, False), ("light graph", "fp32", 450, 0.25, 1.00, False)])
    for name in ("efficient + graph", "light graph"):
        m.strategies[name] = dataclasses.replace(m.strategies[name], cuda_graph=True)
    # 8.13 trains and serves a graphed recommendation: every strategy competes
    every = analysis.recommend(typed(m), load_budgets())
    assert every == analysis.recommend(typed(m), load_budgets(), cuda_graph=None)
    assert every["strategy"] == "efficient + graph" and every["cuda_graph"] and every["options"] == {}
    eager = analysis.recommend(typed(m), load_budgets(), cuda_graph=False)  # where graphs cannot run
    assert eager["strategy"] == "efficient" and not eager["cuda_graph"] and "not recommended" not in eager["reason"]
    assert analysis.recommend(typed(m), load_budgets(), cuda_graph=True)["strategy"] == "efficient + graph"
    m.timing["light graph"] = Timing("light graph", (0.2,) * ROUNDS)  # as fast: the lighter one
    assert analysis.recommend(typed(m), load_budgets(), cuda_graph=True)["strategy"] == "light graph"
    assert analysis.lightest_at_full_speed(typed(m), load_budgets())["strategy"] == "light graph"  # the table shows them all
    assert analysis.recommend(typed(hand_measurement([(BASELINE, "fp32", 900, 1.0, 1.0, True)])), load_budgets(),
                          cuda_graph=True)["strategy"] is None


# ----------------------------------------------------------------------------- hand-made records

def _sr(name, peak_mb, window, impact=0.0, cuda_graph=False):
    iv = RatioInterval(*window)
    return records.StrategyResult(name=name, precision="fp32", overrides={}, batch_size=32, peak_bytes=round(peak_mb * MB),
                               activation_bytes=0, step_samples_s=(iv.median,), step_ratio=iv, window_ratio=iv,
                               accuracy_source=name, quantile_loss=1.0, accuracy_impact_pct=impact,
                               cuda_graph=cuda_graph)


def _run(seed, loss, skill=0.1):
    return records.AccuracyRun(seed, loss, 1.2, skill, 0.8, 0.8, min_skill=0.02)


def _record(*strategies):
    return records.Measurement812(strategies=(_sr(BASELINE, 1200, (1.0, 1.0, 1.0)), *strategies),
                               base_config={"batch_size": 32, "encoder_length": 60},
                               device=Device("cpu", "test", "cpu"),
                               n_parameters=1_000_000, accuracy_runs={BASELINE: (_run(0, 1.0), _run(1, 1.02))},
                               floors=floors(1_000_000, None, "test"))


def test_a_tie_is_settled_by_memory():
    rec = _record(_sr("efficient", 839.3, (0.64, 0.58, 0.71)), _sr("efficient, chunked", 491.2, (0.69, 0.60, 0.80)),
                  _sr("lightest, slower", 300.0, (0.80, 0.72, 0.90)))  # outside the fastest's interval: no tie
    r = analysis.recommend(rec, load_budgets())
    assert r["strategy"] == "efficient, chunked" and r["fastest"] == "efficient"
    assert r["settled_by_memory"] and r["tied_with"] == ["efficient, chunked"]
    assert r["interval"] == "0.69x [0.60, 0.80] of fp32 per window"
    assert r["time_per_window_interval"] == {"median": 0.69, "low": 0.60, "high": 0.80, "confidence": 0.95}
    text = tables.recommendation_text(r)
    assert "A tie settled by memory" in text and "efficient 0.64x [0.58, 0.71]" in text
    assert "491.2 MB against the fastest's 839.3 MB" in text
    # apart: no tie, the fastest wins though heavier
    apart = _record(_sr("efficient", 839.3, (0.64, 0.58, 0.66)), _sr("efficient, chunked", 491.2, (0.69, 0.67, 0.80)))
    r = analysis.recommend(apart, load_budgets())
    assert r["strategy"] == "efficient" and not r["settled_by_memory"] and "tie" not in r["reason"]
    assert r["reason"].startswith("fastest per training window of 2 strategies with a peak under")
    one = analysis.recommend(_record(_sr("efficient", 839.3, (0.64, 0.58, 0.66))), load_budgets())
    assert one["strategy"] == "efficient" and one["reason"].startswith("the only strategy with a peak under")


def test_a_slowdown_whose_interval_reaches_the_limit_fails():
    slow = _sr("checkpoint variables", 437.9, (1.9, 1.7, 2.1))
    check = analysis.slowdown_check(slow, 2.0)
    assert not check.passed and check.measured == 2.1 and check.limit == 2.0
    assert check.note == "1.90x [1.70, 2.10] of fp32 per window"
    assert analysis.slowdown_check(_sr("under", 437.9, (1.9, 1.7, 1.99)), 2.0).passed
    # the only strategy under the peak budget: not recommended, and the verdict's check fails
    rec = _record(slow)
    assert analysis.recommend(rec, load_budgets())["strategy"] is None
    [check] = analysis.checks(rec, load_budgets())
    assert not check.passed and "under 2x (upper end of the 95 % interval)" in check.note


def test_rounding_for_display_never_changes_a_decision():
    budgets = load_budgets()
    # the same time; displayed peaks equal (500.0 MB), raw bytes not: the lighter by bytes wins, in either order
    a, b = _sr("a", 500.04, (0.7, 0.6, 0.8)), _sr("b", 500.01, (0.7, 0.6, 0.8))
    for order in ((a, b), (b, a)):
        rec = _record(*order)
        df = tables.table(rec).set_index("strategy")
        assert df.loc["a", "peak (MB)"] == df.loc["b", "peak (MB)"] == 500.0
        assert analysis.recommend(rec, budgets)["strategy"] == "b"
        assert analysis.pareto(rec) == ["b"]  # a is as fast and heavier by 30,000 bytes: dominated
        assert analysis.lightest_at_full_speed(rec, budgets)["strategy"] == "b"
    # over the budget by 40,000 bytes though displayed at the budget (1,000.0 MB): not eligible
    over = _record(_sr("over", 1000.04, (0.5, 0.45, 0.55)), _sr("under", 999.0, (0.9, 0.85, 0.95)))
    assert tables.table(over).set_index("strategy").loc["over", "peak (MB)"] == 1000.0
    assert analysis.recommend(over, budgets)["strategy"] == "under"
    # an upper end displayed as 2.00 but under 2x: passes
    edge = _sr("edge", 400, (1.9, 1.8, 1.9996))
    assert tables.table(_record(edge)).iloc[1]["time per window, 95 % interval"] == "[1.80, 2.00]"
    assert analysis.slowdown_check(edge, 2.0).passed and analysis.recommend(_record(edge), budgets)["strategy"] == "edge"


def test_the_record_round_trips_through_json_and_refuses_another_schema():
    rec = _record(_sr("efficient", 839.3, (0.64, 0.58, 0.71), cuda_graph=True))
    d = json.loads(json.dumps(rec.to_dict()))
    assert d["schema_version"] == records.SCHEMA_VERSION
    assert records.Measurement812.from_dict(d) == rec
    # derived, not stored: fp32's losses from its runs, a run's skill from its score
    assert "baseline_losses" not in d and rec.baseline_losses == (1.0, 1.02)
    assert [r.has_skill for r in (_run(0, 1.0, 0.02), _run(0, 1.0, 0.019))] == [True, False]
    assert "has_skill" not in d["accuracy_runs"][BASELINE][0]
    for version in (0, 3):  # 3 stored them
        with pytest.raises(ValueError, match=f"schema_version {version}; this foxlib reads {records.SCHEMA_VERSION}"):
            records.Measurement812.from_dict({**d, "schema_version": version})
    with pytest.raises(KeyError, match="measured: fp32 \\(baseline\\); efficient"):
        rec["fp8"]


@pytest.mark.parametrize("path", sorted(REPORTS.glob("*/wave-8.12/measurement.json"))
                         + sorted(REPORTS.glob("*/variants/wave-8.12*/measurement.json")), ids=str)
def test_the_committed_measurements_load(path):
    """Reports are re-rendered from these files, canonical and variant: each must build a record (an older one
    migrated once, as the H200 variant at 79e3cfb was for the claim runs and the cuBLAS knob)."""
    m = measurement_at(path)
    committed_file_strategies = json.loads(path.read_text())["strategies"]
    rec = typed(m)
    w = rec[BASELINE].window_ratio
    assert rec.names == list(m.strategies) and (w.median, w.low, w.high) == (1.0, 1.0, 1.0)
    for s in rec.strategies:
        assert s.peak_bytes == m.memory[s.name].peak
        assert s.step_samples_s == m.timing[s.name].samples
        # the options typed (StepOptions), stated as the file holds them: {} (absent) where all are the defaults
        assert isinstance(s.options, StepOptions)
        assert s.stated_options == committed_file_strategies[s.name].get("options", {})
        assert s.window_ratio.low <= s.window_ratio.median <= s.window_ratio.high
    assert typed(m) == rec  # the bootstrap is seeded: a re-render gives the same intervals
    assert records.Measurement812.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    r = analysis.recommend(rec, load_budgets())
    assert r["strategy"] in rec.names and r["peak_bytes"] == m.memory[r["strategy"]].peak
    assert r["interval"] == f"{rec[r['strategy']].window_ratio} of fp32 per window"
    assert all(c.passed for c in analysis.checks(rec, load_budgets()))


@pytest.mark.parametrize("device", ["cpu", "h200"])
def test_the_committed_measurement_reads_typed(device):
    """measurement.json's profiles (a CUDA graph's: GraphedProfile), step times, floors, same-function checks, the
    cuBLAS workspace knob, the accuracy harness and where the run resumed are records once read (that to_dict writes
    the file back is test_validation's check over every committed file)."""
    from foxlib.harness.equivalence import Equivalence, FailedCheck
    from foxlib.harness.floors import Floors
    from foxlib.harness.training import HarnessSettings
    from foxlib.harness.fresh_process import RunsNotMade
    from foxlib.waves.wave_8_12.workspace import KnobRuns
    from foxlib.memory.cuda_graph import GraphedProfile
    from foxlib.memory.profile import MemoryProfile
    data = committed(device, "8.12")
    m = records.Measurement.from_dict(data)
    kinds = {type(p) for p in m.memory.values()}
    assert kinds == ({MemoryProfile, GraphedProfile} if device == "h200" else {MemoryProfile})
    assert all(isinstance(t, Timing) for t in m.timing.values()) and isinstance(m.floors, Floors)
    assert m.same_function and all(isinstance(e, Equivalence) for e in m.same_function.values())
    why = {**data, "same_function": {"CUDA graph": {"variant": "CUDA graph", "error": "needs a CUDA device"}}}
    assert records.Measurement.from_dict(why).same_function == {"CUDA graph": FailedCheck("CUDA graph",
                                                                                          "needs a CUDA device")}
    assert records.Measurement.from_dict(why).to_dict()["same_function"] == why["same_function"]
    h = data["accuracy_harness"]
    assert isinstance(m.accuracy_harness, HarnessSettings) and m.accuracy_harness.target == h["target"]
    assert m.accuracy_harness.concurrent_runs == h["concurrent_runs"] and m.accuracy_harness.min_skill == 0.02
    # each run's own harness too: its step options (typed) where not the defaults, the record's min_skill
    runs = [(n, r) for n, rs in m.accuracy_runs.items() for r in rs]
    assert all(isinstance(r.harness, HarnessSettings) and r.harness.min_skill == 0.02 for _, r in runs)
    stored = [(n, r["harness"].get("step_options")) for n, rs in data["accuracy_runs"].items() for r in rs]
    assert [(n, r.harness.step_options) for n, r in runs] == [
        (n, o and StepOptions.from_dict(o)) for n, o in stored] and (device == "cpu" or any(o for _, o in stored))
    rec = typed(m)
    assert all(a.min_skill == 0.02 for rs in rec.accuracy_runs.values() for a in rs)
    if device == "h200":  # the knob measured in fresh processes, and a resumed run
        assert isinstance(m.cublas_workspace, KnobRuns) and m.cublas_workspace.setting == ":16:8"
        assert m.cublas_workspace.absent_reason is None and len(m.cublas_workspace.runs["small"]) == 3
        assert m.resumed == records.Resumed(data["resumed"]["parts"], data["resumed"]["measured_at"])
    else:  # the CPU has no cuBLAS; the run was not resumed
        assert m.cublas_workspace == RunsNotMade("skipped: the cuBLAS workspace is a CUDA knob")
        assert m.cublas_workspace.absent_reason == m.cublas_workspace.skipped_all and m.resumed is None


def _bogus(d):
    return {**d, "bogus": 1}


def _without(key):
    return lambda d: {k: v for k, v in d.items() if k != key}


def _each_harness(runs, broken):
    """Every accuracy run with its harness broken."""
    return {n: [{**r, "harness": broken(r["harness"])} for r in rs] for n, rs in runs.items()}


@pytest.mark.parametrize("part, broken", [
    ("cublas_workspace", _bogus), ("cublas_workspace", _without("runs")), ("accuracy_harness", _bogus),
    ("accuracy_harness", _without("target")), ("resumed", _bogus), ("resumed", _without("measured_at")),
    ("same_function", lambda d: {**d, "CUDA graph": {"error": "needs a CUDA device"}}),  # without its variant
    ("accuracy_runs", lambda d: _each_harness(d, _bogus)),
    ("accuracy_runs", lambda d: _each_harness(d, _without("min_skill"))),
    ("strategies", lambda d: {n: {**s, "options": {**(s.get("options") or {}), "bogus": True}} for n, s in d.items()}),
])
def test_a_part_with_a_key_too_many_or_too_few_is_refused_naming_the_file(part, broken):
    data = committed("h200", "8.12")
    with pytest.raises(ValueError, match="h200.json: a part of this wave 8.12 measurement is malformed"):
        records.Measurement.from_dict({**data, part: broken(data[part])}, "h200.json")


def test_the_accuracy_harness_writes_back_its_optional_settings_only_where_held():
    from foxlib.harness.training import HarnessSettings
    h = committed("h200", "8.12")["accuracy_harness"]
    older = _without("concurrent_runs")(h)  # made before the runs sharing the device were recorded
    assert HarnessSettings.from_dict(older).concurrent_runs is None
    assert HarnessSettings.from_dict(older).to_dict() == older
    fused = {**older, "step_options": StepOptions(adam="fused").to_dict(), "concurrent_runs": 2}
    assert HarnessSettings.from_dict(fused).step_options == StepOptions(adam="fused")
    assert list(HarnessSettings.from_dict(fused).to_dict().items()) == list(fused.items())


def test_the_chart_reads_the_record():
    import matplotlib
    matplotlib.use("Agg")
    from foxlib.report import charts
    rec = _record(_sr("efficient", 839.3, (0.64, 0.58, 0.71)), _sr("graph", 820.0, (0.2, 0.18, 0.23), cuda_graph=True))
    fig = charts.pareto(rec, analysis.pareto(rec), 1000, 2.0, "efficient", "test")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"eager step", "CUDA-graph step", "recommended: efficient"} <= set(labels)
    assert any("slowdown limit 2x" in t for t in labels) and ax.get_xscale() == "linear"
    assert "linear scale" in ax.get_xlabel()
    wide = _record(_sr("slow", 800, (40.0, 38.0, 42.0)), _sr("fast", 700, (0.5, 0.45, 0.55)))
    ax = charts.pareto(wide, analysis.pareto(wide), 1000, 2.0, None, "test").axes[0]
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()


def test_the_timeline_section_of_the_committed_cpu_measurement(tmp_path):
    """The page's live-memory section (tables.timeline_section) from the committed CPU measurement, its snapshots
    looked for in the committed report's folder as a render looks for them: the chart of every recorded step with
    the peak budget, its alt text and caption (the notebook shows it as every chart, and closes it), each snapshot
    kept beside the new report, and the lines the committed page shows; without a recorded step, no chart and no
    file, and the page says so."""
    import matplotlib.pyplot as plt

    from tests.conftest import committed_measurement, committed_path
    m = committed_measurement("cpu", "8.12")
    folder = committed_path("cpu", "8.12").parent
    chart, text = tables.timeline_section(m.timelines, "TFT step — test", 1000 * MB, str(tmp_path / "report"),
                                          [folder])
    plt.close(chart.figure)
    recorded = {n: r for n, r in m.timelines.items() if r.series is not None}
    assert len(recorded) == 5 and set(m.timelines) - set(recorded) == {"CUDA graph"}
    assert len(chart.figure.axes) == 5 and chart.alt_text.startswith("TFT step — test. 5 line charts")
    assert all(f"{n}: starts at" in chart.alt_text for n in recorded) and "Budget line at 1,000.0 MB" in chart.alt_text
    assert "MB = 10^6 bytes" in chart.caption
    kept = {n: Path(r.snapshot_path).name for n, r in recorded.items()}
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == sorted(kept.values())
    assert all((tmp_path / "report" / f).read_bytes() == (folder / f).read_bytes() for f in kept.values())
    assert text.endswith("\n\n" + tables.VIEWER_NOTE) and text.count("\n- ") == len(m.timelines) - 1
    assert all(f"- {n}: model peak" in text and f"[snapshot]({f})" in text for n, f in kept.items())
    assert text in committed_path("cpu", "8.12", "report.md").read_text()
    skipped = {"CUDA graph": m.timelines["CUDA graph"]}
    for runs in (None, {}):  # not asked for
        assert tables.timeline_section(runs, "t", MB, str(tmp_path / "none")) == (None, tables.NO_TIMELINES)
    # asked for, none recorded: why, not "timelines=False"
    assert tables.timeline_section(skipped, "t", MB, str(tmp_path / "none")) == (
        None, "- CUDA graph: not recorded (skipped: a CUDA graph needs a CUDA device)")
    assert not (tmp_path / "none").exists()


def test_cuda_graph_and_compile_strategies_are_skipped_on_a_cpu():
    eager_compiled = "efficient + batched VSNs + bf16 + fused Adam + torch.compile"
    graphed_compiled = "efficient + batched VSNs + bf16 + CUDA graph + fused Adam + torch.compile"
    chosen = strategies.select(f"memory-efficient path;memory-efficient path + CUDA graph;{eager_compiled};"
                               f"{graphed_compiled}")
    kept, skipped = strategies.runnable(chosen, torch.device("cpu"))
    assert [s.name for s in kept] == [BASELINE, "memory-efficient path"]
    assert skipped == {"memory-efficient path + CUDA graph": strategies.GRAPH_SKIPPED,
                       eager_compiled: strategies.COMPILE_SKIPPED, graphed_compiled: strategies.GRAPH_SKIPPED}
    # compiled: the same function as the batched step it compiles (its accuracy runs shared)
    assert strategies.accuracy_key(strategies.STRATEGIES[eager_compiled]) == strategies.accuracy_key(
        strategies.STRATEGIES["efficient + batched VSNs + bf16"])
    assert strategies.runnable(chosen, torch.device("cuda"))[0] == chosen


def test_fractions_resolve_against_the_base():
    assert strategies.resolve_overrides({"batch_size": 32, "encoder_length": 60},
                                  {"batch_size": 0.25, "encoder_length": 0.5, "checkpointing": "vsn"}) == \
        {"batch_size": 8, "encoder_length": 30, "checkpointing": "vsn"}


def test_unknown_strategy_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid strategies: fp32 \\(baseline\\)"):
        strategies.select("fp32 (baseline);fp8")


@pytest.mark.slow
def test_notebook_tiny(tmp_path):
    from foxlib.run.runner import run_wave
    params = {"preset": "small", "batch_size": 8, "encoder_length": 10, "device": "cpu",
              "strategies": "fp32 (baseline);bf16;checkpoint blocks;batch ÷4;CUDA graph", "timing_repeats": 2,
              "timing_warmup": 1, "accuracy_seeds": 1, "accuracy_steps": 4, "accuracy_eval_every": 2,
              "accuracy_val_windows": 16}
    out = run_wave("8.12", params, reports_dir=tmp_path, progress=False, allow_dirty=True)
    res = json.loads((out / "results.json").read_text())
    m = json.loads((out / "measurement.json").read_text())
    assert set(m["memory"]) == {"fp32 (baseline)", "bf16", "checkpoint blocks", "batch ÷4"}
    assert m["skipped"] == {"CUDA graph": strategies.GRAPH_SKIPPED}  # asked for, not measurable here: said so
    assert "Not measured here: CUDA graph (skipped: a CUDA graph needs a CUDA device)" in (out / "report.md").read_text()
    # checkpointing computes the same function: it reuses the baseline's accuracy runs
    assert m["accuracy_source"]["checkpoint blocks"] == "fp32 (baseline)"
    assert set(m["accuracy_runs"]) == {"fp32 (baseline)", "bf16", "batch ÷4"}
    # ... and says so with numbers: outputs and gradients against the plain step, on this device
    assert set(m["same_function"]) == {"checkpoint blocks"} and m["same_function"]["checkpoint blocks"]["same"]
    assert all("skill_score" in r["metrics"] for rs in m["accuracy_runs"].values() for r in rs)
    assert m["accuracy_harness"]["max_steps"] == 4 and "climatology QL" in (out / "report.md").read_text()
    assert m["memory"]["batch ÷4"]["batch"] < m["memory"]["fp32 (baseline)"]["batch"]
    rec = res["recommended"]
    if rec["strategy"]:
        assert rec["peak_bytes"] == m["memory"][rec["strategy"]]["peak"]
        assert rec["interval"] in (out / "report.md").read_text()
    assert records.Measurement812.from_dict(res["record"]) == typed(measurement_at(out / "measurement.json"))
    assert res["verdict"] == ("GO" if all(c["passed"] for c in res["checks"]) else "NO-GO")
    assert "Pareto front" in (out / "report.html").read_text()
    assert "Minor page faults per step* (counted on the CPU" in (out / "report.md").read_text()  # the CPU counts them


@pytest.mark.slow
def test_a_stopped_measurement_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """Each finished part is kept as it completes; a second run with the file takes those parts (the very
    numbers, timings included, which never repeat by chance) and measures only what is missing; a file made
    with other parameters is refused, naming what differs."""
    from foxlib.waves.wave_8_12 import measuring
    tiny = {"preset": "small", "batch_size": 4, "encoder_length": 8, "device": "cpu",
            "strategies": "fp32 (baseline)", "timing_repeats": 2, "timing_warmup": 1,
            "accuracy_seeds": 1, "accuracy_steps": 2, "accuracy_eval_every": 1, "accuracy_val_windows": 8,
            "timelines": False, "claim_runs": 0}
    path = tmp_path / "parts.json"

    def stop(*args, **kwargs):
        raise KeyboardInterrupt("stopped, as a time limit stops a run")

    monkeypatch.setattr(measuring, "accuracy_runs", stop)
    with pytest.raises(KeyboardInterrupt):
        measuring.measure(**tiny, checkpoint_path=str(path))
    kept = json.loads(path.read_text())["parts"]
    assert list(kept) == ["memory", "timing", "claim_runs", "floors", "cublas_workspace"]
    monkeypatch.undo()
    m = measuring.measure(**tiny, checkpoint_path=str(path))
    d = json.loads(json.dumps(m.to_dict()))
    assert d["timing"] == kept["timing"] and d["memory"] == kept["memory"]["memory"]
    assert m.resumed.parts == list(kept)
    assert set(m.accuracy_runs) == {"fp32 (baseline)"} and m.same_function == {}
    assert list(json.loads(path.read_text())["parts"])[-2:] == ["accuracy", "same_function"]
    with pytest.raises(ValueError, match="parameters differ"):
        measuring.measure(**{**tiny, "timing_repeats": 3}, checkpoint_path=str(path))
