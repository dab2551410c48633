"""The peer benchmark (benchmarks/peer_tft.py, benchmarks/peer/) and its page (foxlib/report/peer_page.py).

pytorch-forecasting, neuralforecast and darts are benchmark-only dependencies: they live in `.venv-peer`
(requirements-peer.txt, requirements-peer-nodeps.txt), not in the workbook's `.venv`, so the tests that build
a peer are skipped where its library is not importable.
The page renders from a hand-made results file (tests/fixtures/peer-benchmark.json), in any environment. Nothing here compiles with Inductor: the compiled rows are
run on the CPU only deliberately, with a tiny model and Dynamo's eager backend.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import peer_tft  # noqa: E402

from benchmarks.peer import compiled, configuration as conf, data  # noqa: E402
from foxlib.core import provenance  # noqa: E402
from foxlib.harness.timing import interval_of_samples  # noqa: E402
from foxlib.harness.step_options import StepOptions  # noqa: E402
from foxlib.report import peer_figures as fig, peer_page  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "peer-benchmark.json"
HAS_PEER = importlib.util.find_spec("pytorch_forecasting") is not None
needs_peer = pytest.mark.skipif(
    not HAS_PEER, reason="pytorch_forecasting is not installed here (a benchmark-only dependency: run the "
                         "test in .venv-peer, built from requirements-peer.txt)")
HAS_NF = importlib.util.find_spec("neuralforecast") is not None
HAS_DARTS = importlib.util.find_spec("darts") is not None
needs_others = pytest.mark.skipif(
    not (HAS_PEER and HAS_NF and HAS_DARTS),
    reason="pytorch_forecasting, neuralforecast or darts is not installed here (benchmark-only dependencies: run "
           "the test in .venv-peer, built from requirements-peer.txt and requirements-peer-nodeps.txt)")

# the small preset, shortened: every code path of the benchmark, a few seconds per step on two busy cores
TINY = {"batch_size": 4, "encoder_length": 10, "decoder_length": 2}


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "feed123")
    monkeypatch.setattr(provenance, "is_commit", lambda revision, root=None: True)  # the fixtures' made-up revisions


@pytest.fixture
def dirty(monkeypatch):
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "feed123+dirty")


@pytest.fixture
def fixture_copy(tmp_path):
    """The hand-made results file in tmp/h200/, citing tmp/reports/h200/wave-8.12/results.json (its sha256)."""
    cited = tmp_path / "reports" / "h200" / "wave-8.12" / "results.json"
    cited.parent.mkdir(parents=True)
    cited.write_text('{"wave": "8.12", "measured_at_revision": "b2af966"}\n')
    res = json.loads(FIXTURE.read_text())
    res["depends_on"][0]["sha256"] = provenance.sha256_of(cited)
    path = tmp_path / "h200" / "peer-benchmark.json"
    path.parent.mkdir()
    path.write_text(json.dumps(res))
    return path, cited


# ----------------------------------------------------------------------------- the page (no peer needed)

def test_the_page_answers_in_numbers_from_a_results_file(fixture_copy, clean):
    path, cited = fixture_copy
    html = peer_page.render_file(path, base=cited.parents[3])
    page = html.read_text()
    first_screen = page[:page.index("<h2>Same configuration")]
    res = json.loads(FIXTURE.read_text())
    v = res["variants"]
    step = interval_of_samples(v["foxlib_default"]["timing"]["samples_s"], v["peer"]["timing"]["samples_s"])
    # foxlib's peak and step time over the peer's, the step time with its interval, on the first screen
    assert "0.900" in first_screen and "0.450" in first_screen  # peaks: 900 / 1,000 MB, 450 / 1,000 MB
    assert f"{step.median:.3f} [{step.low:.3f}, {step.high:.3f}]" in first_screen and step.low < step.high
    assert "1,000.0" in first_screen and "100.0" in first_screen  # the peer's peak (MB) and step (ms)
    assert 'href="../index.html"' in first_screen
    assert "measured at revision <code>abc1234</code>" in first_screen
    assert "rendered at <code>feed123</code>" in first_screen and "NVIDIA H200" in first_screen
    assert "targets not all met" in first_screen and "Not a commit" not in page
    # the new rows, with the compile time and the graph breaks
    for name in ("peer_hcs8", "peer_hcs16", "foxlib_compiled_default", "foxlib_compiled_reduce_overhead",
                 *fig.OTHER_PEERS):
        assert fig.ROWS[name] in first_screen, name
    assert "compile: 95.3 s" in first_screen and "compile: 110.2 s" in first_screen
    assert "Attempted to wrap RNN, GRU, or LSTM" in page and "3 graph break(s)" in page
    assert "verified" in page and "b2af966" in page
    assert "not measured" not in first_screen
    assert "&lt;with markup to escape&gt;" in page and "<script" not in page
    stamped = json.loads(path.read_text())
    assert stamped["rendered_at_revision"] == "feed123" and stamped["measured_at_revision"] == "abc1234"


def test_a_dirty_tree_is_refused_unless_allowed(fixture_copy, dirty):
    path, cited = fixture_copy
    with pytest.raises(provenance.ProvenanceError, match="uncommitted changes.*--allow-dirty"):
        peer_page.render_file(path, base=cited.parents[3])
    assert not path.with_suffix(".html").exists()
    page = peer_page.render_file(path, base=cited.parents[3], allow_dirty=True).read_text()
    assert "Not a commit's page" in page and "feed123+dirty" in page


def test_a_measurement_from_a_dirty_tree_renders_only_if_allowed(fixture_copy, clean):
    path, cited = fixture_copy
    res = json.loads(path.read_text())
    res["measured_at_revision"] = "abc1234+dirty"
    path.write_text(json.dumps(res))
    with pytest.raises(provenance.ProvenanceError, match="measured from uncommitted changes"):
        peer_page.render_file(path, base=cited.parents[3])
    page = peer_page.render_file(path, base=cited.parents[3], allow_dirty=True).read_text()
    assert "Not a commit's page" in page and "abc1234+dirty" in page


def test_a_measurement_naming_no_commit_renders_only_if_allowed(fixture_copy, clean, monkeypatch):
    path, cited = fixture_copy
    monkeypatch.setattr(provenance, "is_commit", lambda revision, root=None: False)  # e.g. a mistyped label
    with pytest.raises(provenance.ProvenanceError, match="names revision abc1234, which is no commit"):
        peer_page.render_file(path, base=cited.parents[3])
    assert not path.with_suffix(".html").exists()
    assert "abc1234" in peer_page.render_file(path, base=cited.parents[3], allow_dirty=True).read_text()


def test_measuring_from_a_dirty_tree_is_refused_before_anything_runs(dirty, capsys):
    with pytest.raises(SystemExit) as exc:
        peer_tft.main(["--device", "cpu", "--preset", "small", "--out", "unused.json"])
    assert exc.value.code == 2 and "--allow-dirty" in capsys.readouterr().err


def test_a_reason_for_compile_off_without_compile_off_is_refused(clean, capsys):
    with pytest.raises(SystemExit) as exc:
        peer_tft.main(["--device", "cpu", "--preset", "small", "--compile", "auto",
                       "--compile-off-reason", "it crashed", "--out", "unused.json"])
    assert exc.value.code == 2 and "--compile-off-reason goes with --compile off only" in capsys.readouterr().err


def test_a_citation_that_no_longer_matches_fails_the_render(fixture_copy, clean, capsys, monkeypatch):
    path, cited = fixture_copy
    cited.write_text('{"wave": "8.12", "recommended": "re-measured"}\n')
    with pytest.raises(provenance.ProvenanceError, match="changed since it was used"):
        peer_page.render_file(path, base=cited.parents[3])
    # the command line says so and exits non-zero (paths relative to the repository: the fixture's cite none)
    res = json.loads(path.read_text())
    res["depends_on"][0]["path"] = str(cited)
    path.write_text(json.dumps(res))
    with pytest.raises(SystemExit) as exc:
        peer_tft.main(["--render", str(path)])
    assert exc.value.code == 1 and "make peer-bench" in capsys.readouterr().err
    assert not path.with_suffix(".html").exists()


def test_a_source_read_outside_the_repository_is_shown_from_reports_on():
    source = "/scratch/run/reports/h200/wave-8.12/results.json (recommended strategy: efficient + bf16)"
    assert peer_page.relative_source(source) == "reports/h200/wave-8.12/results.json (recommended strategy: efficient + bf16)"


def test_rows_not_run_are_named_with_the_reason():
    cpu, cuda = __import__("torch").device("cpu"), __import__("torch").device("cuda")
    assert compiled.enabled("auto", cpu)[0] is False and compiled.enabled("auto", cuda)[0] is True
    assert compiled.enabled("on", cpu)[0] is True and compiled.enabled("off", cuda)[0] is False
    crashed = compiled.enabled("off", cuda, "because the run with torch.compile failed (CUDA error) ")
    assert crashed == (False, "because the run with torch.compile failed (CUDA error) (--compile off)")
    assert peer_tft.select(["peer", "foxlib_default"] + list(fig.COMPILED), *crashed)[1][
        "foxlib_compiled_default"] == "not run: torch.compile is off, " + crashed[1]
    with pytest.raises(ValueError, match="with --compile off only"):
        compiled.enabled("on", cuda, "why")
    on, why = compiled.enabled("auto", cpu)
    chosen, not_run = peer_tft.select(list(peer_tft.VARIANTS), on, why, {"neuralforecast": None, "darts": None})
    assert chosen == ["peer", "peer_hcs8", "peer_hcs16", *fig.OTHER_PEERS, "foxlib_default", "foxlib_best"]
    assert set(not_run) == set(fig.COMPILED) and all("off on the CPU" in r for r in not_run.values())
    # a library missing on the machine: its rows are not run, saying why
    gone = {"neuralforecast": "not run: neuralforecast is not installed here", "darts": None}
    chosen_nf, not_run_nf = peer_tft.select(list(peer_tft.VARIANTS), on, why, gone)
    assert "nf" not in chosen_nf and "darts_skip" in chosen_nf
    assert not_run_nf["nf"] == not_run_nf["nf_defaults"] == gone["neuralforecast"]
    res = json.loads(FIXTURE.read_text())
    for name in fig.COMPILED:
        del res["variants"][name]
    res["not_run"] = {**res["not_run"], **not_run}
    page = peer_page.render(res)  # never rendered: no rendered-at revision, and no dirty one either
    assert "rendered at <code>not rendered yet</code>" in page and "Not a commit" not in page
    assert page.count("torch.compile is off, auto: off on the CPU") >= 2
    assert fig.text_table(res).count("not run: torch.compile is off") == 2


def test_a_results_file_lacking_keys_is_refused_naming_every_one(fixture_copy, clean):
    """The page checks the file once (peer_page.check_results), naming all it lacks, before reading anything."""
    res = json.loads(FIXTURE.read_text())
    peer_page.check_results(res)  # the fixture is complete
    del res["title"], res["device"]["short"], res["variants"]["darts"]["architecture"]
    del res["variants"]["foxlib_default"]["timing"]["median_s"], res["ratios"]["foxlib_best"]
    del res["not_run"]["nf"], res["variants"]["foxlib_best"]["cuda_graph"]
    expected = ["title", "device.short", "variants.darts.architecture", "variants.foxlib_default.timing.median_s",
                "variants.foxlib_best.cuda_graph", "ratios.foxlib_best.step_time", "not_run.nf"]
    assert sorted(peer_page.missing_keys(res)) == sorted(expected)
    with pytest.raises(ValueError) as err:
        peer_page.render(res)
    assert all(k in str(err.value) for k in expected)
    del res["variants"]["peer"]
    assert "variants.peer" in peer_page.missing_keys(res)
    path, cited = fixture_copy
    data = json.loads(path.read_text())
    del data["ratios_by_peer"]["darts"], data["best"]["source"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"peer-benchmark.json: .*missing best.source, ratios_by_peer.darts$"):
        peer_page.render_file(path, base=cited.parents[3])
    assert "rendered_at_revision" not in json.loads(path.read_text())  # refused before anything is written


def test_a_file_that_pools_its_all_rows_run_is_refused():
    """A file of the earlier layout counted its all-rows run as the first of the runs asked for (2 fresh runs of 3
    asked): its stored pooled figures include a run unlike the others, so the page refuses it, saying what to do."""
    res = json.loads(FIXTURE.read_text())
    res["timing_runs"]["runs"] = res["timing_runs"]["runs"][1:]
    with pytest.raises(ValueError, match="asked for 3 independent timing runs and holds 2: .*make peer-bench"):
        peer_page.render(res)


def test_ratios_intervals_and_checks():
    res = json.loads(FIXTURE.read_text())
    r = fig.ratios(res)
    assert set(r) == set(fig.ROWS) - {"peer", "nf", "nf_defaults"}  # the fixture's neuralforecast rows: not run
    assert r["foxlib_default"]["peak"] == pytest.approx(0.9) and r["foxlib_default"]["step_time"] == pytest.approx(0.9)
    i = r["foxlib_default"]["step_time_interval"]
    assert i["low"] <= i["median"] <= i["high"] and i["rounds"] == 5 and i["confidence"] == 0.9375  # 1 - 2 * 0.5**5
    res["ratios"] = r
    assert [c["passed"] for c in fig.checks(res)] == [True, True, True, False]  # best: 0.61 > 0.5
    del res["variants"]["peer"]["timing"]["samples_s"]  # an older file without raw samples: no interval
    assert "step_time_interval" not in fig.ratios(res)["foxlib_default"]


def test_a_step_time_target_is_judged_on_independent_runs_pooled():
    """The fixture's three independent timing runs (peer, default, best, each in a fresh process): each run's paired
    interval, pooled (foxlib.core.pooled_runs: geometric mean of the medians, the spread pooled over both rows with a
    target); the all-rows run, which timed every row in the measuring process, is not one of them. With fewer than
    MIN_RUNS runs the step-time checks are inconclusive, not passed, however far from the limit."""
    from foxlib.core.pooled_runs import pooled_interval, run_spread
    res = json.loads(FIXTURE.read_text())
    per = {n: fig.run_intervals(res, n) for n in fig.TARGETS}
    assert [len(v) for v in per.values()] == [3, 3]
    first = interval_of_samples(res["variants"]["foxlib_default"]["timing"]["samples_s"],
                                res["variants"]["peer"]["timing"]["samples_s"])
    assert first not in per["foxlib_default"]  # the all-rows run's interval is not pooled
    runs = {n: [(i.median, i.low, i.high) for i in v] for n, v in per.items()}
    pooled = fig.pooled_step_time(res)
    centre, low, high = pooled_interval(runs["foxlib_default"], run_spread(runs.values()))
    assert pooled["foxlib_default"]["median"] == pytest.approx(centre) and pooled["foxlib_default"]["low"] == low
    medians = [m for m, _, _ in runs["foxlib_default"]]
    assert centre == pytest.approx((medians[0] * medians[1] * medians[2]) ** (1 / 3))  # the geometric mean
    assert pooled == res["pooled_step_time"]  # as the file stores it
    with_all_rows = pooled_interval([(first.median, first.low, first.high), *runs["foxlib_default"][1:]],
                                    run_spread(runs.values()))
    assert with_all_rows[0] != pytest.approx(centre)  # pooling the all-rows run instead of run 1 gives another figure
    checks = {c["name"]: c for c in fig.checks(res)}
    step = checks[fig.check_name(res, "foxlib_default", "step_time")]
    assert step["measured"] == pytest.approx(centre) and step["passed"] and step["runs"] == 3
    assert fig.check_verdict(step) == "PASS"
    assert peer_page.context(res)["timing_runs"] == (
        "3 independent timing runs of pytorch-forecasting TFT, foxlib TFT, default, foxlib TFT, best (8.12), each in a "
        "fresh process with these rows only")
    # one run failed: two runs pooled, the verdict inconclusive
    res["timing_runs"]["runs"][1] = {"error": "exit 1: ValueError: unknown preset"}
    assert peer_page.context(res)["timing_runs"].endswith("; 1 failed: exit 1: ValueError: unknown preset")
    res["pooled_step_time"] = fig.pooled_step_time(res)
    assert len(res["pooled_step_time"]["foxlib_default"]["runs"]) == 2 and "median" in res["pooled_step_time"]["foxlib_default"]
    step = {c["name"]: c for c in fig.checks(res)}[fig.check_name(res, "foxlib_default", "step_time")]
    assert (step["passed"], step["inconclusive"], fig.check_verdict(step)) == (False, True, "INCONCLUSIVE")
    assert step["note"].endswith("inconclusive: 2 of the 3 independent runs a verdict needs")
    # one run: its paired interval (not the all-rows run's), inconclusive
    res["timing_runs"]["runs"], res["arguments"]["runs"] = res["timing_runs"]["runs"][2:], 1
    res["pooled_step_time"] = fig.pooled_step_time(res)
    judged, runs = fig.target_step(res, "foxlib_default")
    assert runs == 1 and judged == per["foxlib_default"][2] != first
    step = {c["name"]: c for c in fig.checks(res)}[fig.check_name(res, "foxlib_default", "step_time")]
    assert "in one independent run" in step["note"]
    assert step["note"].endswith("1 of the 3 independent runs a verdict needs")
    assert peer_page.context(res)["timing_runs"].startswith("1 independent timing run of ")
    res["checks"] = fig.checks(res)
    assert "1 run's interval; a verdict needs 3" in peer_page.render(res)
    # none (a file without independent runs): the all-rows run's paired interval, inconclusive; the peaks unchanged
    res["timing_runs"]["runs"], res["arguments"]["runs"] = [], 0
    res["pooled_step_time"] = fig.pooled_step_time(res)
    res["checks"] = fig.checks(res)
    assert [fig.check_verdict(c) for c in res["checks"]] == ["PASS", "INCONCLUSIVE", "PASS", "INCONCLUSIVE"]
    step = {c["name"]: c for c in res["checks"]}[fig.check_name(res, "foxlib_default", "step_time")]
    assert step["measured"] == first.median and step["runs"] == 0
    assert "in the all-rows run (no independent run)" in step["note"]
    assert step["note"].endswith("inconclusive: 0 of the 3 independent runs a verdict needs")
    context = peer_page.context(res)
    assert context["verdict"] == "none failed, not all judged: too few independent runs"
    assert peer_page.context(res)["timing_runs"].startswith("this file holds no independent timing run of")


def test_a_step_time_tie_is_not_a_pass():
    """A step-time check is judged on the runs pooled (pooled_step_time), never on the ratio of medians: the
    fixture's pooled interval [0.883, 0.938] is met; one of [0.64, 1.06] holds the target 1.0, a tie, not met, even
    with a ratio of medians of 0.777 under it (the H200 file once said PASS so); an upper end at the limit is not
    under it."""
    res = json.loads(FIXTURE.read_text())
    res["ratios"] = fig.ratios(res)
    name = fig.check_name(res, "foxlib_default", "step_time")
    i = res["pooled_step_time"]["foxlib_default"]  # the runs pooled: what the check judges
    assert [c["passed"] for c in fig.checks(res) if c["name"] == name] == [True]  # [0.883, 0.938]: met
    i.update(median=0.925, low=0.64, high=1.06)
    res["ratios"]["foxlib_default"]["step_time"] = 0.777  # under the target: ignored
    assert [(c["measured"], c["passed"]) for c in fig.checks(res) if c["name"] == name] == [(0.925, False)]
    i.update(median=0.9, low=0.8, high=1.0)  # the upper end at the limit: not under it, a tie (RatioInterval.under)
    assert [c["passed"] for c in fig.checks(res) if c["name"] == name] == [False]
    i.update(median=0.925, low=0.64, high=1.06)
    [note] = [c["note"] for c in fig.checks(res) if c["name"] == name]
    assert note == "3 independent runs pooled: 0.925 [0.640, 1.060]: met only when the interval's upper end is under 1"
    res["checks"] = fig.checks(res)
    page = peer_page.render(res)
    assert "a tie, not met" in page and "; a tie: the interval holds the target" in page
    assert "3 independent runs pooled (95 %)" in page
    # the fixture's 5 rounds: a 93.75 % interval at most (foxlib.harness.timing.stated_confidence), said so
    assert "with a 93.75 %\nbootstrap interval over the rounds (foxlib.harness.timing: fewer than 6 rounds" in page
    # the headers say the coverage, read from the intervals themselves; the cells do not say it again
    assert fig.coverage_pct(res) == "93.75" and "[93.75 % interval]" in page and "(93.75 % interval)" not in page
    assert "step time / peer's (ratio [93.75 % interval])" in fig.table_rows(res)[0]


def test_the_page_shows_the_files_verdicts_and_limits_not_judged_again():
    """The answer's PASS/FAIL and target are the file's checks (fig.stored_checks), one value each; a file lacking a
    target's check is refused, naming it."""
    res = json.loads(FIXTURE.read_text())

    def best():
        row = next(r for r in peer_page.context(res)["answer"] if r["name"] == "foxlib_best")
        return row["peak_passed"], row["step_verdict"], row["target"]
    assert best() == (True, "FAIL", 0.5)  # peak 0.45, step 0.61: the fixture's checks
    for c in res["checks"]:
        if c["name"] == fig.check_name(res, "foxlib_best", "step_time"):
            c.update(limit=0.7, passed=True)
    assert best() == (True, "PASS", 0.7)
    res["checks"] = [c for c in res["checks"] if c["name"] != fig.check_name(res, "foxlib_default", "peak")]
    assert peer_page.missing_keys(res) == ["checks.foxlib_default.peak"]


