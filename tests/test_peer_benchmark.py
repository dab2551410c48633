"""The peer benchmark (benchmarks/peer_tft.py), run tiny.

pytorch-forecasting is a benchmark-only dependency: it lives in `.venv-peer` (requirements-peer.txt),
not in the workbook's `.venv`, so the measuring test is skipped where it is not importable.
Rendering a page from a results file needs no peer and always runs.
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

HAS_PEER = importlib.util.find_spec("pytorch_forecasting") is not None
needs_peer = pytest.mark.skipif(
    not HAS_PEER, reason="pytorch_forecasting is not installed here (a benchmark-only dependency: run the "
                         "test in .venv-peer, built from requirements-peer.txt)")

# the small preset, shortened: every code path of the benchmark, a few seconds per step on two busy cores
TINY = {"batch_size": 4, "encoder_length": 10, "decoder_length": 2}


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("peer") / "results.json"
    rc = peer_tft.main(["--device", "cpu", "--preset", "small", "--config", json.dumps(TINY), "--repeats", "2",
                        "--warmup", "1", "--out", str(out), "--html", "auto",
                        "--reports-dir", str(out.parent / "no-reports")])
    assert rc == 0
    return out, json.loads(out.read_text())


@pytest.mark.slow
@needs_peer
def test_tiny_benchmark_has_every_category_and_positive_times(tiny_results):
    path, res = tiny_results
    assert set(res["variants"]) == {"peer", "foxlib_default", "foxlib_best"}
    for name, v in res["variants"].items():
        assert v["n_parameters"] > 0 and v["parameter_bytes"] == 4 * v["n_parameters"], name
        mem = v["memory"]
        for key in ("parameters", "gradients", "optimizer_state", "activations", "forward_peak", "peak"):
            assert isinstance(mem[key], int) and mem[key] >= 0, (name, key)
        assert mem["peak"] >= mem["parameters"] + mem["gradients"] + mem["optimizer_state"], name
        assert v["timing"]["median_s"] > 0 and len(v["timing"]["samples_s"]) == 2, name
        assert all(t > 0 for t in v["timing"]["samples_s"]), name
    assert res["variants"]["foxlib_best"]["precision"] == "bf16"  # the built-in best: no 8.12 report there
    assert res["best"]["tft_overrides"] == {"memory_efficient": True, "checkpointing": "blocks"}
    for name in ("foxlib_default", "foxlib_best"):
        assert set(res["ratios"][name]) == {"parameters", "parameter_bytes", "activations", "peak", "step_time",
                                          "step_time_paired"}
        assert all(r > 0 for r in res["ratios"][name].values())
    assert len(res["checks"]) == 4 and all(isinstance(c["passed"], bool) for c in res["checks"])
    assert res["config"]["hidden_size"] == 16 and res["config"]["batch_size"] == 4
    assert len(res["windows"]) == 4 and res["notes"]
    page = path.with_suffix(".html").read_text()
    assert "pytorch-forecasting TFT" in page and "Ratios foxlib / peer" in page


@needs_peer
def test_peer_sees_the_same_windows_as_foxlib():
    from foxlib.models import MODELS
    cfg = MODELS["tft"].config("small", **TINY)
    ds = peer_tft.peer_dataset(cfg)
    fox, (x, y), windows = peer_tft.same_batches(cfg, ds, seed=3)  # raises if any input differs
    assert y[0].shape == fox["target"].shape == (4, 2)
    assert x["encoder_cont"].shape[:2] == (4, 10)
    peer = peer_tft.build_peer(ds, cfg)
    assert peer.hparams.hidden_size == peer.hparams.hidden_continuous_size == 16
    assert peer.hparams.output_size == len(cfg.quantiles)
    assert len(peer.encoder_variables) == 5 + cfg.n_observed and len(peer.decoder_variables) == 5


def test_best_configuration_sources(tmp_path):
    given = peer_tft.best_configuration({"precision": "fp16", "checkpointing": "vsn"}, "cpu", tmp_path)
    assert given["precision"] == "fp16" and given["tft_overrides"] == {"checkpointing": "vsn"}
    assert peer_tft.best_configuration(None, "cpu", tmp_path)["precision"] == "bf16"  # built-in default
    wave = tmp_path / "cpu" / "wave-8.12"
    wave.mkdir(parents=True)
    (wave / "results.json").write_text(json.dumps({"recommended": {
        "strategy": "x", "precision": "fp32", "tft_overrides": {"memory_efficient": True}}}))
    read = peer_tft.best_configuration(None, "cpu", tmp_path)
    assert read["precision"] == "fp32" and read["tft_overrides"] == {"memory_efficient": True}
    assert "wave-8.12" in read["source"]


def test_a_best_configuration_of_another_size_is_refused():
    with pytest.raises(SystemExit, match="changes batch_size"):
        peer_tft.foxlib_configs("small", {}, {"precision": "fp32", "tft_overrides": {"batch_size": 0.25},
                                              "source": "test"})
    _, default, best = peer_tft.foxlib_configs("small", {}, {"precision": "fp32", "source": "test",
                                                             "tft_overrides": {"memory_efficient": True}})
    assert best.memory_efficient and best.batch_size == default.batch_size


def test_render_needs_no_peer(tmp_path):
    """A results file renders to a self-contained page with the table and the ratios, in any environment."""
    def variant(label, n, peak, act, ms, precision="fp32"):
        return {"label": label, "precision": precision, "n_parameters": n, "parameter_bytes": 4 * n,
                "by_block": {"a": n}, "memory": {"parameters": 4 * n, "gradients": 4 * n, "optimizer_state": 8 * n,
                                                 "activations": act, "forward_peak": peak, "peak": peak,
                                                 "peak_method": "test"},
                "timing": {"median_s": ms / 1e3, "iqr_s": 0.001, "noisy": False, "samples_s": [ms / 1e3] * 3}}
    res = {"title": "Peer benchmark", "generated_at": "now", "device": {"type": "cpu", "name": "CPU", "short": "cpu"},
           "variants": {"peer": variant("pytorch-forecasting TFT", 100, 4000, 2000, 50),
                        "foxlib_default": variant("foxlib TFT, default", 120, 3000, 1500, 40),
                        "foxlib_best": variant("foxlib TFT, best (8.12)", 120, 1500, 10, 30, "bf16")},
           "config": {"hidden_size": 16}, "notes": ["a <note>"]}
    res["ratios"] = peer_tft.ratios(res)
    res["checks"] = peer_tft.checks(res)
    assert res["ratios"]["foxlib_default"]["peak"] == pytest.approx(0.75)
    assert [c["passed"] for c in res["checks"]] == [True, True, True, False]  # best: 30/50 > 0.5
    src = tmp_path / "r.json"
    src.write_text(json.dumps(res))
    assert peer_tft.main(["--render", str(src), "--html", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "<table>" in page and "0.750" in page and "a &lt;note&gt;" in page and "<script" not in page
    assert "FAIL" in peer_tft.text_table(res) and "PASS" in peer_tft.text_table(res)
    # the index links every peer page of a device folder
    from foxlib.report import index
    (tmp_path / "cpu").mkdir()
    (tmp_path / "page.html").rename(tmp_path / "cpu" / "peer-benchmark.html")
    (tmp_path / "cpu" / "wave-8.10").mkdir()
    (tmp_path / "cpu" / "wave-8.10" / "results.json").write_text(json.dumps(
        {"wave": "8.10", "verdict": "GO", "device": {"name": "CPU"}, "generated_at": "now"}))
    assert 'href="cpu/peer-benchmark.html"' in index.write_index(tmp_path).read_text()


def test_foxlibs_side_is_the_recipes_step_on_the_windows_the_peer_gets():
    """The windows same_batches gives the peer are the recipe's batch (checked at run time too)."""
    import dataclasses

    import numpy as np
    import torch

    from foxlib.data.market import MarketWindows
    from foxlib.models import MODELS
    from foxlib.harness.recipe import StepRecipe, build_step
    cfg = dataclasses.replace(MODELS["tft"].preset("small"), batch_size=4)
    step = build_step(StepRecipe("tft", cfg, seed=5), "cpu")
    windows = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    rows = np.random.default_rng(5).integers(0, len(windows), size=cfg.batch_size)  # as same_batches
    peer_tft.check_recipe_batch(step.batch, windows.get(rows))
    with pytest.raises(RuntimeError, match="differs"):
        peer_tft.check_recipe_batch(step.batch, MODELS["tft"].example_batch(cfg, seed=6))
    assert step.optimizer.param_groups[0]["lr"] == cfg.lr
    assert isinstance(step.step(), torch.Tensor)
