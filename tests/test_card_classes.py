"""The answer per class of card (foxlib.core.card_classes): what each class runs, 8.12's recommendation per
class, 8.13's class checks, and the index's first lines."""
import pytest
import torch

from foxlib.core import card_classes as cc
from foxlib.core.budgets import load_budgets
from foxlib.core.config import ROOT
from tests.conftest import committed_measurement


@pytest.mark.parametrize("capability, name", [("7.5", "fp16"), ("7.0", "fp16"), ("8.0", "bf16"), ("8.9", "bf16"),
                                              ("9.0", "bf16")])
def test_a_gpu_s_class_is_read_from_its_compute_capability(capability, name):
    assert cc.nearest_class(capability).name == name and not cc.below_class(capability)


def test_the_cpu_and_unknown_gpus():
    assert cc.nearest_class(None, "cpu").name == "cpu"
    assert cc.below_class("6.1") and cc.nearest_class("6.1").name == "fp16"
    with pytest.raises(ValueError, match="valid: bf16, fp16, cpu"):
        cc.get_class("ampere")


def test_what_each_class_runs():
    fp16, bf16 = cc.get_class("fp16"), cc.get_class("bf16")
    assert fp16.allows("fp32") and fp16.allows("fp16") and not fp16.allows("bf16")
    assert not fp16.allows("fp32", tf32=True) and bf16.allows("fp32", tf32=True) and bf16.allows("bf16")
    assert [c.name for c in cc.classes_for("cuda")] == ["bf16", "fp16"] and cc.classes_for("cpu")[0].name == "cpu"


def test_8_12_recommends_per_class_among_what_the_class_runs():
    from foxlib.waves.wave_8_12 import analysis, records, tables
    rec = records.Measurement812.from_measurement(committed_measurement("h200", "8.12"))
    per = analysis.recommend_per_class(rec, load_budgets())
    assert set(per) == {"bf16", "fp16"}
    assert per["bf16"]["strategy"] == analysis.recommend(rec, load_budgets())["strategy"]  # every strategy is open to it
    fp16 = rec[per["fp16"]["strategy"]]
    assert fp16.precision in ("fp32", "fp16") and not fp16.options.tf32
    # the fp16 class's pick is the recommendation among exactly the strategies it runs
    allowed = {s.name for s in rec.strategies if cc.get_class("fp16").allows(s.precision, s.options.tf32)}
    assert per["fp16"]["strategy"] in allowed and len(allowed) < len(rec.strategies)
    table = tables.per_class_table(per)
    assert list(table["configuration to ship"]) == [per["bf16"]["strategy"], per["fp16"]["strategy"]]


def test_8_12_on_a_card_without_bf16_recommends_and_judges_what_that_card_runs():
    """A T4 (7.5) measures the bf16 strategies too (emulated): its own recommendation and checks are its class's,
    never a bf16 strategy. The committed H200 run, relabelled as a T4, stands in for one."""
    import dataclasses
    from foxlib.waves.wave_8_12 import analysis, records
    h200 = committed_measurement("h200", "8.12")
    t4 = dataclasses.replace(h200, device=dataclasses.replace(h200.device, name="Tesla T4", capability="7.5"))
    rec = records.Measurement812.from_measurement(t4)
    own = analysis.recommend(rec, load_budgets())
    assert own["strategy"] == analysis.recommend_per_class(rec, load_budgets())["fp16"]["strategy"]
    assert rec[own["strategy"]].precision != "bf16" and "open to the fp16 class" in own["reason"]
    assert any(rec[own["strategy"]].name in c.name for c in analysis.checks(rec, load_budgets()))
    h200_own = analysis.recommend(records.Measurement812.from_measurement(h200), load_budgets())
    assert rec[h200_own["strategy"]].precision == "bf16"  # else this test could not tell the classes apart
    light = analysis.lightest_at_full_speed(rec, load_budgets())
    assert light is not None and rec[light["strategy"]].precision != "bf16"
    # a GPU older than every class (a Pascal) or of unknown capability: judged as the fp16 class, not refused
    for capability in ("6.1", None):
        old = dataclasses.replace(h200, device=dataclasses.replace(h200.device, capability=capability))
        assert analysis.recommend(records.Measurement812.from_measurement(old), load_budgets()) == own
    assert cc.nearest_class("6.1").name == "fp16" and cc.nearest_class("9.0").name == "bf16"


def test_a_cpu_recommendation_is_fp32_whatever_the_measuring_cpu_ran_fast():
    """The committed CPU run with bf16 made to tie the fastest strategy (the same interval, as a run at 2 rounds on
    a CPU with bf16 kernels once timed it) and to be the lightest: it would win, yet the CPU class still ships fp32,
    since an AVX2-only CPU runs a bf16 step many times slower. The reason says why. A bf16 GPU with the same
    figures ships bf16."""
    import dataclasses
    from foxlib.core.schema import Device
    from foxlib.waves.wave_8_12 import analysis, records
    rec = records.Measurement812.from_measurement(committed_measurement("cpu", "8.12"))
    fastest = min(rec.strategies, key=lambda s: s.window_ratio.median)
    rec = dataclasses.replace(rec, strategies=tuple(
        dataclasses.replace(s, peak_bytes=100_000_000, window_ratio=fastest.window_ratio) if s.name == "bf16" else s
        for s in rec.strategies))
    cpu = analysis.recommend(rec, load_budgets())
    assert rec[cpu["strategy"]].precision == "fp32"
    assert "16-bit strategies are not recommended for CPUs" in cpu["reason"]
    assert analysis.recommend_per_class(rec, load_budgets())["cpu"]["strategy"] == cpu["strategy"]
    assert not cc.get_class("cpu").may_recommend("bf16") and cc.get_class("cpu").allows("bf16")
    gpu = dataclasses.replace(rec, device=Device("cuda", "NVIDIA H200", "h200", capability="9.0"))
    assert analysis.recommend(gpu, load_budgets())["strategy"] == "bf16"