def test_the_page_shows_all_three_peers_with_foxlibs_ratios_and_intervals(fixture_copy, clean):
    """pytorch-forecasting, neuralforecast and darts (skip_interpolation off and on, same configuration and
    defaults): foxlib's default and best over each measured peer row, with the step-time interval; a library
    missing on the machine says so in its rows."""
    res = json.loads(FIXTURE.read_text())
    v = res["variants"]
    over = fig.foxlib_over_peers(res)
    assert set(over) == set(fig.PEER_ROWS) - {"nf", "nf_defaults"}
    for p in over:
        assert set(over[p]) == {"foxlib_default", "foxlib_best"}, p
        assert {"peak", "step_time", "step_time_interval"} <= set(over[p]["foxlib_default"]), p
    assert over["darts"]["foxlib_default"]["peak"] == pytest.approx(0.9e9 / 1.1e9)
    step = interval_of_samples(v["foxlib_default"]["timing"]["samples_s"], v["darts_skip"]["timing"]["samples_s"])
    assert over["darts_skip"]["foxlib_default"]["step_time_interval"]["median"] == pytest.approx(step.median)
    table = {r["name"]: r for r in fig.peers_table(res)}
    assert list(table) == list(fig.PEER_ROWS)
    assert not table["nf"]["measured"] and "neuralforecast is not installed" in table["nf"]["reason"]
    assert table["darts"]["library"] == "darts" and table["peer"]["library"] == "pytorch-forecasting"
    path, cited = fixture_copy
    page = peer_page.render_file(path, base=cited.parents[3]).read_text()
    first_screen = page[:page.index("<h2>Same configuration")]
    assert "Three peers" in first_screen
    for name in fig.PEER_ROWS:
        assert fig.ROWS[name] in first_screen, name
    assert f"{step.median:.3f}× [{step.low:.3f}, {step.high:.3f}]" in first_screen
    assert f"{0.9e9 / 1.1e9:.3f}×" in first_screen
    assert first_screen.count("neuralforecast is not installed here") >= 2
    assert "darts 0.48.1" in page and "neuralforecast not installed" in page
    # the page shows the stored ratios, not its own recomputation: a stored ratio changed shows as changed
    data = json.loads(path.read_text())
    data["ratios_by_peer"]["darts_skip"]["foxlib_default"]["step_time_interval"].update(median=0.123, low=0.1, high=0.2)
    path.write_text(json.dumps(data))
    assert "0.123× [0.100, 0.200]" in peer_page.render_file(path, base=cited.parents[3]).read_text()


