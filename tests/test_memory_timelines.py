"""Live-memory timelines: the typed series (foxlib.memory.live_series), its chart and its measurement."""
import json
import os
import pickle

import pytest
import torch

from foxlib.memory.live_series import (CPU_EVENTS_FORMAT, MARK_FORWARD_END, NO_STACKS_OWNER, MemoryTimeline,
                                       downsample, from_cpu_events, from_cuda_snapshot, load, round_size)
from foxlib.memory.timeline_chart import timeline_chart
from foxlib.harness.timelines import (ALL_CASES, CASES, GRAPH_NEEDS_CUDA, TimelineCase, TimelineRun,
                                           keep_beside, measure_timelines, own_timelines, viewer_html_file)
from foxlib.models import MODELS
from tests.conftest import committed, committed_path

H200 = str(committed_path("h200", "8.10").parent)
MiB = 1 << 20


def phase_peak_bytes(s: MemoryTimeline, name: str) -> int:
    """The largest live bytes within one phase of a series."""
    ph = next(p for p in s.phases if p.name == name)
    return max(b for x, b in zip(s.x_ms, s.live_bytes) if ph.start_ms <= x <= ph.end_ms)


def _cpu_record():
    """A step whose peak and phases are known: 100 B live at the start; forward allocates 50 (linear)
    and 30 (dropout); backward allocates 200 (MmBackward0) then frees the 30; the optimizer 20."""
    ev = "autograd::engine::evaluate_function: MmBackward0"
    return {"format": CPU_EVENTS_FORMAT, "live_at_start_bytes": 100,
            "allocations": [[1000, 50, 1, ["aten::addmm", "aten::linear"]],
                            [2000, 30, 2, ["aten::empty_like", "aten::dropout"]],
                            [4000, 200, 3, ["aten::mm", "MmBackward0", ev]],
                            [5000, -30, 2, [ev]],
                            [5500, -200, 3, [ev]],
                            [7000, 20, 4, ["aten::add", "Optimizer.step#Adam.step"]]],
            "ranges": [["Optimizer.zero_grad#Adam.zero_grad", 0, 500], [MARK_FORWARD_END, 3000, 3001],
                       ["Optimizer.step#Adam.step", 6000, 8000]]}


def test_hand_made_series_peak_phases_and_owners():
    s = from_cpu_events(_cpu_record(), label="hand")
    assert s.start_bytes == 100
    assert s.peak_bytes == 100 + 50 + 30 + 200
    assert s.peak_ms == pytest.approx(0.004) and s.peak_phase == "backward"
    assert [p.name for p in s.phases] == ["forward", "backward", "optimizer step"]
    assert [(p.start_ms, p.end_ms) for p in s.phases] == [(0.0, 0.003), (0.003, 0.006), (0.006, 0.008)]
    assert s.forward_end_bytes == 180
    assert phase_peak_bytes(s, "forward") == 180 and phase_peak_bytes(s, "optimizer step") == 170
    assert [(o.name, o.bytes, o.phase) for o in s.owners] == [
        ("backward MmBackward0 (aten::mm)", 200, "backward"), ("aten::addmm in aten::linear", 50, "forward"),
        ("aten::dropout", 30, "forward")]
    assert s.live_bytes[-1] == 170 and s.events == 6
    assert MemoryTimeline.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_downsample_keeps_the_peak_exactly_and_the_size_small():
    n = 100_000
    y = [(i * 7919) % 1000 for i in range(n)]
    y[61_234] = 5_000
    xs, ys = downsample([float(i) for i in range(n)], y, 400)
    assert len(ys) <= 402 and max(ys) == 5_000 and xs[ys.index(5_000)] == 61_234.0
    assert xs == sorted(xs) and xs[0] == 0.0 and xs[-1] == n - 1
    with pytest.raises(ValueError, match="at least 4"):
        downsample([0.0], [0], 2)


