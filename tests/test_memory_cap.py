"""Wave 8.13's memory cap: running out of memory is a failed check with the numbers up to that point,
never a crash. On the CPU through the accounting path (nothing can be capped there); on a GPU a real
out-of-memory error under a tiny allocator cap."""
import math

import pytest
import torch

from foxlib.budgets import load_budgets, verdict
from foxlib.config import MB
from foxlib.waves import wave_8_13 as wave

TINY = {"preset": "small", "steps": 2, "inference_repeats": 2, "tft_config": '{"precision": "fp32"}'}


@pytest.fixture(scope="module")
def one_thread():
    """Two busy cores: one intra-op thread is several times faster than two fighting the other jobs."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


CAP = 5_000_000  # bytes: a few of the small ensemble's steps fit, Mamba-2's does not (it needs ~14 MB)


@pytest.fixture(scope="module")
def capped(one_thread):
    """The small ensemble under a 5 MB allocator cap (cap_bytes), on the CPU: the accounting path."""
    return wave.measure(**TINY, device="cpu", cap_bytes=CAP)


def _schedule(m):
    return [(name, s) for s in range(1, m["steps"] + 1) for name in m["order"]]


def _train_check(m):
    return next(c for c in wave.checks(m, load_budgets()) if c.name == wave.TRAIN_CHECK)


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
    plan = wave.account_training(m["step_profiles"], m["order"], m["steps"], CAP)
    assert plan["oom"] == oom and [{k: s[k] for k in ("model", "step", "start_bytes", "peak_bytes")}
                                   for s in t["steps"]] == plan["steps"]
    check = _train_check(m)
    assert not check.passed and check.unit == "bytes"
    assert check.measured == max(t["peak_bytes"], oom["needed_bytes"]) == oom["needed_bytes"] > check.limit == CAP
    assert wave.NOT_ENFORCED in check.note and "OUT OF MEMORY" in check.note and "cap_bytes" in check.note
    assert verdict(wave.checks(m, load_budgets())) == "NO-GO"
    assert m["inference"]["oom"] is None or m["inference"]["oom"]["needed_bytes"] > CAP


@pytest.mark.slow
def test_a_tiny_card_fails_at_loading_or_at_the_first_step(capped):
    """card_gb=0.001 (1.07 MB): what measure(card_gb=0.001) would find, from the same step measurements."""
    card = round(0.001 * 2**30)
    plan = wave.account_training(capped["step_profiles"], capped["order"], capped["steps"], card)
    assert plan["oom"] is not None and plan["oom"]["needed_bytes"] > card
    assert len(plan["steps"]) <= len(capped["order"])  # not even one round fits
    assert wave.NOT_ENFORCED in plan["oom"]["error"]


@pytest.mark.slow
def test_the_accounting_walk_is_each_step_peak_plus_what_the_others_keep(capped):
    profiles, order = capped["step_profiles"], capped["order"]
    full = wave.account_training(profiles, order, 2, cap=10**15)
    assert full["oom"] is None and len(full["steps"]) == 2 * len(order)
    kept = {n: profiles[n]["live_before_step"] for n in order}  # weights, batch, Adam state
    for ev in full["steps"][len(order):]:  # second round: every model has stepped
        others = sum(v for n, v in kept.items() if n != ev["model"])
        assert ev["peak_bytes"] == profiles[ev["model"]]["peak"] + others
        assert ev["start_bytes"] == sum(kept.values())
    assert full["setup_bytes"] == sum(kept[n] - profiles[n]["optimizer_state"] for n in order)
    # the walk stops at the first point over the cap, whatever the cap
    first = wave.account_training(profiles, order, 2, cap=1)["oom"]
    assert first["phase"] == "setup" and first["model"] == order[0]
    assert first["needed_bytes"] == kept[order[0]] - profiles[order[0]]["optimizer_state"]
    top = max(ev["peak_bytes"] for ev in full["steps"])
    k = next(j for j, ev in enumerate(full["steps"]) if ev["peak_bytes"] == top)
    plan = wave.account_training(profiles, order, 2, top - 1)
    assert plan["steps"] == full["steps"][:k] and plan["oom"]["needed_bytes"] == top
    assert (plan["oom"]["model"], plan["oom"]["step"]) == (full["steps"][k]["model"], full["steps"][k]["step"])


def test_the_size_of_the_failed_allocation_is_read_from_the_error():
    msg = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 139.81 GiB of which "
           "130.2 GiB is free. Of the allocated memory 3.1 GiB is allocated by PyTorch")
    assert wave.requested_bytes(msg) == 20 * 2**20
    assert wave.requested_bytes("Tried to allocate 512 bytes") == 512
    assert wave.requested_bytes("something else") is None


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_a_tiny_cap_on_a_gpu_is_a_real_out_of_memory_error_reported_as_a_failed_check():
    m = wave.measure(**TINY, device="cuda", cap_bytes=1)
    cap, t = m["cap"], m["training"]
    assert cap["enforced"] is True and cap["cap_bytes"] == 1 and cap["context_bytes"] > 0
    assert t["oom"] is not None and t["oom"]["enforced"] is True and t["oom"]["phase"] in ("setup", "training")
    assert "out of memory" in t["oom"]["error"].lower()
    check = _train_check(m)
    assert not check.passed and "OUT OF MEMORY" in check.note
    print(f"\nOOM {wave._where(t['oom'])}: {t['oom']['error'][:200]}")
    # the cap is lifted again: a 256 MB tensor fits
    x = torch.empty(256 * MB, dtype=torch.uint8, device="cuda")
    del x
    torch.cuda.empty_cache()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_the_small_ensemble_trains_and_serves_under_a_real_4_gb_cap():
    m = wave.measure(**TINY, device="cuda", card_gb=4.0)
    cap, t, i = m["cap"], m["training"], m["inference"]
    ctx = cap["context_bytes"]
    assert cap["cap_bytes"] == 4 * 2**30 - ctx and cap["limit_bytes"] == 4 * 2**30
    assert cap["fraction"] == pytest.approx(cap["cap_bytes"] / cap["device_total_bytes"])
    assert t["oom"] is None and i["oom"] is None and len(t["steps"]) == 2 * len(m["order"])
    assert all(s["peak_bytes"] <= s["reserved_peak_bytes"] <= cap["cap_bytes"] for s in t["steps"])
    assert i["mode"] == "streams" and all(v["together"]["n"] == 2 for v in i["models"].values())
    checks = wave.checks(m, load_budgets())
    assert all(c.passed for c in checks), [c.note for c in checks]