def test_the_index_links_every_peer_page(tmp_path, clean):
    from foxlib.report import index
    (tmp_path / "cpu" / "wave-8.10").mkdir(parents=True)
    (tmp_path / "cpu" / "wave-8.10" / "results.json").write_text(json.dumps(
        {"wave": "8.10", "verdict": "GO", "device": {"name": "CPU"}, "generated_at": "now"}))
    (tmp_path / "cpu" / "peer-benchmark.html").write_text(peer_page.render(json.loads(FIXTURE.read_text())))
    assert 'href="cpu/peer-benchmark.html"' in index.write_index(tmp_path).read_text()


# ----------------------------------------------------------------------------- configurations

def test_best_configuration_sources_and_citation(tmp_path):
    given = conf.best_configuration({"precision": "fp16", "checkpointing": "vsn"}, "cpu", tmp_path)
    assert given["precision"] == "fp16" and given["tft_overrides"] == {"checkpointing": "vsn"}
    assert given["depends_on"] == []
    assert conf.best_configuration(None, "cpu", tmp_path)["precision"] == "bf16"  # built-in default
    wave = tmp_path / "cpu" / "wave-8.12"
    wave.mkdir(parents=True)
    (wave / "results.json").write_text(json.dumps({"measured_at_revision": "abc", "recommended": {
        "strategy": "x", "precision": "fp32", "tft_overrides": {"memory_efficient": True}}}))
    read = conf.best_configuration(None, "cpu", tmp_path)
    assert read["precision"] == "fp32" and read["tft_overrides"] == {"memory_efficient": True}
    assert read["depends_on"] == [provenance.cite(wave / "results.json")]
    assert read["depends_on"][0].revision == "abc"
    # the published H200 results: a repository-relative path, in the citation and in the source
    pub = conf.best_configuration(None, "h200", ROOT / "reports")
    assert pub["depends_on"][0].path == "reports/h200/wave-8.12/results.json"
    assert pub["source"].startswith("reports/h200/wave-8.12/results.json (recommended strategy:")
    provenance.verify(pub["depends_on"])


