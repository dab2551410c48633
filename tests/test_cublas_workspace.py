"""The cuBLAS workspace knob (foxlib/waves/wave_8_12/workspace.py): hand-made fresh-process results typed,
the advice the recommendation carries, the table, the 8.13 side (foxlib.memory.cuda.use_cublas_workspace,
resolve_tft, the pinned configuration), and on a GPU the knob measured for real."""
import json
import os

import pytest
import torch

from foxlib.core.budgets import load_budgets
from foxlib.core.config import MB
from foxlib.harness.fresh_process import FailedRun
from foxlib.harness.step_options import StepOptions
from foxlib.memory import cuda as cuda_mem
from foxlib.waves.wave_8_12 import analysis, records, strategies, tables, workspace
from foxlib.waves.wave_8_13 import deployment
from foxlib.waves.wave_8_13.records import TftRun
from foxlib.waves.wave_8_13.tft import resolve_tft
from tests.conftest import fresh_process_output, hand_8_12_measurement, step_profile, typed_8_12 as typed

NAME = "light and fast"


def _child(step_s: float, peak_mb: float, workspace_mb: float, profile: bool) -> dict:
    prof = step_profile(peak=peak_mb * MB, workspace_bytes=workspace_mb * MB).to_dict() if profile else None
    return fresh_process_output({NAME: [step_s] * 3}, {NAME: prof})


def _knob(small_steps=(0.010, 0.0101, 0.010), default_steps=(0.010, 0.010, 0.010)):
    return {"setting": ":16:8", "strategies": [NAME], "rounds": 3, "steps": 3,
            "runs": {"default": [_child(s, 500, 70, i == 0) for i, s in enumerate(default_steps)],
                     "small": [_child(s, 500, 0.5, i == 0) for i, s in enumerate(small_steps)]}}


def _measurement(knob):
    m = hand_8_12_measurement([(strategies.BASELINE, "fp32", 1200, 1.0, 1.00, True),
                               (NAME, "fp32", 600, 0.5, 1.00, False)])
    return records.Measurement.from_dict({**m.to_dict(), "cublas_workspace": knob})


def test_knob_results_are_typed_from_the_processes_output_and_survive_a_round_trip():
    [k] = typed(_measurement(_knob())).workspace_knob
    assert k.allocator_peak_bytes == 570 * MB and k.small_allocator_peak_bytes == 500.5 * MB
    assert k.saved_bytes == 69.5 * MB
    assert k.step_s == (0.010, 0.010, 0.010) and k.ratio.median == pytest.approx(1.0)
    assert k.ratio.high == pytest.approx(1.01) and not k.shown_slower  # an interval reaching 1: a tie
    again = records.Measurement812.from_dict(json.loads(json.dumps(typed(_measurement(_knob())).to_dict())))
    assert again.workspace_knob == (k,)


def test_the_recommendation_carries_the_small_workspace_only_when_it_saves_memory_and_is_not_slower():
    rec = analysis.recommend(typed(_measurement(_knob())), load_budgets())
    assert rec["strategy"] == NAME and rec["cublas_workspace"] == ":16:8"
    assert rec["allocator_peak_bytes_small_workspace"] == 500.5 * MB
    assert "570.0 to 500.5 MB" in rec["cublas_workspace_note"]
    assert "CUBLAS_WORKSPACE_CONFIG=:16:8" in tables.recommendation_text(rec)
    slower = analysis.recommend(typed(_measurement(_knob(small_steps=(0.013, 0.012, 0.013)))), load_budgets())
    assert slower["cublas_workspace"] is None and "slower" in slower["cublas_workspace_note"]
    barely = _measurement(_knob(small_steps=(0.01003, 0.01002, 0.01003)))  # 0.3 % slower, every round: shown,
    [k] = typed(barely).workspace_knob  # and within the 2 % margin
    assert k.shown_slower and not k.costs_time
    assert analysis.recommend(typed(barely), load_budgets())["cublas_workspace"] == ":16:8"
    assert tables.workspace_table(typed(barely)).loc[0, "reads as"] == "within 2 %"
    none = analysis.recommend(typed(_measurement({"skipped_all": workspace.SKIPPED_CPU})), load_budgets())
    assert none["cublas_workspace"] is None and "not measured" in none["cublas_workspace_note"]
    table = tables.workspace_table(typed(_measurement(_knob()))).set_index("strategy")
    assert table.loc[NAME, "saved (MB)"] == 69.5 and table.loc[NAME, "reads as"] == "a tie"


