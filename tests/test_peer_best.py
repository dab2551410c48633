"""The peer benchmark's best row as wave 8.12 recommends it (benchmarks/peer/best.py,
benchmarks/peer/configuration.py): its CUDA graph and step options read from a recommendation or from
--best, bad ones refused, the row eager with a note on the CPU and graphed on a GPU, and the page
reading a graphed row (no activations measured).

The CUDA test is skipped without a GPU. The benchmark runs of such a best row (they need
pytorch-forecasting) are in tests/test_peer_benchmark.py, which `make peer-test` runs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is no package foxlib installs: import it from the repository
    sys.path.insert(0, str(ROOT))
from benchmarks.peer import best as best_row, configuration as conf  # noqa: E402
from foxlib.models import MODELS  # noqa: E402
from foxlib.harness.step_options import StepOptions  # noqa: E402
from foxlib.report import peer_figures as fig, peer_page  # noqa: E402
from tests.conftest import committed  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "peer-benchmark.json"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
TINY = {"batch_size": 4, "encoder_length": 10, "decoder_length": 2}
# what wave 8.12 is about to recommend: bf16, the memory-efficient path, one CUDA graph, fused Adam in backward
GRAPHED = {"strategy": "efficient + bf16 + CUDA graph + Adam in backward", "precision": "bf16",
           "tft_overrides": {"memory_efficient": True}, "cuda_graph": True,
           "options": {"adam": "fused", "optimizer_in_backward": True}, "cublas_workspace": ":16:8"}
FUSED_IN_BACKWARD = {"adam": "fused", "optimizer_in_backward": True, "tf32": False, "cudnn": True, "compile": False,
                     "cpp_wrapper": False}


def _recommend(tmp_path, rec) -> Path:
    wave = tmp_path / "cpu" / "wave-8.12"
    wave.mkdir(parents=True)
    (wave / "results.json").write_text(json.dumps({"measured_at_revision": "abc", "recommended": rec}))
    return wave / "results.json"


# ----------------------------------------------------------------------------- the configuration

def test_a_recommendations_cuda_graph_and_options_are_read(tmp_path):
    _recommend(tmp_path, GRAPHED)
    best = conf.best_configuration(None, "cpu", tmp_path)
    assert best["precision"] == "bf16" and best["tft_overrides"] == {"memory_efficient": True}
    assert best["cuda_graph"] is True and best["options"] == FUSED_IN_BACKWARD
    assert best["cublas_workspace"] == ":16:8" and len(best["depends_on"]) == 1
    assert "not applied" not in best["source"] and GRAPHED["strategy"] in best["source"]


def test_best_gives_the_cuda_graph_and_options_too(tmp_path):
    given = conf.best_configuration({"precision": "bf16", "memory_efficient": True, "cuda_graph": True,
                                     "options": {"tf32": True}}, "cpu", tmp_path)
    assert given["tft_overrides"] == {"memory_efficient": True} and given["cuda_graph"] is True
    assert given["options"] == {"adam": "default", "optimizer_in_backward": False, "tf32": True, "cudnn": True,
                                "compile": False, "cpp_wrapper": False}
    assert given["cublas_workspace"] is None and given["source"] == "--best option"
    plain = conf.best_configuration(None, "cpu", tmp_path)  # the built-in default: an eager, plain step
    assert plain["cuda_graph"] is False and plain["options"] == {"adam": "default", "optimizer_in_backward": False,
                                                                 "tf32": False, "cudnn": True, "compile": False,
                                                                 "cpp_wrapper": False}
    # the committed H200 recommendation reads as the file states it
    rec = committed("h200", "8.12", "results.json")["recommended"]
    published = conf.best_configuration(None, "h200", ROOT / "reports")
    assert published["cuda_graph"] is bool(rec.get("cuda_graph"))
    assert StepOptions.from_dict(published["options"]) == StepOptions.from_dict(rec.get("options"))
    assert published["cublas_workspace"] == rec.get("cublas_workspace")


@pytest.mark.parametrize("spec, match", [
    ({"options": {"fused": True}}, r"unknown step option\(s\) fused; valid: adam, optimizer_in_backward, tf32, cudnn, compile, cpp_wrapper$"),
    ({"options": {"adam": "sgd"}}, "unknown adam 'sgd'; valid: default, fused"),
    ({"options": {"tf32": 1}}, "tf32 must be true or false"),
    ({"options": ["adam"]}, "step options must be an object of"),
    ({"cuda_graph": "yes"}, "cuda_graph must be true or false"),
    ({"cublas_workspace": 16}, "CUBLAS_WORKSPACE_CONFIG value"),
    ({"precision": "fp16", "cuda_graph": True}, "GradScaler"),
    ({"precision": "fp16", "options": {"optimizer_in_backward": True}}, "Adam in backward"),
])
def test_bad_step_fields_are_refused_with_the_valid_ones(tmp_path, spec, match):
    with pytest.raises(SystemExit, match=match):
        conf.best_configuration({"precision": "bf16", **spec}, "cpu", tmp_path)


def test_a_recommendation_with_unknown_options_is_refused(tmp_path):
    _recommend(tmp_path, {**GRAPHED, "options": {"adam": "fused", "capturable": True}})
    with pytest.raises(SystemExit, match=r"recommended strategy.*unknown step option\(s\) capturable; valid: adam"):
        conf.best_configuration(None, "cpu", tmp_path)


def test_the_cublas_workspace_is_recorded_not_set():
    best = {"cublas_workspace": ":16:8"}
    unset = conf.workspace_note(best, {})
    assert "does not set it" in unset and "CUBLAS_WORKSPACE_CONFIG unset" in unset and ":16:8" in unset
    other = conf.workspace_note(best, {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    assert "does not set it" in other and "CUBLAS_WORKSPACE_CONFIG=:4096:8" in other
    assert "is applied" in conf.workspace_note(best, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"})
    assert conf.workspace_note({"cublas_workspace": None}, {}) is None


# ----------------------------------------------------------------------------- the row

def test_the_rows_label_and_notes_say_what_its_step_applies():
    best = {**GRAPHED, "options": FUSED_IN_BACKWARD, "source": "test"}
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert best_row.label(best, cuda) == "foxlib TFT, best (8.12), CUDA graph + fused Adam + Adam in backward"
    assert best_row.label(best, cpu) == "foxlib TFT, best (8.12), fused Adam + Adam in backward"
    assert best_row.label({"cuda_graph": False, "options": {}}, cuda) == fig.ROWS["foxlib_best"]
    assert best_row.graphed(best, cuda) and not best_row.graphed(best, cpu)
    on_cpu = " ".join(best_row.notes(best, cpu, {}))
    assert "needs a CUDA device: on the CPU its row runs eager steps" in on_cpu and "fused Adam" in on_cpu
    assert "CUBLAS_WORKSPACE_CONFIG=:16:8" in on_cpu
    on_gpu = " ".join(best_row.notes(best, cuda, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}))
    assert "one captured CUDA graph" in on_gpu and "is applied" in on_gpu
    cfg = MODELS["tft"].config("small", **TINY)
    rec = best_row.recipe(best, cfg, seed=3)
    assert rec.options.adam == "fused" and rec.options.optimizer_in_backward and rec.precision == "bf16"


def test_a_graphed_row_renders_without_activations():
    """A results file whose best row ran as one CUDA graph (profile_graphed_step: activations None)."""
    res = json.loads(FIXTURE.read_text())
    row = res["variants"]["foxlib_best"]
    row["memory"].update(activations=None, forward_peak=None, cuda_graph=True)
    row.update(label="foxlib TFT, best (8.12), CUDA graph + fused Adam", cuda_graph=True,
               options={"adam": "fused", "optimizer_in_backward": False, "tf32": False, "cudnn": True, "compile": False})
    res["best"].update(cuda_graph=True, options=row["options"])
    r = fig.ratios(res)
    assert "activations" not in r["foxlib_best"] and r["foxlib_best"]["peak"] == pytest.approx(0.45)
    assert "activations" in r["foxlib_default"]
    res["ratios"] = r
    res["checks"] = fig.checks(res)
    assert fig.text_table(res).count("foxlib TFT, best (8.12), CUDA graph + fused Adam") == 3  # row, two checks
    page = peer_page.render(res)
    assert "foxlib TFT, best (8.12), CUDA graph + fused Adam" in page
    assert "the whole step as one CUDA graph; step options: fused Adam" in page
    best_only = [c for c in peer_page.context(res)["memory"] if "CUDA graph" in c["label"]][0]
    assert best_only["cells"][3:5] == [fig.IN_GRAPH, fig.IN_GRAPH]  # activations, forward peak
    assert [r["activations (MB)"] for r in fig.table_rows(res) if "CUDA graph" in r["variant"]] == [fig.IN_GRAPH]


def test_a_plain_eager_step_with_the_default_options_says_nothing_of_them():
    res = json.loads(FIXTURE.read_text())
    res["best"].update(cuda_graph=False, options={})
    assert peer_page.best_step(res) == ""
    assert "Best configuration: " in peer_page.render(res)


def test_the_timed_graph_owns_its_cublas_workspace(monkeypatch):
    """The compiled reduce-overhead rows clear cuBLAS's workspaces when they record: the timed graph of the
    best row is captured with its workspace in its own pool (foxlib.memory.cuda_graph)."""
    asked = {}

    def fake_capture(rec, device, loss=None, own_cublas_workspace=False):
        asked["own"] = own_cublas_workspace
        raise RuntimeError("stop here")
    monkeypatch.setattr(best_row, "capture_step", fake_capture)
    with pytest.raises(RuntimeError, match="stop here"):
        best_row.live(None, torch.device("cuda"), None)
    assert asked == {"own": True}


# ----------------------------------------------------------------------------- the graphed step on a GPU

@pytest.mark.cuda
@needs_cuda
def test_the_best_rows_graphed_step_is_profiled_and_timed_on_a_gpu():
    """foxlib_best's step as the benchmark builds it on CUDA: profiled by profile_graphed_step, replayed for timing."""
    from foxlib.harness.timing import time_alternating
    dev = torch.device("cuda")
    best = {**GRAPHED, "options": FUSED_IN_BACKWARD, "source": "test"}
    cfg = MODELS["tft"].config("small", memory_efficient=True, **TINY)
    rec = best_row.recipe(best, cfg, seed=0)
    expected = MODELS["tft"].example_batch(cfg, seed=0)
    memory, model = best_row.profile(rec, dev, expected)
    n = sum(p.numel() for p in model.parameters())
    assert memory["cuda_graph"] and memory["activations"] is None and memory["n_parameters"] == n
    assert memory["peak"] >= memory["parameters"] + memory["optimizer_state"] > 0
    assert memory["workspace_bytes"] >= 0 and memory["gradients"] == 0  # Adam in backward freed them
    del model
    live = best_row.live(rec, dev, expected)
    timing = time_alternating({"foxlib_best": live["step"]}, repeats=3, warmup=1, device=dev)["foxlib_best"]
    assert timing.median_s > 0 and torch.isfinite(live["step"]())


