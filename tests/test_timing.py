"""Ratio intervals on hand-made samples: paired by round, bootstrap over rounds, seeded."""
import random

import pytest

from foxlib.harness.timing import RatioInterval, Timing, interval_of_samples, paired_ratios, ratio_interval


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
    assert iv == RatioInterval(1.0, 1.0, 1.0)


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
    assert iv.contains(2.0) and iv.median == pytest.approx(2.0)
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
