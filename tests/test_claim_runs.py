"""The seed's speed claims: one reading of "+N % faster" / "-N % slower" (foxlib.core.seed_claims), verdicts
only from independent runs that agree, and the runs themselves (foxlib.waves.wave_8_12.claim_runs)."""
import pytest

from foxlib.core import pooled_runs as pr, seed_claims as sc
from foxlib.harness.fresh_process import FailedRun, RunsNotMade
from foxlib.waves.wave_8_12 import claim_runs as cr
from tests.conftest import committed, committed_measurement, committed_path, fresh_process_output, measurement_at


def _verdict(runs, ratio, spread=None):
    """foxlib.core.seed_claims' verdict of one claim's runs: pooled_verdict on their pooled_interval (the spread
    given, else these runs' own; wave 8.12 pools it over every claim: analysis.claim_verdicts, tested below)."""
    _, low, high = pr.pooled_interval(runs, spread)
    return sc.pooled_verdict(len(runs), low, high, ratio)


@pytest.mark.parametrize("text, ratio", [("+20% faster", 1 / 1.2), ("-40% slower", 1 / 0.6), ("-75% slower", 4.0),
                                         ("no change", 1.0), ("-40 % slower", 1 / 0.6)])
def test_one_reading_of_faster_and_slower(text, ratio):
    assert sc.speed_ratio(text) == pytest.approx(ratio)


@pytest.mark.parametrize("text", ["twice as fast", "-100% slower", "40% quicker"])
def test_a_claim_without_a_reading_is_an_error(text):
    with pytest.raises(ValueError):
        sc.speed_ratio(text)


def test_every_speed_guess_of_the_seed_has_a_reading():
    assert {k: round(sc.speed_ratio(g["speed"]), 3) for k, g in sc.STRATEGY_GUESSES.items()} == \
        {"fp16": 0.833, "checkpointing": 1.667, "batch_8": 4.0, "sequence_30": 1.0}


def test_the_band_is_ten_percent_either_way():
    low, high = sc.speed_band(1.0)
    assert low == pytest.approx(1 / 1.1) and high == pytest.approx(1.1)


def test_the_runs_that_flipped_on_the_h200_straddle_the_band_and_say_so():
    """Two H200 runs of "checkpoint all" at one revision, 1.39x [1.23, 1.69] and 1.53x [1.43, 1.69], and a third:
    their pooled interval crosses the band's lower edge (1.52), so the verdict is inconclusive, not holds in one
    set and wrong in another."""
    runs = [(1.39, 1.23, 1.69), (1.53, 1.43, 1.69), (1.45, 1.30, 1.60)]
    assert _verdict(runs, sc.speed_ratio("-40% slower")) == "inconclusive"
    assert _verdict(runs[:2], sc.speed_ratio("-40% slower")) == "inconclusive"  # two runs are not enough


def test_the_committed_h200_runs_of_checkpoint_variables_are_wrong_pooled():
    """The committed H200 claim runs of "checkpoint variables" (2.06x [1.89, 2.19], 2.18x [2.06, 2.28],
    2.02x [1.81, 2.22]): the third run's interval meets the band, so "every run agrees" called it inconclusive
    where another set of runs called it wrong; pooled, the mean's interval lies above the band."""
    runs = [(2.06, 1.89, 2.19), (2.18, 2.06, 2.28), (2.02, 1.81, 2.22)]
    centre, low, high = pr.pooled_interval(runs)
    assert centre == pytest.approx((2.06 * 2.18 * 2.02) ** (1 / 3))
    assert low > sc.speed_band(sc.speed_ratio("-40% slower"))[1]
    assert _verdict(runs, sc.speed_ratio("-40% slower")) == "wrong"