def test_a_peak_under_the_rows_own_saved_tensors_is_not_shown():
    """A row whose one-step peak is under its saved tensors plus what lived before the step missed memory held
    outside the step (the H200's reduce-overhead row: 296.5 MB against 591.8 MB saved): its peak and ratio are
    not shown; a row whose figures add up keeps them."""
    from foxlib.report import peer_figures as fig
    seen = {"peak": 900e6, "activations": 600e6, "live_before_step": 220e6, "batch": 1e6}
    unseen = {**seen, "peak": 300e6}
    v = {"n_parameters": 10, "parameter_bytes": 40, "precision": "fp32", "timing": {"median_s": 0.1, "iqr_s": 0.01}}
    res = {"variants": {n: {**v, "label": fig.ROWS[n], "memory": mem} for n, mem in (
        ("peer", {"peak": 1000e6, "activations": 700e6}), ("foxlib_compiled_reduce_overhead", unseen),
        ("foxlib_compiled_default", seen))}}
    r = fig.ratios(res)
    assert "peak" not in r["foxlib_compiled_reduce_overhead"] and r["foxlib_compiled_default"]["peak"] == 0.9
    res["ratios"] = r
    rows = {row["variant"]: row for row in fig.table_rows(res)}
    row = rows[fig.ROWS["foxlib_compiled_reduce_overhead"]]
    assert row["peak (MB)"] == fig.POOL_UNSEEN and row["peak / peer's (ratio)"] == "n/a"
    assert rows[fig.ROWS["foxlib_compiled_default"]]["peak (MB)"] == "900.0"