def test_a_best_configuration_of_another_size_is_refused():
    with pytest.raises(SystemExit, match="changes batch_size"):
        conf.foxlib_configs("small", {}, {"precision": "fp32", "tft_overrides": {"batch_size": 0.25},
                                          "source": "test"})
    _, default, best = conf.foxlib_configs("small", {}, {"precision": "fp32", "source": "test",
                                                         "tft_overrides": {"memory_efficient": True}})
    assert best.memory_efficient and best.batch_size == default.batch_size


def test_foxlibs_side_is_the_recipes_step_on_the_windows_the_peer_gets():
    """The windows same_batches gives the peer are the recipe's batch (checked at run time too)."""
    import dataclasses

    import numpy as np
    import torch

    from foxlib.data.market import MarketWindows
    from foxlib.harness.recipe import StepRecipe, build_step
    from foxlib.models import MODELS
    cfg = dataclasses.replace(MODELS["tft"].preset("small"), batch_size=4)
    step = build_step(StepRecipe("tft", cfg, seed=5), "cpu")
    windows = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    rows = np.random.default_rng(5).integers(0, len(windows), size=cfg.batch_size)  # as same_batches
    data.check_recipe_batch(step.batch, windows.get(rows))
    with pytest.raises(RuntimeError, match="differs"):
        data.check_recipe_batch(step.batch, MODELS["tft"].example_batch(cfg, seed=6))
    assert step.optimizer.param_groups[0]["lr"] == cfg.lr
    assert isinstance(step.step(), torch.Tensor)