def test_cuda_replay_counts_blocks_not_requests():
    """One 4 MiB large-pool segment: a 3.5 MiB request takes the whole block (0.5 MiB would remain, not
    more than 1 MiB), a 100 B request a 512 B block; the peak is the blocks' sum, as memory_allocated."""
    seg = 10 * MiB
    trace = [{"action": "segment_alloc", "addr": seg, "size": 4 * MiB, "time_us": 10, "frames": []},
             {"action": "alloc", "addr": seg, "size": 3 * MiB + MiB // 2, "time_us": 10,
              "frames": [{"name": "forward", "filename": "/x/mymodel.py", "line": 3},
                         {"name": "loss", "filename": "/x/mymodel.py", "line": 9}]},
             {"action": "alloc", "addr": 512, "size": 100, "time_us": 20, "frames": []},
             {"action": "free_requested", "addr": seg, "size": 3 * MiB + MiB // 2, "time_us": 30, "frames": []},
             {"action": "free_completed", "addr": seg, "size": 3 * MiB + MiB // 2, "time_us": 30, "frames": []}]
    snapshot = {"segments": [
        {"device": 0, "address": 0, "total_size": 2 * MiB,
         "blocks": [{"size": 512, "requested_size": 500, "state": "active_allocated"},
                    {"size": 512, "requested_size": 100, "state": "active_allocated"},
                    {"size": 2 * MiB - 1024, "requested_size": 0, "state": "inactive"}]},
        {"device": 0, "address": seg, "total_size": 4 * MiB,
         "blocks": [{"size": 4 * MiB, "requested_size": 0, "state": "inactive"}]}],
        "device_traces": [trace], "allocator_settings": {},
        "external_annotations": [{"stage": "START", "name": MARK_FORWARD_END, "device": 0, "time_us": 15},
                                 {"stage": "END", "name": MARK_FORWARD_END, "device": 0, "time_us": 15},
                                 {"stage": "START", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": 25},
                                 {"stage": "END", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": 40}]}
    s = from_cuda_snapshot(snapshot, label="synthetic")
    assert s.start_bytes == 512  # the block at address 0, allocated before the trace
    assert s.peak_bytes == 512 + 4 * MiB + 512
    assert s.reconstruction_error_bytes == 0 and s.phase_source == "annotations"
    assert s.owners[0].name == "mymodel.py:3 forward" and s.owners[0].bytes == 4 * MiB
    assert round_size(1) == 512 and round_size(513) == 1024
    # less bytes the step does not own: every point, the start, the peak and the forward's end move down
    own = s.without(512)
    assert own.peak_bytes == s.peak_bytes - 512 and own.start_bytes == 0 and own.live_bytes[0] == s.live_bytes[0] - 512
    assert own.forward_end_bytes == s.forward_end_bytes - 512 and own.owners == s.owners
    with pytest.raises(ValueError, match="outside_bytes"):
        s.without(1024)  # more than was live at the start
    runs = {"eager": TimelineRun("eager", {}, s, None, profile_peak_bytes=s.peak_bytes - 512, activations_bytes=1,
                                 outside_bytes=512),
            "cpu": TimelineRun("cpu", {}, s, None, profile_peak_bytes=s.peak_bytes, activations_bytes=1),
            "skipped": TimelineRun("skipped", {}, None, None, skipped="failed")}
    drawn = own_timelines(runs)
    assert drawn["eager"].peak_bytes == runs["eager"].profile_peak_bytes
    assert drawn["cpu"].peak_bytes == s.peak_bytes and drawn["skipped"] is None
    from foxlib.waves.wave_8_12.tables import timeline_lines
    links = {n: {"snapshot": "t.pickle" if n == "eager" else None, "viewer_html": None} for n in runs}
    lines = timeline_lines(runs, drawn, links)
    assert lines[0] == (f"- eager: model peak {(s.peak_bytes - 512) / 1e6:,.1f} MB in {s.peak_phase} (its own tensors; "
                        "0.0 MB of them live when the step began); the process held 0.0 MB besides (workspaces, "
                        "earlier measurements) · [snapshot](t.pickle)")
    assert lines[1] == (f"- cpu: model peak {s.peak_bytes / 1e6:,.1f} MB in {s.peak_phase} (its own tensors; "
                        f"{s.start_bytes / 1e6:,.1f} MB of them live when the step began)")  # nothing held besides
    assert lines[2] == "- skipped: not recorded (failed)"
    # the same history recorded without stacks: same bytes, and no owner guessed from missing frames
    for e in trace:
        e["frames"] = []
    bare = from_cuda_snapshot(snapshot, label="no stacks")
    assert bare.peak_bytes == s.peak_bytes
    assert {o.name for o in bare.owners} == {NO_STACKS_OWNER}


def test_committed_h200_snapshot_peak_is_the_allocators_peak():
    """The replay of the committed H200 snapshot (seed TFT, fp32) reproduces what profile_step measured
    on that step: bytes at its start, its forward's peak and its peak (max_memory_allocated)."""
    profile = committed("h200", "8.10")["tft"]["profile"]
    s = load(os.path.join(H200, "memory_snapshot.pickle"), label="seed fp32")
    assert s.device == "cuda" and s.reconstruction_error_bytes == 0
    assert s.start_bytes == profile["cuda"]["allocated_at_step_start_bytes"]
    assert s.peak_bytes == profile["cuda"]["allocated_peak_bytes"] == profile["peak"] + profile["workspace_bytes"]
    assert phase_peak_bytes(s, "forward") == profile["forward_peak"] + profile["workspace_bytes"]
    assert [p.name for p in s.phases] == ["forward", "backward", "optimizer step"]
    assert s.phases[0].end_ms < s.peak_ms < s.phases[1].end_ms and s.peak_phase == "backward"
    assert s.owner is not None and s.owner.name and s.owner.bytes > 0
    assert any("tft.py" in o.name for o in s.owners)  # the forward's saved tensors, named by the model's code
    assert len(s.x_ms) <= 4002 and s.events > len(s.x_ms)


def test_viewer_html_embeds_the_snapshot(tmp_path):
    out = viewer_html_file(os.path.join(H200, "memory_snapshot.pickle"), str(tmp_path / "viewer.html"))
    text = open(out).read()
    assert "MemoryViz.js" in text and '"snapshot.pickle"' in text and len(text) > 500_000


def test_keep_beside_copies_a_snapshot_found_by_name_and_writes_its_viewer(tmp_path):
    """As for a measurement made on the GPU machine: the path it names does not exist here; the file
    lies beside the measurement JSON."""
    s = load(os.path.join(H200, "memory_snapshot.pickle"), label="plain", max_points=100)
    run = TimelineRun("plain", {}, s, "/root/out/memory_snapshot.pickle")
    links = keep_beside({"plain": run}, str(tmp_path / "report"), search_dirs=[H200])
    assert links == {"plain": {"snapshot": "memory_snapshot.pickle", "viewer_html": "memory_snapshot.html"}}
    assert (tmp_path / "report" / "memory_snapshot.html").stat().st_size > 500_000
    missing = keep_beside({"x": TimelineRun("x", {}, None, "/nowhere/x.pickle")}, str(tmp_path / "r2"))
    assert missing == {"x": {"snapshot": None, "viewer_html": None}}


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory):
    cfg = MODELS["tft"].config("small")
    cases = [CASES[0], TimelineCase("checkpoint all", {"checkpointing": "all"}), CASES[-1]]
    return measure_timelines(cfg, "cpu", str(tmp_path_factory.mktemp("timelines")), cases)


def test_cpu_path_peak_is_profile_steps_peak(small_runs):
    plain, ckpt, graphed = small_runs["plain"], small_runs["checkpoint all"], small_runs["CUDA graph"]
    for run in (plain, ckpt):
        s = run.series
        assert s.device == "cpu" and s.peak_bytes == run.profile_peak_bytes
        assert [p.name for p in s.phases] == ["forward", "backward", "optimizer step"]
        assert all(a.end_ms <= b.start_ms + 1e-9 for a, b in zip(s.phases, s.phases[1:]))
        assert s.phases[0].start_ms <= s.peak_ms <= s.phases[-1].end_ms
        assert run.snapshot_path.endswith(".json") and os.path.exists(run.snapshot_path)
        assert run.viewer_html_path is None  # PyTorch's viewer is for CUDA snapshots
    # checkpointing everything: the forward leaves less for backward, and the peak moves into backward
    assert (ckpt.series.forward_end_bytes - ckpt.series.start_bytes
            < (plain.series.forward_end_bytes - plain.series.start_bytes) / 2)
    assert ckpt.series.peak_phase == "backward"
    assert any(o.name.startswith("recompute: ") and o.phase == "backward" for o in ckpt.series.owners)
    assert not any(o.name.startswith("recompute") for o in plain.series.owners)
    assert graphed.series is None and graphed.skipped == GRAPH_NEEDS_CUDA
    again = type(plain).from_dict(json.loads(json.dumps(plain.to_dict())))
    assert again.series == plain.series


def test_chart_has_alt_text_caption_and_a_legend_for_every_mark(small_runs):
    series = [r.series for r in small_runs.values() if r.series is not None]
    import matplotlib.pyplot as plt
    tf = timeline_chart(series, "TFT small, CPU", budget_bytes=2 * 10**6)
    labels = [t.get_text() for t in tf.figure.legends[0].get_texts()]
    for mark in ("live tensor bytes", "live when the step began", "forward's end", "peak", "forward phase",
                 "backward phase", "optimizer step phase", "peak budget 2.0 MB"):
        assert any(mark in label for label in labels), (mark, labels)
    for s in series:
        assert s.label in tf.alt_text and f"{s.peak_bytes / 1e6:,.1f} MB" in tf.alt_text
    assert "over it:" in tf.alt_text and "MB = 10^6 bytes" in tf.caption
    assert tf.figure.axes[0].get_ylabel() == "live tensor memory (MB = 10^6 bytes)"
    assert all(ax.get_xscale() == "linear" and ax.get_yscale() == "linear" for ax in tf.figure.axes)
    assert tf.alt_text.startswith("TFT small, CPU.")
    plt.close(tf.figure)
    with pytest.raises(ValueError, match="at least one"):
        timeline_chart([], "nothing")


def test_measure_refuses_two_cases_of_one_name(tmp_path):
    assert len({c.name for c in ALL_CASES}) == len(ALL_CASES) == 6
    with pytest.raises(ValueError, match="case names must differ"):
        measure_timelines(MODELS["tft"].config("small"), "cpu", str(tmp_path), [CASES[0], CASES[0]])


def test_load_refuses_what_it_cannot_read(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a CPU allocation record"):
        load(str(p))
    q = tmp_path / "empty.pickle"
    q.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}))
    with pytest.raises(ValueError, match="_record_memory_history"):
        load(str(q))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_cuda_timelines_match_the_allocator(tmp_path):
    runs = measure_timelines(MODELS["tft"].config("small"), "cuda", str(tmp_path), ALL_CASES)
    failed = {name: run.skipped for name, run in runs.items() if run.series is None}
    # a case whose recording fails (after every stack setting) is named with its error; the step's
    # plain, memory-efficient and fully checkpointed cases must draw
    assert all(why.startswith("failed: stacks=python: ") for why in failed.values()), failed
    assert not {"plain", "memory-efficient path", "checkpoint all"} & set(failed), failed
    for run in (r for r in runs.values() if r.series is not None):
        s = run.series
        # the series counts what the process held before the step (earlier tests' leftovers, workspaces)
        assert s.peak_bytes == run.profile_peak_bytes + run.outside_bytes and s.reconstruction_error_bytes == 0
        if run.stacks != "none":  # a history without stacks may lack the record_function marks
            assert s.phase_source == "annotations"
            assert [p.name for p in s.phases] == ["forward", "backward", "optimizer step"]
        assert os.path.getsize(run.viewer_html_path) > 0
    # the recompute runs the checkpointed Python function on the autograd engine's thread: its stack names it
    assert any(o.name.startswith("recompute in backward: ") for o in runs["checkpoint all"].series.owners)
