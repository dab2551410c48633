"""Wave 8.13's memory cap: running out of memory is a failed check with the numbers up to that point,
never a crash. On the CPU through the accounting path (nothing can be capped there); on a GPU a real
out-of-memory error under a tiny allocator cap."""
import math
import time

import pytest
import torch

from foxlib.core.budgets import load_budgets, verdict
from foxlib.core.config import MB
from foxlib.models import ENSEMBLE
from foxlib.waves.wave_8_13 import analysis, cap, measuring, members, nvml, records, tables
from foxlib.waves.wave_8_13.cap import NOT_ENFORCED, account_training
from tests.conftest import committed

TINY = {"preset": "small", "steps": 2, "inference_repeats": 2, "tft_config": '{"precision": "fp32"}'}


CAP = 5_000_000  # bytes: a few of the small ensemble's steps fit, Mamba-2's does not (it needs ~14 MB)


def _measure(**params):
    """measurement.json's data of a tiny run (measuring.measure's record, as written)."""
    return measuring.measure(**TINY, **params).to_dict()


def _typed(m):
    return records.Measurement.from_dict(m)


@pytest.fixture(scope="module")
def capped():
    """The small ensemble under a 5 MB allocator cap (cap_bytes), on the CPU: the accounting path."""
    return _measure(device="cpu", cap_bytes=CAP)


def _schedule(m):
    return [(name, s) for s in range(1, m["steps"] + 1) for name in m["order"]]


def _train_check(m):
    return next(c for c in analysis.checks(_typed(m), load_budgets()) if c.name == analysis.TRAIN_CHECK)


@pytest.mark.slow
def test_a_tiny_cap_on_the_cpu_is_a_failed_check_with_the_numbers_so_far(capped):
    m, t = capped, capped["training"]
    cap = m["cap"]
    assert cap["cap_bytes"] == cap["limit_bytes"] == CAP and cap["card_bytes"] == 4 * 2**30
    assert cap["enforced"] is False and cap["override"] is True and cap["context_bytes"] == 0
    oom = t["oom"]
    assert oom is not None and oom["enforced"] is False and oom["phase"] in ("setup", "training")
    assert oom["needed_bytes"] > CAP
    # the numbers up to that point: every step before the failing one ran, for real, within the cap
    done = [(s["model"], s["step"]) for s in t["steps"]]
    assert done == _schedule(m)[:len(done)]
    if oom["phase"] == "training":
        assert _schedule(m)[len(done)] == (oom["model"], oom["step"])
        assert t["setup"]["bytes"] <= t["peak_bytes"] <= CAP
    assert all(s["peak_bytes"] <= CAP and math.isfinite(s["loss"]) and s["seconds"] > 0 for s in t["steps"])
    # the same walk, redone from the same step measurements, stops at the same place
    plan = account_training(m["step_profiles"], m["order"], m["steps"], CAP)
    assert plan["oom"] == oom and [{k: s[k] for k in ("model", "step", "start_bytes", "peak_bytes")}
                                   for s in t["steps"]] == plan["steps"]
    check = _train_check(m)
    assert not check.passed and check.unit == "bytes"
    assert check.measured == max(t["peak_bytes"], oom["needed_bytes"]) == oom["needed_bytes"] > check.limit == CAP
    assert NOT_ENFORCED in check.note and "OUT OF MEMORY" in check.note and "cap_bytes" in check.note
    assert verdict(analysis.checks(_typed(m), load_budgets())) == "NO-GO"
    assert m["inference"]["oom"] is None or m["inference"]["oom"]["needed_bytes"] > CAP


@pytest.mark.slow
def test_a_tiny_card_fails_at_loading_or_at_the_first_step(capped):
    """card_gb=0.001 (1.07 MB): what measure(card_gb=0.001) would find, from the same step measurements."""
    card = round(0.001 * 2**30)
    plan = account_training(capped["step_profiles"], capped["order"], capped["steps"], card)
    assert plan["oom"] is not None and plan["oom"]["needed_bytes"] > card
    assert len(plan["steps"]) <= len(capped["order"])  # not even one round fits
    assert NOT_ENFORCED in plan["oom"]["error"]