def test_a_failed_or_skipped_knob_gives_no_results_and_says_why():
    failed = _knob()
    failed["runs"]["small"][1] = {"error": "exit 1: CUDA error", "env": {}}
    assert typed(_measurement(failed)).workspace_knob == ()
    assert typed(_measurement(failed)).knob_absent.startswith("a process at the small workspace failed: exit 1")
    assert typed(_measurement({"skipped_all": workspace.SKIPPED_CPU})).workspace_knob == ()
    assert typed(_measurement({"skipped_all": workspace.SKIPPED_CPU})).knob_absent == workspace.SKIPPED_CPU
    assert workspace.measure_knob([], {}, "seed", torch.device("cpu"), 0) == {"skipped_all": workspace.SKIPPED_CPU}
    assert workspace.knob_runs(_knob()).absent_reason is None
    assert workspace.knob_runs(failed).to_dict() == failed  # written back as measured
    assert isinstance(workspace.knob_runs(failed).runs["small"][1], FailedRun)
    with pytest.raises(TypeError, match="cublas_workspace_config"):  # a process's output missing a key
        workspace.knob_runs({**failed, "runs": {"default": [{"variants": {}, "env": {}}], "small": []}})
    assert _measurement(failed).to_dict()["cublas_workspace"] == failed


def test_use_cublas_workspace_checks_the_setting():
    for bad in ("16:8", ":16", "", ":a:8"):
        with pytest.raises(ValueError, match="':16:8'"):
            cuda_mem.use_cublas_workspace(bad, torch.device("cuda"))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_use_cublas_workspace_measures_the_workspace_a_new_stream_takes():
    """In a fresh process with CUDA started, the small size holds: the new stream's workspace is the
    131,072 B asked (H200, c10739d). There a product run first did not stop it either (torch 2.11 reads
    the size again for a new stream), so the function measures rather than assumes."""
    import subprocess
    import sys
    code = ("import json, torch; from foxlib.memory.cuda import use_cublas_workspace as u; "
            "torch.cuda.init(); print(json.dumps(u(':16:8', torch.device('cuda'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"})
    fresh = json.loads(out.stdout.splitlines()[-1])
    assert fresh["applied"] and fresh["asked_bytes"] == 16 * 1024 * 8
    assert 0 < fresh["workspace_bytes"] <= 2 * fresh["asked_bytes"]


def test_wave_8_13_takes_the_workspace_with_the_configuration_and_pins_it(tmp_path):
    res = {"recommended": {"strategy": "s", "precision": "bf16", "tft_overrides": {"memory_efficient": True},
                           "cuda_graph": True, "options": {"adam": "fused"}, "cublas_workspace": ":16:8"}}
    (tmp_path / "cpu" / "wave-8.12").mkdir(parents=True)
    (tmp_path / "cpu" / "wave-8.12" / "results.json").write_text(json.dumps(res))
    tft = resolve_tft("auto", "small", "cpu", tmp_path)
    assert tft.run.cublas_workspace == ":16:8" and tft.run.cuda_graph and tft.run.options.adam == "fused"
    flat = resolve_tft('{"precision": "bf16", "cublas_workspace": ":16:8"}', "small", "cpu", tmp_path)
    assert flat.run.cublas_workspace == ":16:8" and flat.run.overrides == {}
    with pytest.raises(ValueError, match="cublas_workspace must be a string"):
        resolve_tft('{"cublas_workspace": 16}', "small", "cpu", tmp_path)
    class R:  # what deployment.pinned_tft_config reads of the measurement
        tft = TftRun("bf16", {"memory_efficient": True}, "8.12", True, cuda_graph=True,
                     options=StepOptions(adam="fused"), cublas_workspace=":16:8")
    pinned = json.loads(deployment.pinned_tft_config(R))
    assert pinned == {"precision": "bf16", "memory_efficient": True, "cuda_graph": True,
                      "options": StepOptions(adam="fused").to_dict(), "cublas_workspace": ":16:8"}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_the_knob_measured_in_fresh_processes_lowers_the_allocator_peak_not_the_model_peak():
    from foxlib.models import MODELS
    s = strategies.STRATEGIES["efficient + bf16 + CUDA graph + fused Adam"]
    cfg = strategies.configure(MODELS["tft"].preset("small"), s.overrides)
    knob = workspace.measure_knob([s], {s.name: cfg}, "small", torch.device("cuda"), 0, rounds=2, steps=3)
    [k] = workspace.knob_results(workspace.knob_runs(knob))
    assert k.small_allocator_peak_bytes < k.allocator_peak_bytes
    assert abs(k.small_model_peak_bytes - k.model_peak_bytes) <= 0.01 * k.model_peak_bytes
