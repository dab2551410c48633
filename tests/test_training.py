"""The accuracy harness: skill fields of a run, evaluate against climatology, the stated configuration."""
import numpy as np
import pytest
import torch

from foxlib.data.market import MarketWindows
from foxlib.models import MODELS
from foxlib.harness.step_options import StepOptions
from foxlib.harness.training import (HARNESS, HarnessSettings, TrainResult, accuracy_config, climatology, evaluate,
                                     harness_config, train_tft)


class _Constant(torch.nn.Module):
    """Forecasts the same quantiles for every window: climatology, when given its levels."""

    def __init__(self, cfg, levels):
        super().__init__()
        self.config, self.levels = cfg, torch.tensor(levels, dtype=torch.float32)

    def forward(self, batch):
        return self.levels.expand(*batch["target"].shape, len(self.levels))


def test_climatology_scores_zero_skill_and_a_wider_band_scores_worse():
    cfg = MODELS["tft"].preset("small")
    train = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    val = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "validation")
    levels = climatology(train, cfg.quantiles)
    rows = np.arange(0, len(val), 5)
    out = evaluate(_Constant(cfg, levels), val, rows, "fp32", torch.device("cpu"), levels=levels)
    assert out["skill_score"] == pytest.approx(0.0, abs=1e-7)
    assert out["quantile_loss"] == pytest.approx(out["naive_quantile_loss"])
    assert out["coverage_10_90"] == out["naive_coverage_10_90"] > 0.8  # the validation years are calmer
    wide = evaluate(_Constant(cfg, 3 * levels), val, rows, "fp32", torch.device("cpu"), levels=levels)
    assert wide["skill_score"] < -0.1 and wide["naive_quantile_loss"] == out["naive_quantile_loss"]


def test_a_run_records_its_skill_and_its_harness():
    cfg = accuracy_config("small", batch_size=8)
    r = train_tft(cfg, max_steps=6, eval_every=3, patience=2, val_windows=32, show_progress=False,
                  target="abs_return", min_skill=0.05)
    m = r.metrics
    assert m["skill_score"] == pytest.approx(1 - m["quantile_loss"] / m["naive_quantile_loss"])
    assert 0 < m["naive_coverage_10_90"] < 1 and all("val_skill_score" in h for h in r.history)
    assert r.has_skill == (m["skill_score"] >= 0.05)
    assert isinstance(r.harness, HarnessSettings) and r.harness.target == "abs_return"
    assert r.harness.min_skill == 0.05 and r.harness.max_steps == 6 and r.harness.step_options is None
    assert r.harness.tft_config["batch_size"] == 8 and r.harness.tft_config["memory_efficient"] is True
    d = r.to_dict()  # as measurement.json holds it: has_skill beside, the harness's unset settings absent
    assert d["has_skill"] == r.has_skill and d["harness"]["min_skill"] == 0.05
    assert "step_options" not in d["harness"] and "concurrent_runs" not in d["harness"]
    assert TrainResult.from_dict(d).to_dict() == d and TrainResult.from_dict(d).harness.min_skill == 0.05


def test_the_harness_states_the_step_options_where_not_the_defaults():
    cfg = accuracy_config("small")
    plain = harness_config(cfg, max_steps=6, eval_every=3, patience=2, val_windows=32)
    fused = harness_config(cfg, max_steps=6, eval_every=3, patience=2, val_windows=32,
                           options=StepOptions(adam="fused"))
    assert plain.step_options is None and fused.step_options == StepOptions(adam="fused")
    assert list(fused.to_dict())[-1] == "step_options" and "step_options" not in plain.to_dict()
    assert fused.to_dict()["step_options"] == {**StepOptions().to_dict(), "adam": "fused"}  # every option, as stored


def test_accuracy_config_applies_the_harness():
    cfg = accuracy_config("small")
    assert cfg.batch_size == HARNESS["batch_size"] and cfg.lr == HARNESS["lr"] and cfg.memory_efficient
    assert accuracy_config("small", memory_efficient=False, batch_size=16).batch_size == 16
    with pytest.raises(ValueError, match="valid presets"):
        accuracy_config("tiny")