@pytest.mark.slow
def test_the_accounting_walk_is_each_step_peak_plus_what_the_others_keep(capped):
    profiles, order = capped["step_profiles"], capped["order"]
    full = account_training(profiles, order, 2, cap=10**15)
    assert full["oom"] is None and len(full["steps"]) == 2 * len(order)
    kept = {n: profiles[n]["live_before_step"] for n in order}  # weights, batch, Adam state
    for ev in full["steps"][len(order):]:  # second round: every model has stepped
        others = sum(v for n, v in kept.items() if n != ev["model"])
        assert ev["peak_bytes"] == profiles[ev["model"]]["peak"] + others
        assert ev["start_bytes"] == sum(kept.values())
    assert full["setup_bytes"] == sum(kept[n] - profiles[n]["optimizer_state"] for n in order)
    # the walk stops at the first point over the cap, whatever the cap
    first = account_training(profiles, order, 2, cap=1)["oom"]
    assert first["phase"] == "setup" and first["model"] == order[0]
    assert first["needed_bytes"] == kept[order[0]] - profiles[order[0]]["optimizer_state"]
    top = max(ev["peak_bytes"] for ev in full["steps"])
    k = next(j for j, ev in enumerate(full["steps"]) if ev["peak_bytes"] == top)
    plan = account_training(profiles, order, 2, top - 1)
    assert plan["steps"] == full["steps"][:k] and plan["oom"]["needed_bytes"] == top
    assert (plan["oom"]["model"], plan["oom"]["step"]) == (full["steps"][k]["model"], full["steps"][k]["step"])


def test_the_size_of_the_failed_allocation_is_read_from_the_error():
    msg = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 139.81 GiB of which "
           "130.2 GiB is free. Of the allocated memory 3.1 GiB is allocated by PyTorch")
    assert cap.requested_bytes(msg) == 20 * 2**20
    assert cap.requested_bytes("Tried to allocate 512 bytes") == 512
    assert cap.requested_bytes("something else") is None


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_a_tiny_cap_on_a_gpu_is_a_real_out_of_memory_error_reported_as_a_failed_check():
    m = _measure(device="cuda", cap_bytes=1)
    cap, t = m["cap"], m["training"]
    assert cap["enforced"] is True and cap["cap_bytes"] == 1 and cap["context_bytes"] > 0
    assert t["oom"] is not None and t["oom"]["enforced"] is True and t["oom"]["phase"] in ("setup", "training")
    assert "out of memory" in t["oom"]["error"].lower()
    check = _train_check(m)
    assert not check.passed and "OUT OF MEMORY" in check.note
    print(f"\nOOM {records.Oom.from_dict(t['oom']).where}: {t['oom']['error'][:200]}")
    # the cap is lifted again: a 256 MB tensor fits
    x = torch.empty(256 * MB, dtype=torch.uint8, device="cuda")
    del x
    torch.cuda.empty_cache()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_the_small_ensemble_trains_and_serves_under_a_real_4_gb_cap():
    m = _measure(device="cuda", card_gb=4.0)
    cap, t, i = m["cap"], m["training"], m["inference"]
    ctx = cap["context_bytes"]
    assert cap["cap_bytes"] == 4 * 2**30 - ctx and cap["limit_bytes"] == 4 * 2**30
    assert cap["fraction"] == pytest.approx(cap["cap_bytes"] / cap["device_total_bytes"])
    assert t["oom"] is None and i["oom"] is None and len(t["steps"]) == 2 * len(m["order"])
    assert all(s["peak_bytes"] <= s["reserved_peak_bytes"] <= cap["cap_bytes"] for s in t["steps"])
    assert i["mode"] == "streams" and all(v["together"]["n"] == 2 for v in i["models"].values())
    checks = analysis.checks(_typed(m), load_budgets())
    assert all(c.passed for c in checks), [c.note for c in checks]


# ----------------------------------------------------------------------------- the honest cap: pure parts

import threading  # noqa: E402

GIB = 2**30
H200 = 150_109_880_320