# ----------------------------------------------------------------------------- compiled rows (tiny, CPU, eager backend)

@pytest.mark.slow
def test_a_compiled_row_measures_like_the_others_and_counts_its_graph_breaks():
    """Deliberately compiled on the CPU: a tiny TFT, Dynamo's eager backend (no Inductor code generation)."""
    import torch

    from foxlib.harness.recipe import StepRecipe, build_step
    from foxlib.memory import profile_step
    from foxlib.memory.step import TrainingStep
    from foxlib.models import MODELS
    cfg = MODELS["tft"].config("small", **TINY)
    step = build_step(StepRecipe("tft", cfg, seed=0), "cpu")
    breaks = compiled.graph_breaks(step.model, step.batch)
    assert breaks["graph_breaks"] >= 1 and breaks["graphs"] == breaks["graph_breaks"] + 1
    assert any("LSTM" in b["reason"] and b["where"].startswith("foxlib/models/tft.py:") for b in breaks["break_reasons"])
    model = compiled.CompiledTFT(step.model, "default", backend="eager")
    fn = TrainingStep(model, step.batch, step.loss_fn, step.optimizer, "fp32", torch.device("cpu"))
    first = compiled.first_steps(fn, torch.device("cpu"), n=2)
    assert first["compile_s"] > 0 and len(first["first_steps_s"]) == 2 and first["graphs_compiled"] >= 2
    prof = profile_step(model, step.batch, step.loss_fn, step.optimizer)
    assert prof.activations > 0 and prof.peak >= prof.parameters + prof.gradients + prof.optimizer_state
    torch._dynamo.reset()


