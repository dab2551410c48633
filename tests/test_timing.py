"""Ratio intervals on hand-made samples: paired by round, bootstrap over rounds, seeded."""
import inspect
import random

import pytest

import numpy as np

from foxlib.core.parameters import CPU_DEFAULTS
from foxlib.harness.timing import (CONFIDENCE, ROUNDS_FOR_CONFIDENCE, RatioInterval, Timing, attainable_confidence,
                                   bootstrap_median, interval_of_samples, median_interval, paired_ratios,
                                   ratio_interval, shared_confidence, stated_confidence)


def _timings(**samples):
    return {n: Timing(n, tuple(s)) for n, s in samples.items()}


def test_ratios_are_paired_by_round():
    # the same drift hits both variants of a round: each round's ratio is exactly 2
    base = [1.0, 3.0, 0.5, 2.0]
    assert list(paired_ratios([2 * x for x in base], base)) == [2.0, 2.0, 2.0, 2.0]
    iv = ratio_interval(_timings(a=[2 * x for x in base], fp32=base), "a", "fp32")
    assert (iv.median, iv.low, iv.high) == (2.0, 2.0, 2.0)  # unpaired, the medians' spread would blur it


@pytest.mark.parametrize("n", [1, 2, 5, 10, 31])
def test_identical_samples_give_a_degenerate_interval_at_one(n):
    rnd = random.Random(n)
    s = [rnd.uniform(0.01, 1.0) for _ in range(n)]
    iv = ratio_interval(_timings(a=s, b=list(s)), "a", "b")
    assert iv == RatioInterval(1.0, 1.0, 1.0, stated_confidence(n))


@pytest.mark.parametrize("seed", range(20))
def test_a_known_2x_ratio_with_noise_is_inside_its_interval(seed):
    rnd = random.Random(seed)
    n = rnd.randint(3, 15)
    noise = [rnd.uniform(0, 0.1) for _ in range(n)]
    factors = [1 + e for e in noise] + [1 - e for e in noise]  # up to ±10 %, symmetric about exactly 2x
    rnd.shuffle(factors)
    base = [rnd.uniform(0.05, 0.2) for _ in factors]
    slow = [2 * b * f for b, f in zip(base, factors)]
    iv = ratio_interval(_timings(slow=slow, fp32=base), "slow", "fp32")
    assert iv.low <= 2.0 <= iv.high and iv.median == pytest.approx(2.0)
    assert 1.8 <= iv.low <= iv.median <= iv.high <= 2.2
    assert iv.low < iv.high


def test_the_interval_is_the_percentile_interval_of_resampled_medians():
    base = [1.0] * 4
    iv = interval_of_samples([1.0, 1.0, 1.0, 3.0], base, confidence=0.5, resamples=4000)
    # medians of 4 rounds resampled: 1 unless at least two of the four draws are the 3 (then 2 or 3)
    assert iv.median == 1.0 and iv.low == 1.0 and iv.high == 2.0


def test_the_seed_makes_the_interval_reproducible():
    rnd = random.Random(7)
    a, b = [rnd.uniform(1, 2) for _ in range(10)], [rnd.uniform(1, 2) for _ in range(10)]
    t = _timings(a=a, b=b)
    assert ratio_interval(t, "a", "b") == ratio_interval(t, "a", "b")
    assert ratio_interval(t, "a", "b", seed=1) != ratio_interval(t, "a", "b", seed=2)
    assert ratio_interval(t, "a", "b").confidence == 0.95
    wide = ratio_interval(t, "a", "b", confidence=0.99)
    narrow = ratio_interval(t, "a", "b", confidence=0.5)
    assert wide.low <= narrow.low <= narrow.high <= wide.high