def test_the_cap_is_the_card_less_the_context():
    a = cap.cap_arithmetic(4 * GIB, 872_415_232, H200)
    assert a["cap_bytes"] == 4 * GIB - 872_415_232 and a["limit_bytes"] == 4 * GIB and a["override"] is False
    assert a["fraction"] == (4 * GIB - 872_415_232) / H200
    assert a["cap_bytes"] + a["context_bytes"] == a["card_bytes"]
    forced = cap.cap_arithmetic(4 * GIB, 600, H200, cap_override=1000)  # cap_bytes: the limit is cap + context
    assert forced["cap_bytes"] == 1000 and forced["limit_bytes"] == 1600 and forced["override"] is True
    assert cap.cap_arithmetic(100, 500, H200)["cap_bytes"] == 0  # a context larger than the card leaves nothing
    small = cap.cap_arithmetic(4 * GIB, 300 * 2**20, 2 * GIB)  # a card_gb above what the device has: the device
    assert small["card_bytes"] == small["limit_bytes"] == 2 * GIB and small["cap_bytes"] == 2 * GIB - 300 * 2**20
    assert small["fraction"] == small["cap_bytes"] / (2 * GIB)
    with pytest.raises(ValueError, match="card and device memory must be positive"):
        cap.cap_arithmetic(0, 1, H200)


def test_the_nvml_check_takes_the_largest_sample():
    card = 4 * GIB
    ok = nvml.nvml_peak([1_000, None, 3_000, 2_000], card)
    assert ok.applicable and ok.max_bytes == 3_000 and ok.passed is True and ok.headroom_bytes == card - 3_000
    assert ok.n_samples == 4 and ok.n_missing == 1 and "1 of 4 samples had no figure" in ok.note
    over = nvml.nvml_peak([card - 1, card + 1, card], card)
    assert over.passed is False and over.max_bytes == card + 1 and over.headroom_bytes == -1
    assert nvml.nvml_peak([card], card).passed is True  # at most the card passes
    blind = nvml.nvml_peak([None, None], card, "this process (pid 7) is not in NVML's process list")
    assert not blind.applicable and blind.passed is None and blind.max_bytes is None and "pid 7" in blind.note
    assert nvml.nvml_peak([], card).note == "no samples were taken"


class _FakeNvml:
    """A reader giving a fixed series (bytes; None = NVML does not list the process), the last value repeated."""

    def __init__(self, series, fail_at=None):
        self.series, self.calls, self.fail_at = list(series), 0, fail_at
        self.threads = set()

    def __call__(self):
        self.threads.add(threading.current_thread().name)
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return self.series[min(self.calls, len(self.series)) - 1]


def test_the_sampler_reads_in_the_background_and_on_demand_and_stops_cleanly():
    reader = _FakeNvml([100, 200, 900, 300])
    sampler = nvml.Sampler(reader, interval_s=0.001)
    with sampler:
        sampler.phase = "training"
        deadline = time.monotonic() + 5
        while reader.calls < 6 and time.monotonic() < deadline:  # the thread samples without being asked
            time.sleep(0.001)
        assert sampler.sample() is not None
        sampler.phase = "inference"
        sampler.sample()
    assert not sampler._thread.is_alive()  # stopped and joined
    n = len(sampler.samples)
    time.sleep(0.01)
    assert len(sampler.samples) == n  # nothing after stop
    assert reader.calls >= 6 and "foxlib-nvml-sampler" in reader.threads
    assert sampler.samples[0][1] == "start" and sampler.samples[-1][1] == "inference"
    assert sampler.values() == [v for _, _, v in sampler.samples] and max(sampler.values()) == 900
    times = [t for t, _, _ in sampler.samples]
    assert times == sorted(times)
    data = nvml.nvml_samples(sampler, "this process found in NVML's process list")
    assert data["applicable"] and len(data["samples"]) == n and data["interval_s"] == 0.001
    assert nvml.nvml_peak(records.NvmlSeries.from_dict(data).values(), 1000).max_bytes == 900


def test_a_failing_or_blind_reader_gives_missing_samples_and_says_why():
    sampler = nvml.Sampler(_FakeNvml([5, 7], fail_at=2), interval_s=60)
    with sampler:
        assert sampler.sample() is None  # the second read raised
        sampler.sample()
    assert sampler.error == "RuntimeError: NVML_ERROR_GPU_IS_LOST" and sampler.values() == [5, None, 7, 7]
    assert "a read failed: RuntimeError" in nvml.nvml_samples(sampler, "found")["note"]
    blind = nvml.Sampler(lambda: None, interval_s=60)
    with blind:
        blind.sample()
    data = nvml.nvml_samples(blind, "this process (pid 1) is not in NVML's process list")
    assert data["applicable"] is False
    check = nvml.nvml_peak(records.NvmlSeries.from_dict(data).values(), 4 * GIB, data["note"])
    assert not check.applicable and "not in NVML's process list" in check.note