# ----------------------------------------------------------------------------- with the peer

@needs_peer
def test_peer_sees_the_same_windows_as_foxlib():
    from benchmarks.peer import models
    from foxlib.models import MODELS
    cfg = MODELS["tft"].config("small", **TINY)
    ds = data.peer_dataset(cfg)
    fox, (x, y), windows = data.same_batches(cfg, ds, seed=3)  # raises if any input differs
    assert y[0].shape == fox["target"].shape == (4, 2)
    assert x["encoder_cont"].shape[:2] == (4, 10)
    peer = models.build_peer(ds, cfg)
    assert peer.hparams.hidden_size == peer.hparams.hidden_continuous_size == 16
    assert peer.hparams.output_size == len(cfg.quantiles)
    assert len(peer.encoder_variables) == 5 + cfg.n_observed and len(peer.decoder_variables) == 5
    own = models.build_peer(ds, cfg, hidden_continuous_size=8)  # its defaults: prescalers at 8, its embedding size
    assert own.hparams.hidden_continuous_size == 8 and own.hparams.embedding_sizes["series"][1] != 16


@needs_others
def test_the_other_peers_see_the_same_windows_and_are_built_as_asked():
    """neuralforecast's and darts' batches are pytorch-forecasting's numbers re-laid; each row's module is
    built at foxlib's configuration or at the library's defaults, darts with skip_interpolation off or on,
    and one training step's loss back-propagates."""
    import torch

    from benchmarks.peer import others
    from foxlib.models import MODELS
    cfg = MODELS["tft"].config("small", **TINY)
    ds = data.peer_dataset(cfg)
    fox, (x, y), _ = data.same_batches(cfg, ds, seed=3)
    nf, dt = others.batch("neuralforecast", ds, (x, y)), others.batch("darts", ds, (x, y))
    b, te, td, n = cfg.batch_size, cfg.encoder_length, cfg.decoder_length, cfg.n_observed
    assert nf["hist_exog"].shape == (b, te, n) and nf["futr_exog"].shape == (b, te + td, 5)
    assert torch.allclose(nf["hist_exog"], fox["observed"].float()) and torch.equal(nf["hist_exog"], dt["past_covariates"])
    assert torch.allclose(nf["futr_exog"][..., :4], fox["known"][..., :4].float())  # the calendar features
    assert torch.equal(dt["future_covariates"], nf["futr_exog"][:, te:]) and dt["static_covariates"].shape == (b, 1, 1)
    assert torch.allclose(nf["outsample_y"][..., 0], fox["target"].float()) and torch.equal(nf["outsample_y"], dt["future_target"])
    assert set(nf["stat_exog"].flatten().tolist()) <= {0.0, 1.0}
    built = {}
    for name, (lib, same, skip) in others.ROWS.items():
        model = others.build(name, ds, cfg, seed=0)
        arch = others.architecture(name, model)
        built[name] = arch
        loss = others.loss_fn(lib)(model, nf if lib == "neuralforecast" else dt)
        loss.backward()
        assert loss.ndim == 0 and torch.isfinite(loss), name
        grads = [p.grad for p in others.trainable(model)]
        assert all(g is not None for g in grads) or sum(g is not None for g in grads) > len(grads) // 2, name
    assert built["nf"]["hidden_size"] == 16 and built["nf"]["n_head"] == cfg.num_heads and built["nf"]["outputs"] == 3
    assert built["nf_defaults"]["hidden_size"] == 128 and built["nf_defaults"]["loss"] == "MAE"
    assert built["nf"]["historic_variables"] == 5 + n + 1  # its past target: one more historic variable
    assert built["darts"]["hidden_size"] == built["darts"]["hidden_continuous_size"] == 16
    assert built["darts"]["encoder_variables"] == 1 + n + 5 and built["darts"]["decoder_variables"] == 5
    assert built["darts"]["outputs"] == 3 and built["darts"]["static_categorical"] is True
    assert [built[r]["skip_interpolation"] for r in ("darts", "darts_skip", "darts_defaults", "darts_defaults_skip")] \
        == [False, True, False, True]
    assert built["darts_defaults"]["hidden_size"] == 16 and built["darts_defaults"]["hidden_continuous_size"] == 8
    assert built["darts_defaults"]["outputs"] == 17 and built["darts_defaults"]["heads"] == 4


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    """Every row, tiny, on the CPU: the compiled ones deliberately, with Dynamo's eager backend."""
    out = tmp_path_factory.mktemp("peer") / "results.json"
    rc = peer_tft.main(["--device", "cpu", "--preset", "small", "--config", json.dumps(TINY), "--repeats", "2",
                        "--warmup", "1", "--out", str(out), "--html", "auto", "--allow-dirty",
                        "--compile", "on", "--compile-backend", "eager",
                        "--reports-dir", str(out.parent / "no-reports")])
    assert rc == 0
    return out, json.loads(out.read_text())


