"""Skill over climatology (foxlib.harness.training) and the accuracy gate's power: climatology, skill scores, and the gate on hand-made runs."""
import numpy as np
import pytest
import torch

from foxlib.data.market import MarketWindows
from foxlib.harness.training import (TrainResult, accuracy_gate, check_target, climatology, coverage, has_skill,
                                     naive_prediction, skill_score, skill_summary)
from tests.conftest import hand_harness


def test_abs_return_target_is_the_absolute_return_and_bad_targets_name_the_valid_ones():
    r = MarketWindows(4, 10, 3, "validation")
    a = MarketWindows(4, 10, 3, "validation", target="abs_return")
    rows = np.arange(0, 40, 7)
    assert torch.equal(a.get(rows)["target"], r.get(rows)["target"].abs())
    assert np.allclose(a.targets()[rows], np.abs(r.get(rows)["target"].numpy()), atol=1e-6)
    with pytest.raises(ValueError, match="valid targets: return, abs_return"):
        MarketWindows(4, 10, 3, "train", target="direction")
    with pytest.raises(ValueError, match="valid targets: return, abs_return"):
        check_target("sign")


def test_climatology_is_the_training_windows_quantiles():
    train = MarketWindows(4, 10, 3, "train")
    levels = climatology(train, (0.1, 0.5, 0.9))
    all_targets = np.concatenate([train.get(np.arange(i, min(i + 2000, len(train))))["target"].numpy().ravel()
                                  for i in range(0, len(train), 2000)])
    assert np.allclose(levels, np.quantile(all_targets, [0.1, 0.5, 0.9]), atol=1e-4)
    assert levels[0] < 0 < levels[2] and -0.2 < levels[1] < 0.2  # daily returns in percent
    # abs_return: all quantiles positive
    assert (climatology(MarketWindows(4, 10, 3, "train", target="abs_return"), (0.1, 0.5, 0.9)) > 0).all()


def test_naive_prediction_coverage_and_skill_score():
    target = torch.tensor([[-2.0, 0.0, 1.0], [0.5, 3.0, -0.5]])
    pred = naive_prediction(np.array([-1.0, 0.0, 1.0]), target)
    assert pred.shape == (2, 3, 3) and torch.equal(pred[1, 2], torch.tensor([-1.0, 0.0, 1.0]))
    assert coverage(pred, target, (0.1, 0.5, 0.9)) == pytest.approx(4 / 6)
    assert coverage(pred, target, (0.25, 0.5, 0.75)) is None
    assert skill_score(0.9, 1.0) == pytest.approx(0.1) and skill_score(1.1, 1.0) == pytest.approx(-0.1)
    assert has_skill({"skill_score": 0.02}) and not has_skill({"skill_score": 0.019})
    assert not has_skill({"quantile_loss": 0.5})  # no skill measured: no skill


def _run(precision, seed, loss, naive=1.0, min_skill=0.02):
    harness = hand_harness(min_skill=min_skill)
    return TrainResult(precision, seed, 1, 1, False, 1.0, [], {
        "quantile_loss": loss, "naive_quantile_loss": naive, "skill_score": 1 - loss / naive, "coverage_10_90": 0.8,
        "naive_coverage_10_90": 0.9}, harness)


def test_the_gate_compares_only_seeds_whose_fp32_run_has_skill():
    runs = [_run("fp32", 0, 0.90), _run("fp16", 0, 0.91),     # skill 10 %: compared
            _run("fp32", 1, 0.99), _run("fp16", 1, 1.30)]     # skill 1 %: left out
    gate = accuracy_gate(runs, "fp16")
    assert gate["powered"] and gate["powered_seeds"] == [0] and gate["seeds_compared"] == [0]
    assert gate["degradation_pct"] == pytest.approx(100 * (0.91 - 0.90) / 0.90)
    assert gate["baseline_skill_scores"] == {0: pytest.approx(0.10), 1: pytest.approx(0.01)}
    rows = {r["precision"]: r for r in skill_summary(runs)}
    assert rows["fp32"]["with_skill"] == 1 and rows["fp32"]["skill_score"] == pytest.approx(0.055)
    assert rows["fp32"]["min_skill_score"] == pytest.approx(0.01) and rows["fp16"]["with_skill"] == 1


def test_no_skill_means_no_power():
    runs = [_run("fp32", s, 1.0 - 0.005 * s) for s in range(3)] + [_run("bf16", s, 1.0) for s in range(3)]
    gate = accuracy_gate(runs, "bf16")
    assert not gate["powered"] and gate["powered_seeds"] == [] and gate["seeds_compared"] == [0, 1, 2]
    assert gate["reason"].startswith("no power")
    # the threshold is the harness's: at 0.5 % two seeds have skill
    runs = [_run("fp32", s, 1.0 - 0.005 * s, min_skill=0.005) for s in range(3)] + [_run("bf16", 1, 1.0)]
    assert accuracy_gate(runs, "bf16")["powered_seeds"] == [1, 2]


def test_preflight_refuses_a_bad_target_or_batch_before_anything_runs():
    from foxlib.run.preflight import check
    base = {"precisions": "fp32,fp16", "candidate": "fp16"}
    check("8.11", {**base, "accuracy_target": "abs_return", "accuracy_batch_size": 64})
    with pytest.raises(ValueError, match="valid targets: return, abs_return"):
        check("8.11", {**base, "accuracy_target": "direction"})
    with pytest.raises(ValueError, match="'accuracy_batch_size' must be at least 1"):
        check("8.12", {"accuracy_batch_size": 0})