def test_fast_path_targets_say_met_tie_or_how_far():
    """The best row's step time is read as its check reads it (fig.target_step): its independent runs pooled where
    two or more hold it, else its one run's paired interval; under MIN_RUNS runs, inconclusive."""
    from foxlib.report import peer_figures as fig

    def pooled(median, low, high, runs=3):
        return {"foxlib_best": {"runs": [[median, low, high]] * runs, "median": median, "low": low, "high": high,
                                "confidence": 0.95}}
    res = {"variants": {}, "ratios": {"foxlib_best": {"peak": 0.555, "step_time": 0.11}}, "timing_runs": {"runs": []},
           "pooled_step_time": pooled(0.11, 0.098, 0.121)}
    peak, step = fig.fast_path_lines(res)
    assert peak.endswith("peak ≤ 0.3x the peer's: 0.555x, not met (+0.255 over)")
    assert step.endswith("step time ≤ 0.1x the peer's: 0.110x [0.098, 0.121], a tie: the interval holds the target")
    res["ratios"]["foxlib_best"].update(peak=0.25)
    res["pooled_step_time"] = pooled(0.09, 0.08, 0.095)
    assert [line.rsplit(", ", 1)[1] for line in fig.fast_path_lines(res)] == ["met", "met"]
    assert fig.fast_path_lines({"variants": {}, "ratios": {}, "pooled_step_time": {}}) == []
    # the value shown is the pooled centre the check reads, not the ratio of medians beside it (CPU: 0.955, 0.943)
    res["ratios"]["foxlib_best"].update(step_time=0.955)
    res["pooled_step_time"] = pooled(0.943, 0.858, 1.002)
    assert fig.fast_path_lines(res)[1].endswith("0.943x [0.858, 1.002], not met (+0.843 over)")
    # no independent run: the all-rows run's paired interval, inconclusive however far it is from the target
    res["pooled_step_time"] = {"foxlib_best": {"runs": []}}
    res["ratios"]["foxlib_best"]["step_time_interval"] = {"median": 0.05, "low": 0.04, "high": 0.06,
                                                          "confidence": 0.95}
    assert fig.fast_path_lines(res)[1].endswith(
        "0.050x [0.040, 0.060], inconclusive: 0 of the 3 independent runs a verdict needs")