def test_8_13_refuses_what_a_class_lacks_and_says_what_it_enforces():
    from foxlib.harness.step_options import StepOptions
    from foxlib.waves.wave_8_13.measuring import class_facts, resolve_class
    from foxlib.waves.wave_8_13.records import TftRun
    cpu = cc.get_class("cpu")
    assert resolve_class("auto", cpu).name == "cpu"
    with pytest.raises(ValueError, match="is a cuda class; this run is on cpu"):
        resolve_class("fp16", cpu)
    fp16 = cc.get_class("fp16")

    def tft(precision, **kw):
        return TftRun(precision, {}, "the tft_config parameter", False, **kw)
    with pytest.raises(ValueError, match="cannot run on the fp16 class"):
        class_facts(fp16, cpu, tft("bf16"), "fp32")
    with pytest.raises(ValueError, match="with TF32 cannot run"):
        class_facts(fp16, cpu, tft("fp32", cuda_graph=False, options=StepOptions(tf32=True)), "fp32")
    with pytest.raises(ValueError, match="DQN, PPO and Mamba-2 in bf16"):
        class_facts(fp16, cpu, tft("fp32"), "bf16")
    facts = class_facts(cpu, cpu, tft("fp32"), "fp32")
    assert facts.name == "cpu" and not facts.emulated and "fp32" in facts.enforced[0]


def test_the_tf32_limit_is_set_for_the_run_and_restored():
    from foxlib.waves.wave_8_13.measuring import class_limits
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.allow_tf32 = True
    with class_limits(cc.get_class("fp16"), torch.device("cuda")):
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _res(verdict, card_class, measured, limit=4_294_967_296, device="h200", kind="cuda", differs=None):
    return {"wave": "8.13", "verdict": verdict, "_device": device, "_dir": f"{device}/x",
            "device": {"type": kind, "name": "NVIDIA H200" if kind == "cuda" else "a CPU"},
            "card_class": card_class, "run": {"differs": differs or {}},
            "checks": [{"name": "ensemble trains under the cap", "measured": measured, "limit": limit, "unit": "bytes",
                        "passed": measured <= limit}]}


def test_the_index_answers_per_card_class_with_the_margin():
    from foxlib.report.index import answer
    own = {"name": "bf16", "emulated": False, "enforced": []}
    emulated = {"name": "fp16", "emulated": True, "enforced": ["TF32 off"]}
    found = {"8.13": {"h200": _res("GO", own, 2_000_000_000)},
             "8.12": {"h200": {"recommended_per_class": {"bf16": {"strategy": "bf16 graph"},
                                                         "fp16": {"strategy": "fp32 graph"}}}}}
    lines = answer(found, ["h200"], [_res("NO-GO", emulated, 5_000_000_000, differs={"card_class": {}})])
    assert lines[0].startswith("GPU with bf16") and "GO — ship bf16 graph" in lines[0]
    assert "margin 2,295.0 MB (53 % of 4,295.0 MB)" in lines[0] and "validated on the NVIDIA H200" in lines[0]
    assert lines[1].startswith("GPU without bf16") and "NO-GO — ship fp32 graph" in lines[1]
    assert "705.0 MB over" in lines[1] and "emulated on the NVIDIA H200 under a 4 GiB cap (no bf16, TF32 off" in lines[1]
    # a variant that differs in more than its class answers for nothing
    lines = answer(found, ["h200"], [_res("GO", emulated, 1, differs={"card_class": {}, "steps": {}})])
    assert "no verdict" in lines[1] and "has not validated it" in lines[1]


def test_the_committed_index_opens_with_every_class():
    html = (ROOT / "reports" / "index.html").read_text()
    first = html[html.index('<div class="answer">'):html.index("</div>")]
    for c in cc.CLASSES:
        assert c.title in first
    assert first.count("deployment (8.14) GO") + first.count("deployment (8.14) NO-GO") == len(cc.CLASSES)


def test_a_gpu_older_than_every_class_is_judged_as_the_fp16_class_by_8_13_and_the_index(tmp_path):
    """A Pascal (6.1) or a GPU of unknown capability: 8.13 validates it as the fp16 class (nearest_class, as 8.12
    does) and says why on its first screen; the index reads its page's class without failing."""
    import dataclasses
    import json

    from foxlib.report import index
    from foxlib.waves.wave_8_13 import analysis
    m = committed_measurement("h200", "8.13")
    assert "(this device's own class)" in analysis.card_class_text(m)
    for capability, says in (("6.1", "its compute capability 6.1 is older than every class"),
                             (None, "its compute capability is unknown")):
        old = dataclasses.replace(m, device=dataclasses.replace(m.device, capability=capability))
        assert f"(the nearest to this GPU: {says}, and it shares this class's limits)" in analysis.card_class_text(old)
        assert cc.below_class(capability) and index.answers_for({"device": {"capability": capability}}, "cuda") == "fp16"
    assert not cc.below_class("7.0") and not cc.below_class(None, "cpu")
    assert index.answers_for(json.loads((ROOT / "reports/h200/wave-8.13/results.json").read_text()), "cuda") == "bf16"