def test_the_pooled_interval_by_hand():
    """Medians e^-0.1, 1, e^0.1: log mean 0, sd 0.1, half-width t(2) 4.303 x 0.1 / sqrt(3) = 0.2484; each run's own
    interval (half-width 0.01 on the log scale) is narrower, so it does not widen it."""
    import math
    runs = [(math.exp(x), math.exp(x - 0.01), math.exp(x + 0.01)) for x in (-0.1, 0.0, 0.1)]
    centre, low, high = pr.pooled_interval(runs)
    assert centre == pytest.approx(1.0)
    assert math.log(high) == pytest.approx(4.303 * 0.1 / math.sqrt(3), rel=1e-4)
    assert math.log(low) == pytest.approx(-math.log(high))
    same = [(1.0, 0.9, 1.2)] * 3  # runs that agree exactly: the runs' own intervals / sqrt(3), not a point
    half = math.log(1.2 / 0.9) / 2 / math.sqrt(3)
    assert pr.pooled_interval(same) == pytest.approx((1.0, math.exp(-half), math.exp(half)))


def test_the_spread_between_runs_is_pooled_over_the_claims_timed_together():
    """Two claims, 3 runs each, log medians (-0.1, 0, 0.1) and (0, 0, 0): pooled sd sqrt(0.02 / 4) on 4 degrees of
    freedom; the second claim's interval then has t(4) 2.776 x sd / sqrt(3), where alone it would be a point
    widened only by its runs' own intervals."""
    import math
    a = [(math.exp(x), math.exp(x - 0.001), math.exp(x + 0.001)) for x in (-0.1, 0.0, 0.1)]
    b = [(1.0, math.exp(-0.001), math.exp(0.001))] * 3
    sd, df = pr.run_spread([a, b])
    assert df == 4 and sd == pytest.approx(math.sqrt(0.02 / 4))
    _, low, high = pr.pooled_interval(b, (sd, df))
    assert math.log(high) == pytest.approx(2.776 * sd / math.sqrt(3), rel=1e-4)
    with pytest.raises(ValueError):
        pr.run_spread([[(1.0, 0.9, 1.1)]])  # one run: no spread


def test_a_verdict_needs_the_pooled_interval_on_one_side_of_an_edge():
    apart = (2.5, 2.4, 2.6)
    inside = (1.0, 0.97, 1.03)
    assert _verdict([apart] * 3, 1.0) == "wrong"
    assert _verdict([inside] * 3, 1.0) == "holds"
    assert _verdict([inside, inside, apart], 1.0) == "inconclusive"  # the spread crosses the band
    wide = (1.0, 0.5, 2.0)  # high / low = 4: confirms nothing
    assert sc.interval_verdict(wide[1], wide[2], sc.speed_band(1.0)) == "inconclusive"
    assert _verdict([wide] * 3, 1.0) == "inconclusive"
    assert sc.interval_verdict(1.05, 1.15, sc.speed_band(1.0)) == "inconclusive"  # across the upper edge 1.1


def _run(base_samples, other_samples):  # a fresh process's output, as the H200's claim runs hold it
    return fresh_process_output({"fp32 (baseline)": base_samples, "batch ÷4": other_samples})