# ----------------------------------------------------------------------------- the check in a measurement

def _with_samples(m, samples, note="this process found in NVML's process list"):
    return {**m, "schema_version": 2, "nvml": {"applicable": any(v is not None for _, _, v in samples),
                                              "note": note, "interval_s": 0.015,
                                              "samples": [list(s) for s in samples]}}


def test_the_nvml_check_joins_the_verdict_on_a_gpu_measurement():
    m = committed("h200", "8.13")
    card = m["cap"]["card_bytes"]
    fits = _with_samples(m, [(0.0, "start", 900 * MB), (0.1, "training", 1_950 * MB), (0.2, "inference", 1_400 * MB)])
    checks = analysis.checks(_typed(fits), load_budgets())
    nv = next(c for c in checks if c.name == nvml.NVML_CHECK)
    assert nv.measured == 1_950 * MB and nv.limit == card and nv.passed and nv.unit == "bytes"
    assert verdict(checks) == "GO"
    over = _with_samples(m, [(0.1, "training", card + 1), (0.2, "inference", 1_400 * MB)])
    checks = analysis.checks(_typed(over), load_budgets())
    nv = next(c for c in checks if c.name == nvml.NVML_CHECK)
    assert nv.measured == card + 1 and not nv.passed and verdict(checks) == "NO-GO"
    table = tables.cap_table(_typed(over)).set_index("quantity")
    assert table.loc["largest NVML process figure (training and inference)", "MB"] == round((card + 1) / MB, 2)
    assert "FAIL" in table.loc["card − largest NVML process figure", "how"]
    totals = tables.totals_table(_typed(fits), load_budgets()).set_index("quantity")
    assert totals.loc["training: largest NVML process figure", "MB"] == 1_950.0
    # NVML blind to this process (a container's PID namespace): said, left out of the verdict, nothing guessed
    blind = _with_samples(m, [(0.1, "training", None)], note="this process (pid 9) is not in NVML's process list")
    names = [c.name for c in analysis.checks(_typed(blind), load_budgets())]
    assert nvml.NVML_CHECK not in names and "not applicable" in analysis.nvml_text(_typed(blind))
    assert "pid 9" in analysis.nvml_text(_typed(blind))


def _cpu_nvml_not_applicable(m):
    assert m["nvml"]["applicable"] is False and m["nvml"]["samples"] == []
    assert nvml.NVML_CHECK not in [c.name for c in analysis.checks(_typed(m), load_budgets())]
    assert analysis.nvml_text(_typed(m)) == f"{nvml.NVML_CHECK}: not applicable on the CPU: no NVML, no CUDA context."
    assert analysis.nvml_check(_typed(m)).passed is None


def test_on_the_cpu_the_nvml_check_is_not_applicable():
    """The committed CPU run's record (the slow tier asserts the same of a fresh capped run)."""
    _cpu_nvml_not_applicable(committed("cpu", "8.13"))


@pytest.mark.slow
def test_a_fresh_cpu_run_records_the_nvml_check_as_not_applicable(capped):
    _cpu_nvml_not_applicable(capped)


def test_a_card_larger_than_the_device_is_said_to_be_the_devices_memory():
    """The committed H200 run, as if its card_gb were above the device's memory (cap_arithmetic then takes the
    device's): the table does not call the card card_gb × 2^30."""
    m = committed("h200", "8.13")
    plain = tables.cap_table(_typed(m)).set_index("quantity").loc["target card", "how"]
    assert plain.startswith("card_gb × 2^30 bytes")
    total = m["cap"]["device_total_bytes"]
    asked = {**m["measure_parameters"], "card_gb": 200.0}  # above the H200's 139.8 GiB
    m = {**m, "measure_parameters": asked, "cap": {**m["cap"], "card_bytes": total, "limit_bytes": total}}
    how = tables.cap_table(_typed(m)).set_index("quantity").loc["target card", "how"]
    assert how == f"this device's own memory, less than card_gb × 2^30 ({total:,} bytes)"