@pytest.mark.slow
@needs_peer
def test_a_timing_run_that_fails_is_recorded_with_why(tmp_path):
    """A fresh process that fails (here: a preset that does not exist) leaves its error in its place, not a run:
    its exit status and last output lines (foxlib.harness.fresh_process.run_child)."""
    args = peer_tft._parser().parse_args(["--preset", "no-such-preset", "--device", "cpu", "--runs", "1",
                                          "--allow-dirty", "--reports-dir", str(tmp_path)])
    out = peer_tft.timing_runs(args, ["peer", "foxlib_default"])
    assert out["rows"] == ["peer", "foxlib_default"] and len(out["runs"]) == 1  # one entry per run asked for
    [run] = out["runs"]
    assert run["error"].startswith("exit 1: ") and "unknown preset 'no-such-preset'" in run["error"]


@pytest.mark.slow
@needs_peer
def test_tiny_benchmark_has_every_row_category_and_positive_times(tiny_results):
    path, res = tiny_results
    absent = {n for n, lib in fig.OTHER_PEERS.items() if not {"neuralforecast": HAS_NF, "darts": HAS_DARTS}[lib]}
    assert set(res["variants"]) == set(fig.ROWS) - absent and set(res["not_run"]) == absent
    for name, v in res["variants"].items():
        # parameters and buffers (neuralforecast's attention mask is a buffer), fp32
        assert v["n_parameters"] > 0 and v["parameter_bytes"] >= 4 * v["n_parameters"], name
        if name not in fig.OTHER_PEERS:
            assert v["parameter_bytes"] == 4 * v["n_parameters"], name
        mem = v["memory"]
        for key in ("parameters", "gradients", "optimizer_state", "activations", "forward_peak", "peak"):
            assert isinstance(mem[key], int) and mem[key] >= 0, (name, key)
        assert mem["peak"] >= mem["parameters"] + mem["gradients"] + mem["optimizer_state"], name
        assert v["timing"]["median_s"] > 0 and len(v["timing"]["samples_s"]) == 2, name
        assert all(t > 0 for t in v["timing"]["samples_s"]), name
    assert res["variants"]["foxlib_best"]["precision"] == "bf16"  # the built-in best: no 8.12 report there
    assert res["best"]["tft_overrides"] == {"memory_efficient": True, "checkpointing": "blocks"}
    assert res["depends_on"] == [] and res["measured_at_revision"]
    assert res["variants"]["peer_hcs8"]["architecture"]["hidden_continuous_size"] == 8
    for name in fig.COMPILED:
        c = res["variants"][name]["compile"]
        assert c["compile_s"] > 0 and c["recompile_s"] > 0 and c["backend"] == "eager", name
    assert res["compile"]["explain"]["graph_breaks"] >= 1
    for name in set(fig.ROWS) - {"peer"} - absent:
        assert {"parameters", "peak", "step_time", "step_time_interval"} <= set(res["ratios"][name])
    for name in set(fig.PEER_ROWS) - absent:  # foxlib over every peer row, with its interval
        assert {"peak", "step_time", "step_time_interval"} <= set(res["ratios_by_peer"][name]["foxlib_default"]), name
    for name in set(fig.OTHER_PEERS) - absent:
        assert res["variants"][name]["architecture"]["library"] == fig.OTHER_PEERS[name]
    if not absent:
        assert res["variants"]["darts_skip"]["architecture"]["skip_interpolation"] is True
        assert any("skip_interpolation" in n for n in res["notes"]) and any("neuralforecast" in n for n in res["notes"])
    assert len(res["checks"]) == 4 and all(isinstance(c["passed"], bool) for c in res["checks"])
    # the peer and the rows with a target timed in three fresh processes; each row's runs pooled
    assert res["timing_runs"]["rows"] == ["peer", "foxlib_default", "foxlib_best"] and res["arguments"]["runs"] == 3
    assert len(res["timing_runs"]["runs"]) == 3
    for run in res["timing_runs"]["runs"]:
        assert set(run["timing"]) == {"peer", "foxlib_default", "foxlib_best"}, run
        assert all(len(t["samples_s"]) == 2 and min(t["samples_s"]) > 0 for t in run["timing"].values())
    for name in fig.TARGETS:
        p = res["pooled_step_time"][name]
        assert len(p["runs"]) == 3 and p["low"] <= p["median"] <= p["high"], name
    assert {c["runs"] for c in res["checks"] if "runs" in c} == {3}
    assert res["config"]["hidden_size"] == 16 and res["config"]["batch_size"] == 4
    assert len(res["windows"]) == 4 and res["notes"]
    page = path.with_suffix(".html").read_text()
    assert all(label in page for label in fig.ROWS.values()) and "not measured" not in page.split("<h2>")[1]