def test_claim_intervals_are_per_run_and_per_training_window():
    data = {"strategies": ["fp32 (baseline)", "batch ÷4"], "batch_sizes": {"fp32 (baseline)": 32, "batch ÷4": 8},
            "steps": 3, "runs": [_run([1.0, 1.0, 1.0], [0.5, 0.5, 0.5]), _run([2.0, 2.0, 2.0], [0.5, 0.5, 0.5])],
            "skipped": {}}
    got = cr.claim_intervals(cr.ClaimRuns.from_dict(data))
    assert list(got) == ["batch ÷4"] and len(got["batch ÷4"]) == 2
    assert got["batch ÷4"][0].median == pytest.approx(2.0)  # half the step time, four times the steps
    assert got["batch ÷4"][1].median == pytest.approx(1.0)
    failed = cr.ClaimRuns.from_dict({**data, "runs": [data["runs"][0], {"error": "exit 1: boom", "env": {}}]})
    assert cr.claim_intervals(failed) == {} and failed.absent_reason == "independent run 2 failed: exit 1: boom"
    assert failed.runs[1] == FailedRun("exit 1: boom", {}) and failed.runs[0].variants["batch ÷4"].step_s_median == 0.5
    skipped = cr.claim_runs_record({"skipped_all": "not asked"})
    assert skipped == RunsNotMade("not asked") and cr.claim_intervals(skipped) == {}
    assert skipped.absent_reason == "not asked" and skipped.to_dict() == {"skipped_all": "not asked"}
    made = cr.claim_runs_record(data)
    assert made == cr.ClaimRuns.from_dict(data) and made.absent_reason is None
    assert cr.ClaimRuns.from_dict(data).to_dict() == data and failed.to_dict()["runs"][1] == {"error": "exit 1: boom",
                                                                                              "env": {}}
    with pytest.raises(TypeError, match="runs"):  # skipped, or made: not both
        cr.claim_runs_record({"skipped_all": "not asked", "runs": []})
    with pytest.raises(TypeError, match="step_s_median"):  # a process's output lacking a key is refused
        cr.ClaimRuns.from_dict({**data, "runs": [{**_run([1.0], [1.0]), "variants": {"fp32": {"step_s_samples": []}}}]})
    with pytest.raises(TypeError, match="surprise"):
        cr.ClaimRuns.from_dict({**data, "runs": [{**_run([1.0], [1.0]), "surprise": 1}]})


def test_the_claim_strategies_are_those_a_seed_guess_names():
    assert set(cr.CLAIM_STRATEGIES) == {"fp16", "checkpoint VSNs", "checkpoint blocks", "checkpoint all",
                                        "checkpoint variables", "batch ÷4", "sequence ÷2"}
    assert cr.RUNS == pr.MIN_RUNS == 3


@pytest.mark.slow
def test_claim_runs_run_in_fresh_processes_and_skip_16_bit_without_kernels(monkeypatch):
    import torch

    from foxlib.memory.cpu_support import KernelSpeed
    from foxlib.models import MODELS
    from foxlib.waves.wave_8_12.strategies import configure, select
    monkeypatch.setattr(cr, "kernel_speed", lambda p: KernelSpeed(p, 30.0, "AVX2"))
    chosen = select("fp32 (baseline);fp16;batch ÷4")
    base = MODELS["tft"].config("small", batch_size=8, encoder_length=8)
    configs = {s.name: configure(base, s.overrides) for s in chosen}
    data = cr.measure_claim_runs(chosen, configs, "small", torch.device("cpu"), 0, runs=1, steps=2)
    assert "no fp16 matrix-product kernels" in data["skipped"]["fp16"]
    assert data["strategies"] == ["fp32 (baseline)", "batch ÷4"] and data["batch_sizes"]["batch ÷4"] == 2
    got = cr.claim_intervals(cr.ClaimRuns.from_dict(data))
    assert len(got["batch ÷4"]) == 1 and got["batch ÷4"][0].median > 0
    assert cr.measure_claim_runs(chosen, configs, "small", torch.device("cpu"), 0, runs=0) == \
        {"skipped_all": "not asked (claim_runs=0): each claim rests on the one alternating run"}