def test_the_cap_is_shown_over_the_card_once_the_context_grew():
    """The committed H200 run with its context at the end of inference grown 64 MB past any it measured: the cap
    was card − context, so the table says the cap plus that context is over the card."""
    m = committed("h200", "8.13")
    cap = m["cap"]
    grown = max(cap["context_bytes"], m["training"]["context_end_bytes"], m["inference"]["context_end_bytes"]) + 64 * MB
    m = {**m, "inference": {**m["inference"], "context_end_bytes": grown}}
    table = tables.cap_table(_typed(m)).set_index("quantity")
    assert table.loc["cap + largest CUDA context seen", "MB"] == round((cap["cap_bytes"] + grown) / MB, 2)
    assert cap["cap_bytes"] + grown > cap["card_bytes"] and "OVER" in table.loc["cap + largest CUDA context seen", "how"]
    assert table.loc["CUDA context at the end of inference", "MB"] == round(grown / MB, 2)
    assert (f"card − context = {cap['card_bytes']:,} − {cap['context_bytes']:,} = {cap['cap_bytes']:,} bytes"
            in table.loc["allocator cap", "how"])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_the_honest_cap_holds_on_a_gpu_nvml_never_sees_more_than_the_card():
    """Warm-up, context, cap = card − context, a short capped training and inference with NVML sampled:
    the largest NVML process figure stays at most the card, and the context grew little after the warm-up."""
    m = _measure(device="cuda", card_gb=4.0)
    cap, r = m["cap"], _typed(m)
    assert m["warmup"]["what"] and m["context_before_warmup"]["context_bytes"] > 0
    assert cap["context_bytes"] == m["context"]["context_bytes"] >= m["context_before_warmup"]["context_bytes"]
    assert cap["cap_bytes"] == 4 * GIB - cap["context_bytes"] and cap["limit_bytes"] == 4 * GIB
    assert m["training"]["oom"] is None and m["inference"]["oom"] is None
    nv = analysis.nvml_check(r)
    print(f"\ncontext before warm-up {m['context_before_warmup']['context_bytes'] / MB:,.1f} MB, after "
          f"{cap['context_bytes'] / MB:,.1f} MB, at the end {analysis.largest_context_bytes(r) / MB:,.1f} MB; "
          f"{analysis.nvml_text(r)}")
    if not nv.applicable:
        assert nv.note and "NVML" in nv.note
        pytest.skip(f"NVML gives no per-process figure here: {nv.note}")
    phases = {p for _, p, v in r.nvml.samples if v is not None}
    assert {"training", "inference"} <= phases and nv.n_samples > 2 * len(m["order"]) * m["steps"]
    assert nv.max_bytes <= 4 * GIB and nv.passed
    # the warm-up loaded what the run uses: the context grew by less than 64 MB after it was measured
    assert cap["cap_bytes"] + analysis.largest_context_bytes(r) <= 4 * GIB + 64 * MB
    check = next(c for c in analysis.checks(_typed(m), load_budgets()) if c.name == nvml.NVML_CHECK)
    assert check.passed and check.measured == nv.max_bytes


def test_the_warm_up_runs_every_model_and_leaves_nothing_but_workspaces(monkeypatch):
    """The warm-up's path on the CPU (the CUDA calls stubbed): each model's training steps and inference in
    its precision, one round of all at once, everything freed afterwards."""
    from foxlib.models import MODELS
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 123)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    ensemble = [members.Member(n, MODELS[n].preset("small"), "bf16" if n == "tft" else "fp32") for n in ENSEMBLE]
    got = measuring.warm_up(ensemble, torch.device("cpu"), "threads", 0, 0)
    assert got["oom"] is None and got["allocated_after_bytes"] == 123
    assert got["what"][:4] == [f"{n} ({'bf16' if n == 'tft' else 'fp32'}): {measuring.WARMUP_TRAINING_STEPS} training "
                               "steps, one inference forward" for n in ENSEMBLE]
    assert "one round of all 4 models at once (threads)" in got["what"]
    assert all(m.model is None and m.batch is None and m.optimizer is None for m in ensemble)