# ----------------------------------------------------------------------------- the best row as 8.12 recommends it
# (tests/test_peer_best.py: its configuration, label, notes and page without the peer)

# what wave 8.12 is about to recommend, as --best gives it: bf16, the memory-efficient path, one CUDA
# graph, fused Adam applied in backward, measured with a small cuBLAS workspace
GRAPHED_BEST = {"precision": "bf16", "memory_efficient": True, "cuda_graph": True,
                "options": {"adam": "fused", "optimizer_in_backward": True}, "cublas_workspace": ":16:8"}
needs_cuda = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU; this machine has none")


def _run_best(tmp_path, device: str) -> dict:
    """peer and foxlib_best only, tiny, with GRAPHED_BEST: a few seconds on the CPU."""
    out = tmp_path / "results.json"
    rc = peer_tft.main(["--device", device, "--preset", "small", "--config", json.dumps(TINY), "--repeats", "2",
                        "--warmup", "1", "--variants", "peer,foxlib_best", "--out", str(out), "--html", "auto",
                        "--allow-dirty", "--reports-dir", str(tmp_path / "no-reports"),
                        "--best", json.dumps(GRAPHED_BEST)])
    assert rc == 0
    return json.loads(out.read_text())


@pytest.mark.slow
@needs_peer
def test_on_the_cpu_a_cuda_graph_best_runs_eager_with_its_options_and_a_note(tmp_path):
    res = _run_best(tmp_path, "cpu")
    row = res["variants"]["foxlib_best"]
    assert row["cuda_graph"] is False and row["precision"] == "bf16"
    assert row["options"] == StepOptions(adam="fused", optimizer_in_backward=True).to_dict()
    assert row["label"] == "foxlib TFT, best (8.12), fused Adam + Adam in backward"
    assert row["memory"]["activations"] > 0 and row["memory"]["gradients"] == 0  # Adam in backward freed them
    assert row["timing"]["median_s"] > 0 and len(row["timing"]["samples_s"]) == 2
    assert res["best"]["cuda_graph"] is True and res["best"]["cublas_workspace"] == ":16:8"
    assert any("on the CPU its row runs eager steps" in n for n in res["notes"])
    assert any("does not set it" in n for n in res["notes"])
    page = (tmp_path / "results.html").read_text()
    assert row["label"] in page and "its CUDA graph not applied on this device (eager steps)" in page


@pytest.mark.cuda
@needs_cuda
@needs_peer
def test_on_a_gpu_the_benchmarks_best_row_is_one_cuda_graph(tmp_path):
    res = _run_best(tmp_path, "cuda")
    row = res["variants"]["foxlib_best"]
    assert row["cuda_graph"] is True and row["memory"]["cuda_graph"] is True and row["memory"]["activations"] is None
    assert row["label"] == "foxlib TFT, best (8.12), CUDA graph + fused Adam + Adam in backward"
    assert row["memory"]["peak"] >= row["memory"]["parameters"] + row["memory"]["optimizer_state"] > 0
    assert row["timing"]["median_s"] > 0 and len(row["timing"]["samples_s"]) == 2
    assert {"peak", "step_time", "step_time_interval"} <= set(res["ratios"]["foxlib_best"])
    assert any("one captured CUDA graph" in n for n in res["notes"])
    page = (tmp_path / "results.html").read_text()
    assert row["label"] in page and "the whole step as one CUDA graph" in page and "in the CUDA graph" in page


@pytest.mark.slow
@needs_peer
def test_another_librarys_row_that_fails_is_not_run_and_says_why(tmp_path, monkeypatch):
    """A step of neuralforecast or darts that fails on the machine loses its row only (the page says why),
    not the run: the GPU run is one process for every row."""
    from benchmarks.peer import others

    def broken(name, ds, cfg, seed):
        raise RuntimeError("CUDA error: an illegal memory access (made up)")
    monkeypatch.setattr(others, "build", broken)
    out = tmp_path / "results.json"
    rc = peer_tft.main(["--device", "cpu", "--preset", "small", "--config", json.dumps(TINY), "--repeats", "1",
                        "--warmup", "0", "--variants", "peer,darts_skip,foxlib_default", "--out", str(out),
                        "--html", "auto", "--allow-dirty", "--reports-dir", str(tmp_path / "no-reports")])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res["variants"]) == {"peer", "foxlib_default"}
    if HAS_DARTS:
        assert res["not_run"]["darts_skip"].startswith("not run: its training step failed on this machine (RuntimeError")
    assert res["not_run"]["darts_skip"] in out.with_suffix(".html").read_text()