def test_the_page_says_the_reading_and_why_there_are_no_runs_as_measured():
    """Where the runs give no interval the page says the measurement's own reason: not asked (the CPU's run), made
    before claim runs existed, no claim strategy among the run's, a failed process; not the parameter's value."""
    from foxlib.waves.wave_8_12.tables import claim_runs_table, claim_runs_text
    from foxlib.waves.wave_8_12.records import Measurement812
    gpu_m, cpu_m = committed_measurement("h200", "8.12"), committed_measurement("cpu", "8.12")
    gpu, cpu = Measurement812.from_measurement(gpu_m), Measurement812.from_measurement(cpu_m)
    assert claim_runs_text(gpu_m.claim_runs.absent_reason) == f"Reading: {sc.SPEED_READING}."
    assert len(claim_runs_table(gpu)) == len(gpu.claim_runs) == len(cr.CLAIM_STRATEGIES)
    assert claim_runs_text(cpu_m.claim_runs.absent_reason).endswith(
        "\n\nNot measured in this run: not asked (claim_runs=0): each claim rests on the one alternating run.")
    assert claim_runs_table(cpu) is None
    variants = committed_path("h200", "8.12").parents[1] / "variants"
    old = measurement_at(variants / "wave-8.12-strategies-fp32-baseline-memory-dc49de87/measurement.json")
    assert old.claim_runs.absent_reason == "measured before the claim runs existed"
    only_fp32 = measurement_at(variants / "wave-8.12-strategies-efficient-bf16-cuda-cc0869e1/measurement.json")
    assert only_fp32.claim_runs.strategies == ["fp32 (baseline)"]
    assert only_fp32.claim_runs.absent_reason == "no strategy a seed speed claim is about was timed"
    skipped = cr.ClaimRuns(["fp32 (baseline)"], {"fp32 (baseline)": 32}, 3, (), {"fp16": "no fast kernels"})
    assert skipped.absent_reason == "no strategy a seed speed claim is about was timed (fp16: no fast kernels)"


def test_the_ledger_judges_checkpointing_every_block_and_the_variables():
    """The ledger's checkpointing rows: "checkpoint blocks" (every major block) and "checkpoint variables" (the
    granularity that saves memory), each named in its row."""
    from foxlib.report import ledger
    names = [c.name for c in ledger.CLAIMS if c.name.startswith("Checkpointing")]
    assert names == [f"Checkpointing ({g}): {what}" for g in ("every block", "VSN variables, the granularity that "
                                                                              "saves memory")
                     for what in ("memory", "speed", "accuracy")]


def test_five_sets_of_h200_runs_never_contradict_on_a_ledger_claim():
    """Five sets of claim runs on the H200 (the committed 8.12 measurement's, at 53b1112, and four kept in
    reports/h200/claim-runs/: c500ee8's, two re-runs at d3b10e0 and 7b01627's). Every claim the index's ledger
    judges gets a verdict in every set, and a claim may move between a verdict and "inconclusive", never from
    "holds" to "wrong". At 53b1112 two ledger claims moved to "inconclusive": checkpoint blocks (pooled
    1.57x [1.48, 1.65] against the band's 1.52) and batch ÷4 (3.78x [3.59, 3.99] against 3.60): both pooled
    centres lower than in the other four sets (1.62-1.66x, 3.90-3.99x). Eager steps are launch-bound and their
    time varies from run to run with the host; this test does not say why that run's ratios were lower. The
    verdicts the same in all five: fp16 "wrong", checkpoint variables "wrong", sequence ÷2 "holds"."""
    import dataclasses
    import json

    from foxlib.waves.wave_8_12 import analysis, records
    sets = [committed("h200", "8.12")["claim_runs"]]
    sets += [json.loads(p.read_text())["claim_runs"]
             for p in sorted((committed_path("h200", "8.12").parents[1] / "claim-runs").glob("claim-runs-*.json"))]
    assert len(sets) == 5
    page = records.Measurement812.from_measurement(committed_measurement("h200", "8.12"))
    verdicts = []
    for data in sets:  # each set judged as the page and the index judge it (analysis.claim_verdicts)
        assert cr.claim_runs_record(data).to_dict() == data  # each set read as typed and written back as it is
        judged = analysis.claim_verdicts(dataclasses.replace(
            page, claim_runs=cr.claim_intervals(cr.claim_runs_record(data))))
        verdicts.append({n: v["verdict"] for n, v in judged.items()})
    in_ledger = {"fp16", "checkpoint blocks", "checkpoint variables", "batch ÷4", "sequence ÷2"}  # its speed rows
    assert all(in_ledger < set(v) for v in verdicts)
    for name in verdicts[0]:
        seen = {v[name] for v in verdicts}
        assert not {"holds", "wrong"} <= seen, (name, seen)
    for name, verdict in (("fp16", "wrong"), ("checkpoint variables", "wrong"), ("sequence ÷2", "holds")):
        assert {v[name] for v in verdicts} == {verdict}