def test_the_committed_h200_cap_plus_the_largest_context_is_the_card():
    """Measured after the warm-up: the context did not grow past the figure the cap was set from."""
    m = committed("h200", "8.13")
    cap = m["cap"]
    grown = max(m["training"]["context_end_bytes"], m["inference"]["context_end_bytes"])
    assert grown <= cap["context_bytes"] and cap["cap_bytes"] + cap["context_bytes"] == cap["card_bytes"]
    table = tables.cap_table(_typed(m)).set_index("quantity")
    assert "OVER" not in table.loc["cap + largest CUDA context seen", "how"]


def test_an_accounting_oom_and_a_phase_without_nvml_write_back_as_produced():
    """A file is written as its record writes it (foxlib measure): the CPU's out-of-memory error keeps the key order
    cap.accounting_oom gives it, and a phase whose end had no NVML process figure has no context_end_bytes either way."""
    oom = cap.accounting_oom("training", "tft", 3, 12 * MB, 10 * MB)
    assert list(records.Oom.from_dict(oom).to_dict()) == list(oom)
    assert records.Oom.from_dict(oom).where == "at step 3 of tft"
    training = committed("h200", "8.13")["training"]
    no_nvml = {k: v for k, v in training.items() if k != "context_end_bytes"} | {
        "nvml_end": {"available": False, "note": "pynvml is not installed"}}
    again = records.Training.from_dict(no_nvml)
    assert again.context_end_bytes is None and again.to_dict() == no_nvml and list(again.to_dict()) == list(no_nvml)


def test_the_cap_writes_null_where_nothing_is_capped_and_leaves_out_what_was_not_reserved():
    """records.Cap through Sparse's rule, as the committed files hold it: on CUDA every figure; on the CPU fraction
    and device memory null (no default: a missing key is refused), reserved_at_cap_bytes absent."""
    gpu, cpu = committed("h200", "8.13")["cap"], committed("cpu", "8.13")["cap"]
    assert records.Cap.from_dict(gpu).to_dict() == gpu and list(records.Cap.from_dict(gpu).to_dict()) == list(gpu)
    assert records.Cap.from_dict(gpu).reserved_at_cap_bytes == 379_584_512
    typed = records.Cap.from_dict(cpu)
    assert typed.fraction is None and typed.reserved_at_cap_bytes is None
    assert list(typed.to_dict()) == list(cpu) and list(cpu)[-2:] == ["fraction", "device_total_bytes"]
    assert "reserved_at_cap_bytes" not in cpu and cpu["fraction"] is None
    with pytest.raises(TypeError, match="fraction"):
        records.Cap.from_dict({k: v for k, v in cpu.items() if k != "fraction"})


def test_the_context_is_the_bare_context_and_how_measured(monkeypatch):
    """cap.measure_context (CUDA; here bare_context and the CUDA calls stubbed with the H200's figures): with NVML's
    process figure it is bare_context's record and how, as the committed H200 run wrote it before its warm-up;
    without it, the device's use less the allocator's reserve, why said."""
    from foxlib.memory.cuda import BareContext
    written = committed("h200", "8.13")["context_before_warmup"]
    bare = BareContext.from_dict({k: v for k, v in written.items() if k != "how"})  # that run's own figures
    monkeypatch.setattr(cap, "bare_context", lambda device: bare)
    got = cap.measure_context(torch.device("cuda"))
    assert isinstance(got, records.Context) and got.to_dict() == written and list(got.to_dict()) == list(written)
    blind = BareContext(None, 2_097_152, None, "pynvml (nvidia-ml-py) is not installed", 33_553_920)
    monkeypatch.setattr(cap, "bare_context", lambda device: blind)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (H200 - 700_000_000, H200))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 2_097_152)
    got = cap.measure_context(torch.device("cuda")).to_dict()
    assert list(got) == list(committed("h200", "8.13")["context"]) and got["process_used_bytes"] is None
    assert got["context_bytes"] == 700_000_000 - 2_097_152
    assert got["how"].endswith("NVML's per-process figure is unavailable (pynvml (nvidia-ml-py) is not installed)")