def test_tie_and_limit_semantics():
    fast, slow = RatioInterval(0.64, 0.58, 0.71), RatioInterval(0.69, 0.60, 0.80)
    assert fast.tie(slow) and slow.tie(fast) and fast.overlaps(slow)
    assert not fast.tie(RatioInterval(0.80, 0.72, 0.90))
    assert fast.tie(RatioInterval(0.75, 0.71, 0.79))  # touching ends: inside each other's interval
    assert not RatioInterval(1.9, 1.7, 2.1).under(2.0)  # the median is under 2x, the interval is not
    assert RatioInterval(1.9, 1.7, 1.99).under(2.0)
    assert not RatioInterval(1.9, 1.7, 2.0).under(2.0)  # under, not at
    assert fast.scaled(4) == RatioInterval(2.56, 2.32, 2.84)
    assert str(fast) == "0.64x [0.58, 0.71]"
    assert RatioInterval.from_dict(fast.to_dict()) == fast
    with pytest.raises(ValueError, match="low <= high"):
        RatioInterval(1.0, 1.2, 1.1)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="same number of rounds"):
        interval_of_samples([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="timed variants: a, b"):
        ratio_interval(_timings(a=[1.0], b=[1.0]), "c", "b")
    with pytest.raises(ValueError, match="confidence"):
        interval_of_samples([1.0], [1.0], confidence=95)


def test_timing_round_trips_through_its_dict():
    t = Timing("a", (0.1, 0.3, 0.2))
    assert Timing.from_dict(t.to_dict()) == t and t.median_s == 0.2
    with pytest.raises(ValueError, match="no raw samples"):
        Timing.from_dict({"name": "old", "median_s": 0.2})


# ----------------------------------------------------------------------------- medians and spreads by hand

def test_median_iqr_and_noise_on_hand_counted_samples():
    # eight samples: the median is 4.5; statistics.quantiles (exclusive) puts the quartiles at
    # positions 2.25 and 6.75 of the sorted samples, 2.25 and 6.75: an IQR of 4.5, 100 % of the median
    t = Timing("a", (8.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0))
    assert t.median_s == 4.5 and t.iqr_s == 4.5 and t.noisy
    # fewer than four samples: the spread is max - min
    assert Timing("b", (0.1, 0.3, 0.2)).iqr_s == pytest.approx(0.2)
    # a 1 % spread is not noisy, an 11 % one is (NOISY is 10 % of the median)
    quiet = Timing("c", (1.00, 1.00, 1.00, 1.01, 1.01, 1.01))
    assert quiet.median_s == pytest.approx(1.005) and not quiet.noisy
    loud = Timing("d", (1.0, 1.0, 1.2, 1.2))  # quartiles 1.0 and 1.2: IQR 0.2 > 0.1 x 1.1
    assert loud.iqr_s == pytest.approx(0.2) and loud.noisy
    d = loud.to_dict()
    assert d["median_s"] == pytest.approx(1.1) and d["noisy"] is True and d["samples_s"] == [1.0, 1.0, 1.2, 1.2]


def test_alternating_rounds_rotate_the_order_after_the_warm_up():
    from foxlib.harness.timing import time_alternating
    calls = []
    variants = {n: (lambda n=n: calls.append(n)) for n in ("a", "b", "c")}
    got = time_alternating(variants, repeats=4, warmup=2)
    assert calls[:6] == ["a", "b", "c"] * 2  # two warm-up rounds in the given order, not timed
    assert calls[6:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]  # round r starts at r mod 3
    assert list(got) == ["a", "b", "c"] and all(len(t.samples) == 4 and min(t.samples) >= 0 for t in got.values())
    for bad in ({}, {"a": lambda: None}):
        with pytest.raises(ValueError, match="at least one variant and one repeat"):
            time_alternating(bad, repeats=0 if bad else 3)


def test_the_rounds_show_their_progress(monkeypatch, capsys):
    """Minutes of rounds on a CPU are not silent: a bar on stderr counts every call, warm-up included."""
    from foxlib.harness.timing import time_alternating
    monkeypatch.setenv("FOXLIB_PROGRESS", "1")
    time_alternating({"a": lambda: None, "b": lambda: None}, repeats=3, warmup=1)
    err = capsys.readouterr().err
    assert "timing 2 variants alternately" in err and "8/8" in err


def test_a_variant_that_fails_is_named_in_the_error():
    from foxlib.harness.timing import time_alternating
    calls = []

    def broken():
        calls.append("broken")
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom") as err:  # its own type: a caller may catch an OutOfMemoryError
        time_alternating({"fine": lambda: calls.append("fine"), "broken": broken}, repeats=2, warmup=1)
    assert calls == ["fine", "broken"]  # stopped in the warm-up
    assert err.value.__notes__ == ["while timing variant 'broken' (foxlib.harness.timing.time_alternating)"]


def test_ratio_intervals_and_ties_from_hand_computable_rounds():
    # every round's ratio is exact, so each interval is its ratio: 2x and 2x tie, 3x is shown slower
    base = [0.10, 0.20, 0.40, 0.80]
    t = _timings(fp32=base, twice=[2 * x for x in base], again=[0.2, 0.4, 0.8, 1.6], thrice=[3 * x for x in base])
    two, again, three = (ratio_interval(t, n, "fp32") for n in ("twice", "again", "thrice"))
    assert two == again == RatioInterval(2.0, 2.0, 2.0, 0.875)  # 4 rounds: 1 - 2 * 0.5**4
    assert two.tie(again) and not two.tie(three) and not three.tie(two)
    assert (three.median, three.low, three.high) == pytest.approx((3.0, 3.0, 3.0))
    assert two.under(2.5) and not two.under(2.0) and not three.under(3.0)
    # two rounds of ratios 1 and 3: the median is 2; resampled medians are 1, 2 or 3, so the interval
    # spans [1, 3], contains both 1.5 and 2.9, and covers the median with 50 % only
    iv = interval_of_samples([1.0, 3.0], [1.0, 1.0])
    assert (iv.median, iv.low, iv.high, iv.confidence) == (2.0, 1.0, 3.0, 0.5) and iv.low <= 1.5 <= 2.9 <= iv.high
    assert iv.tie(RatioInterval(2.9, 2.8, 3.5)) and not iv.tie(RatioInterval(3.2, 3.1, 3.5))


def test_bad_ratios_and_scales_are_refused():
    with pytest.raises(ValueError, match="must be positive"):
        paired_ratios([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="must be positive"):
        paired_ratios([1.0, 1.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="resamples must be at least 1"):
        interval_of_samples([1.0], [1.0], resamples=0)
    with pytest.raises(ValueError, match="positive factor"):
        RatioInterval(1.0, 0.9, 1.1).scaled(0)


def test_the_coverage_an_interval_states_is_what_its_rounds_can_give():
    # [smallest, largest] of n samples misses the median only when all n lie on one side of it: 2 * 0.5**n
    assert [attainable_confidence(n) for n in (1, 2, 3, 5, 6)] == [0.0, 0.5, 0.75, 0.9375, 0.96875]
    assert ROUNDS_FOR_CONFIDENCE == 6 and stated_confidence(6) == CONFIDENCE == stated_confidence(40)
    assert stated_confidence(2) == 0.5 and stated_confidence(5) == 0.9375
    with pytest.raises(ValueError, match="at least one round"):
        attainable_confidence(0)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_below_six_rounds_the_bootstrap_interval_is_the_range_and_says_its_coverage(n):
    rnd = random.Random(n)
    base = [rnd.uniform(1, 2) for _ in range(n)]
    slow = [b * rnd.uniform(1.1, 1.5) for b in base]
    ratios = paired_ratios(slow, base)
    iv = interval_of_samples(slow, base)
    assert (iv.low, iv.high) == (ratios.min(), ratios.max()) and iv.confidence == attainable_confidence(n)
    assert str(iv).endswith(f"({100 * attainable_confidence(n):g} % interval)")
    m, low, high, confidence = median_interval(slow)
    assert (low, high, confidence) == (min(slow), max(slow), attainable_confidence(n))


def test_six_rounds_state_the_full_confidence_and_say_nothing_more():
    base = [1.0, 1.1, 0.9, 1.2, 1.0, 0.95]
    iv = interval_of_samples([1.5 * b for b in base[:3]] + [1.6 * b for b in base[3:]], base)
    assert iv.confidence == CONFIDENCE and str(iv) == "1.55x [1.50, 1.60]"


def test_the_stated_coverage_holds_in_simulation():
    # medians of lognormal rounds: the share of intervals holding the true median (1) is what they state,
    # within sampling error (1000 trials: about 3 standard errors), at 2, 3 and 5 rounds
    rng = np.random.default_rng(0)
    for n in (2, 3, 5):
        hits = 0
        for t in range(1000):
            _, low, high = bootstrap_median(rng.lognormal(0, 0.1, n), resamples=200, seed=t)
            hits += low <= 1.0 <= high
        assert abs(hits / 1000 - stated_confidence(n)) < 0.045


def test_the_cpu_defaults_time_enough_rounds_for_the_stated_confidence():
    for wave, params in CPU_DEFAULTS.items():
        if "timing_repeats" in params:
            assert params["timing_repeats"] >= ROUNDS_FOR_CONFIDENCE, wave


def test_the_cublas_workspace_knob_times_enough_rounds_for_the_stated_confidence():
    from foxlib.waves.wave_8_12 import workspace

    assert workspace.ROUNDS >= ROUNDS_FOR_CONFIDENCE
    assert inspect.signature(workspace.measure_knob).parameters["rounds"].default == workspace.ROUNDS


def test_one_header_states_the_least_coverage_of_its_intervals_and_a_tie_holds_the_limit():
    six, two = RatioInterval(1.2, 1.1, 1.3), RatioInterval(0.9, 0.8, 1.0, 0.5)
    assert shared_confidence([six, two]) == 0.5 and shared_confidence([six]) == CONFIDENCE == shared_confidence([])
    assert two.range_text() == "0.90x [0.80, 1.00]" and str(two) == "0.90x [0.80, 1.00] (50 % interval)"
    assert two.holds(1.0) and two.holds(0.8) and not two.under(1.0)  # the upper end at the limit: a tie
    assert not six.holds(1.0) and not six.under(1.0) and six.under(1.31)


def test_the_cpu_rounds_count_each_call_s_minor_page_faults():
    """A call that maps 8 MiB of private anonymous memory anew (what an allocator maps) and touches every base page
    takes one minor fault per page each round, give or take a few of the interpreter's own: huge pages are refused
    for the mapping, so each fault maps one base page (a count, not bytes); a call that touches nothing new, a
    handful. The counts round-trip through the timing's dict. Off the CPU nothing is counted and the dict has no
    key."""
    import contextlib
    import mmap
    import torch
    from foxlib.harness.timing import time_alternating
    size = 8 * 2**20
    pages = size // mmap.PAGESIZE

    def touch():
        with mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as m:
            with contextlib.suppress(AttributeError, OSError):  # a platform or kernel without transparent huge pages
                m.madvise(mmap.MADV_NOHUGEPAGE)
            for offset in range(0, size, mmap.PAGESIZE):
                m[offset] = 1

    got = time_alternating({"touch": touch, "still": lambda: None}, repeats=3, warmup=1)
    assert len(got["touch"].minor_faults_samples) == 3
    assert all(pages <= n <= pages + pages // 8 for n in got["touch"].minor_faults_samples)
    assert got["still"].median_minor_faults < 64
    assert Timing.from_dict(got["touch"].to_dict()) == got["touch"]
    off_cpu = time_alternating({"still": lambda: None}, repeats=2, warmup=0, device=torch.device("meta"))["still"]
    assert off_cpu.minor_faults_samples == () and off_cpu.median_minor_faults is None
    assert "minor_faults_samples" not in off_cpu.to_dict()
