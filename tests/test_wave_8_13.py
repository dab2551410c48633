"""Wave 8.13 end to end with tiny parameters: what the notebook wrote, checked against itself; and how
the TFT's configuration is chosen (wave 8.12's recommendation, a JSON override, or the fp32 fallback)."""
import json
import math

import pytest
import torch

from foxlib.report import index
from foxlib.core.config import MB
from foxlib.harness.step_options import StepOptions
from foxlib.memory.profile import MemoryProfile
from foxlib.models import MODELS
from foxlib.waves.wave_8_13 import analysis, measuring, nvml, records, tft
from foxlib.waves.wave_8_13.cap import account_training
from tests.conftest import committed, committed_measurement, committed_path, measurement_at

TINY_8_13 = {"preset": "small", "steps": 2, "inference_repeats": 3, "device": "cpu"}
RECOMMENDED = {"precision": "bf16", "tft_overrides": {"checkpointing": "blocks", "memory_efficient": True}}
GIB = 2**30


def _write_8_12(reports_dir, recommended=RECOMMENDED, device="cpu"):
    path = tft.recommendation_file(device, reports_dir)
    path.parent.mkdir(parents=True)
    body = {"wave": "8.12", "verdict": "GO", "generated_at": "2026-12-01T00:00:00+00:00"}
    if recommended is not None:
        body["recommended"] = recommended
    path.write_text(json.dumps(body))
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The notebook through papermill; "auto" finds a wave 8.12 report in FOXLIB_REPORTS (the kernel inherits it)."""
    from foxlib.run.runner import run_wave
    earlier = tmp_path_factory.mktemp("reports-with-8.12")
    _write_8_12(earlier)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FOXLIB_REPORTS", str(earlier))
        return run_wave("8.13", TINY_8_13, reports_dir=tmp_path_factory.mktemp("r"), progress=False, allow_dirty=True)


@pytest.fixture(scope="module")
def written(report):
    return json.loads((report / "results.json").read_text()), json.loads((report / "measurement.json").read_text())


@pytest.mark.slow
def test_writes_the_report_and_the_deployment_document(report):
    for name in ("report.html", "report.md", "results.json", "measurement.json", "notebook.ipynb", "deployment.md"):
        assert (report / name).is_file(), name
    assert report.parents[1].name == "cpu" and report.parent.name == "variants" and report.name.startswith("wave-8.13-")
    html = (report / "report.html").read_text()
    assert "Verdict:" in html and "data:image/png;base64" in html and "not enforced (accounting)" in html


@pytest.mark.slow
def test_checks_follow_from_the_numbers(written):
    res, m = written
    assert res["wave"] == "8.13" and res["title"] == "Production validation" and res["device"]["type"] == "cpu"
    assert res["parameters"]["steps"] == 2 and res["parameters"]["preset"] == "small"
    t, i, cap = m["training"], m["inference"], m["cap"]
    assert cap == {**cap, "card_bytes": 4 * GIB, "cap_bytes": 4 * GIB, "limit_bytes": 4 * GIB,
                   "context_bytes": 0, "enforced": False}
    # the training figure is the accounting walk, redone here from the same step measurements
    plan = account_training(m["step_profiles"], m["order"], m["steps"], cap["cap_bytes"])
    assert [{k: s[k] for k in ("model", "step", "start_bytes", "peak_bytes")} for s in t["steps"]] == plan["steps"]
    assert t["peak_bytes"] == max([plan["setup_bytes"]] + [s["peak_bytes"] for s in plan["steps"]])
    # inference: every model's weights and input, plus every forward peak at once
    assert i["peak_bytes"] == sum(v["parameters_bytes"] + v["input_bytes"] + v["solo_increment_bytes"]
                                  for v in i["models"].values())
    by_name = {c["name"]: c for c in res["checks"]}
    train, infer = by_name[analysis.TRAIN_CHECK], by_name[analysis.INFERENCE_CHECK]
    assert train["measured"] == t["peak_bytes"] and train["limit"] == 4 * GIB
    assert train["passed"] == (t["oom"] is None and train["measured"] <= train["limit"])
    assert infer["measured"] == i["peak_bytes"] and infer["limit"] == 4 * GIB - 500 * MB
    assert infer["passed"] == (i["oom"] is None and infer["measured"] <= infer["limit"])
    assert all("not enforced (accounting)" in c["note"] for c in res["checks"])
    assert res["verdict"] == ("GO" if train["passed"] and infer["passed"] else "NO-GO") == "GO"
    assert res["deployment_verdict"] == {"wave": "8.14", "verdict": res["verdict"]}
    assert res["enforced"] is False and res["deployment"] == "deployment.md"


@pytest.mark.slow
def test_the_run_is_real_interleaved_and_timed(written):
    _, m = written
    t, i = m["training"], m["inference"]
    assert m["order"] == ["dqn", "ppo", "mamba2", "tft"]
    assert [(s["model"], s["step"]) for s in t["steps"]] == [(n, s) for s in (1, 2) for n in m["order"]]
    assert all(math.isfinite(s["loss"]) and s["seconds"] > 0 for s in t["steps"])
    for name in m["order"]:
        p = t["per_model"][name]
        assert p["steps_run"] == 2 and p["non_finite_losses"] == 0
        prof = m["step_profiles"][name]  # the first step is the largest rise: it creates Adam's state
        assert p["step_increment_bytes"] == prof["peak"] - prof["live_before_step"] + prof["optimizer_state"]
        v = i["models"][name]
        assert v["batch"] == m["models"][name]["config"]["batch_size"]
        for run in ("alone", "together"):
            assert v[run]["n"] == 3 and 0 < v[run]["p50_s"] <= v[run]["p99_s"]
    assert i["mode"] == "threads" and "thread" in i["how"]


@pytest.mark.slow
def test_auto_takes_wave_8_12s_recommendation(written):
    _, m = written
    assert m["tft"]["recommended"] is True and "8.12" in m["tft"]["source"]
    assert m["tft"]["precision"] == "bf16" == m["models"]["tft"]["precision"]
    cfg = m["models"]["tft"]["config"]
    assert cfg["checkpointing"] == "blocks" and cfg["memory_efficient"] is True
    assert m["step_profiles"]["tft"]["precision"] == "bf16"
    assert all(m["models"][n]["precision"] == "fp32" for n in ("dqn", "ppo", "mamba2"))


@pytest.mark.slow
def test_the_deployment_document_has_each_model_its_memory_and_the_commands(report, written):
    res, m = written
    doc = (report / "deployment.md").read_text()
    assert f"**{res['verdict']}**" in doc.splitlines()[0]
    for name in m["order"]:
        assert f"### {name} — {MODELS[name].title}" in doc
        assert f"| {name} | {m['models'][name]['precision']} | 2/2 |" in doc
    for command in ("make venv", ".venv/bin/python -m foxlib report --wave 8.13 -p preset=small",
                    ".venv/bin/python -m foxlib measure --wave 8.13", "-p measurements=wave-8.13-measurement.json",
                    "pytest -q -rs tests/test_memory_cap.py tests/test_wave_8_13.py"):
        assert command in doc, command
    assert """'tft_config={"precision":"bf16","checkpointing":"blocks","memory_efficient":true}'""" in doc
    assert "## Headroom on the 4,295.0 MB card" in doc and "## Risks that remain" in doc
    assert "The cap was not enforced" in doc and "not enforced (accounting)" in doc
    assert f"{(4 * GIB - res['figures']['deployment/training_peak']['value']) / MB:,.1f}" in doc  # the training headroom


@pytest.mark.slow
def test_the_index_lists_8_13_and_8_14_follows_it(report, written, tmp_path):
    res, _ = written
    import shutil  # the tiny run is a variant: filed here as a canonical report, the index's input
    shutil.copytree(report, tmp_path / "cpu" / "wave-8.13")
    lines = index.status_lines(tmp_path)
    assert any(line.startswith("8.13") and f"cpu: {res['verdict']}" in line for line in lines)
    assert any(line.startswith("8.14") and f"cpu: {res['verdict']}" in line for line in lines)


# ----------------------------------------------------------------------------- choosing the TFT

def test_a_json_tft_config_overrides_and_is_validated(tmp_path):
    got = tft.resolve_tft('{"precision": "fp16", "checkpointing": "vsn"}', "small", "cpu", tmp_path)
    assert got.run.precision == "fp16" and got.config.checkpointing == "vsn"
    assert got.run.source == "the tft_config parameter" and got.run.recommended is False
    with pytest.raises(ValueError, match="valid fields: .*hidden_size"):
        tft.resolve_tft('{"chekpointing": "vsn"}', "small", "cpu", tmp_path)
    with pytest.raises(ValueError, match="valid precisions: fp32, fp16, bf16"):
        tft.resolve_tft('{"precision": "fp8"}', "small", "cpu", tmp_path)
    with pytest.raises(ValueError, match="'auto' or a JSON object"):
        tft.resolve_tft("bf16", "small", "cpu", tmp_path)
    with pytest.raises(ValueError, match="valid fields"):  # before any measuring
        measuring.measure(preset="small", tft_config='{"bogus": 1}', device="cpu")


def test_parameter_values_are_checked_before_anything_runs():
    from foxlib.core.parameters import read_parameters, resolve
    from foxlib.core.critical_path import get_wave
    declared = read_parameters(get_wave("8.13").notebook)
    ok = resolve(declared, {"preset": "small", "device": "cpu", "tft_config": '{"precision": "bf16"}'})
    measuring.check_parameters(ok)
    for bad, match in (({"tft_config": '{"bogus": 1}'}, "valid fields"), ({"ensemble_precision": "fp8"}, "valid precisions"),
                       ({"inference_mode": "streams"}, "needs CUDA"), ({"inference_mode": "fibers"}, "valid: auto"),
                       ({"steps": 0}, "at least 1"), ({"preset": "huge"}, "valid presets")):
        with pytest.raises(ValueError, match=match):
            measuring.check_parameters({**ok, **bad})


def test_the_tfts_step_options_are_typed_once_and_the_run_takes_that_record(monkeypatch):
    """resolve_tft makes the TFT's step options a StepOptions once, from their JSON; the class check and the TFT
    member take that very record (CheckedRun.tft.run.options), not a dict made into a record again."""
    made, checked, options = [], [], {}
    real_from_dict, real_check = StepOptions.from_dict.__func__, measuring.check_parameters
    real_member = measuring.Member

    def from_dict(cls, d):
        made.append(d)
        return real_from_dict(cls, d)

    def check(params):
        checked.append(real_check(params))
        return checked[-1]

    class Stop(Exception):
        pass

    def member(name, cfg, precision, **kwargs):  # the run stops at the TFT's member, before anything is built
        options[name] = kwargs["options"]
        if name == "tft":
            raise Stop
        return real_member(name, cfg, precision, **kwargs)
    monkeypatch.setattr(StepOptions, "from_dict", classmethod(from_dict))
    monkeypatch.setattr(measuring, "check_parameters", check)
    monkeypatch.setattr(measuring, "Member", member)
    with pytest.raises(Stop):
        measuring.measure(preset="small", device="cpu", tft_config='{"options": {"cudnn": false}}')
    assert made == [{"cudnn": False}]  # read from the parameter's JSON, once
    run = checked[0].tft.run
    assert run.options == StepOptions(cudnn=False) and options["tft"] is run.options
    assert all(o == StepOptions() for name, o in options.items() if name != "tft")


def test_auto_falls_back_to_the_plain_fp32_tft_and_says_so(tmp_path):
    got = tft.resolve_tft("auto", "small", "cpu", tmp_path)
    assert got.run.precision == "fp32" and got.config == MODELS["tft"].preset("small")
    assert got.run.recommended is False and got.run.source.startswith("fallback: no wave 8.12 report")
    _write_8_12(tmp_path, recommended=None)
    got = tft.resolve_tft("auto", "small", "cpu", tmp_path)
    assert got.run.precision == "fp32" and "holds no \"recommended\"" in got.run.source


def test_auto_falls_back_where_wave_8_12_found_no_configuration(tmp_path):
    """A NO-GO 8.12 writes "recommended" (and each class's) as {"strategy": None, "reason"}: the fallback, not a
    configuration with fields named strategy and reason."""
    none = {"strategy": None, "reason": "no strategy has a peak under 1,000 MB"}
    path = _write_8_12(tmp_path, recommended=none)
    body = json.loads(path.read_text())
    body["recommended_per_class"] = {"cpu": {**none, "card_class": "cpu", "card_class_title": "CPU (no GPU)"}}
    path.write_text(json.dumps(body))
    for card_class in (None, "cpu"):
        got = tft.resolve_tft("auto", "small", "cpu", tmp_path, card_class=card_class)
        assert got.run.precision == "fp32" and got.run.recommended is False
        assert got.depends_on == (provenance.cite(path),)  # read, so cited: a later 8.12 makes the run stale
        assert "holds no \"recommended\" configuration" in got.run.source


def test_auto_takes_a_recommendation_as_wave_8_12_writes_it(tmp_path):
    """8.12's "recommended" also describes itself (strategy, peak, reason): only precision and tft_overrides count."""
    _write_8_12(tmp_path, recommended={**RECOMMENDED, "strategy": "efficient + checkpoint blocks + bf16",
                                       "peak_bytes": 123, "step_time_ratio": 0.9, "reason": "fastest"})
    got = tft.resolve_tft("auto", "small", "cpu", tmp_path)
    assert got.run.recommended is True and got.run.precision == "bf16"
    assert got.run.overrides == RECOMMENDED["tft_overrides"]
    assert got.config.checkpointing == "blocks" and got.config.memory_efficient is True


def test_auto_rejects_a_recommendation_with_an_unknown_field(tmp_path):
    _write_8_12(tmp_path, {"precision": "bf16", "tft_overrides": {"no_such_field": 1}})
    with pytest.raises(ValueError, match="wave 8.12's recommendation.*valid fields"):
        tft.resolve_tft("auto", "small", "cpu", tmp_path)


# ----------------------------------------------------------------------------- the typed record and depends_on

from foxlib.core import provenance  # noqa: E402
from foxlib.core.budgets import load_budgets  # noqa: E402
from foxlib.core.config import ROOT  # noqa: E402


@pytest.mark.parametrize("device", ["cpu", "h200"])
def test_the_committed_measurements_load_as_records_and_give_their_checks(device):
    """The committed files load; the checks computed from the measurement are the committed results' checks (that
    a file writes back byte for byte is test_validation's check over every committed measurement)."""
    raw, published = committed(device, "8.13"), committed(device, "8.13", "results.json")
    r = records.Measurement.from_dict(raw)
    assert r.order == tuple(raw["order"])
    assert r.cap.card_bytes == raw["cap"]["card_bytes"] and r.training.peak_bytes == raw["training"]["peak_bytes"]
    # a GPU run samples NVML; a CPU run has none; each cites the 8.12 it validated
    assert r.nvml.applicable == (device != "cpu") and len(r.depends_on) == 1
    got = {c.name: c for c in analysis.checks(r, load_budgets())}
    for c in published["checks"]:
        assert (got[c["name"]].measured, got[c["name"]].limit, got[c["name"]].passed) == \
               (c["measured"], c["limit"], c["passed"])
    if r.nvml.applicable:  # sampled: checked against the card
        assert got[nvml.NVML_CHECK].measured == analysis.nvml_check(r).max_bytes and got[nvml.NVML_CHECK].passed
    else:  # no NVML (the CPU): not applicable, said so
        assert nvml.NVML_CHECK not in got
    for version in (1, records.SCHEMA_VERSION + 1):
        with pytest.raises(ValueError, match=f"schema_version {version}; this foxlib reads {records.SCHEMA_VERSION}"):
            records.Measurement.from_dict({**raw, "schema_version": version})
    with pytest.raises(ValueError, match="lacks nvml"):
        records.Measurement.from_dict({k: v for k, v in raw.items() if k != "nvml"})
    with pytest.raises(ValueError, match="lacks card_class"):  # every run names the card class it validated
        records.Measurement.from_dict({**raw, "card_class": None})
    with pytest.raises(ValueError, match="holds bogus, which a wave 8.13 measurement does not"):
        records.Measurement.from_dict({**raw, "bogus": 1})
    if r.cap.enforced:  # a run under a cap: its contexts and warm-up are what the cap's tables read
        with pytest.raises(ValueError, match="lacks warmup"):
            records.Measurement.from_dict({**raw, "warmup": None})


@pytest.mark.parametrize("folder", ["cpu/wave-8.13", "h200/wave-8.13", "h200/variants/wave-8.13-card_class-fp16"])
def test_every_committed_measurement_types_its_parts(folder):
    """Each committed 8.13 measurement reads into its records (the TFT, each model, the contexts, the warm-up, the
    card class); that it writes back byte for byte is test_validation's check over every committed measurement."""
    path = ROOT / "reports" / folder / "measurement.json"
    m = measurement_at(path)
    assert isinstance(m.tft, records.TftRun) and isinstance(m.card_class, records.ClassFacts)
    assert all(isinstance(v, records.ModelRun) for v in m.models.values()) and list(m.models) == list(m.order)
    assert isinstance(m.warmup, records.Warmup) == isinstance(m.context, records.Context) == m.cap.enforced
    assert m.step_profiles is None if m.cap.enforced else all(isinstance(p, MemoryProfile)
                                                              for p in m.step_profiles.values())
    with pytest.raises(ValueError, match="malformed .*bogus"):  # a part's unknown key is refused, not carried
        records.Measurement.from_dict({**m.to_dict(), "tft": {**m.tft.to_dict(), "bogus": 1}})
    # the TFT's step options typed where the run had them (absent on the CPU: 8.12 recommended an eager step there)
    assert (m.tft.options is None) == (folder == "cpu/wave-8.13")
    if m.tft.options is not None:
        assert isinstance(m.tft.options, StepOptions) and m.tft.options.cudnn
        assert m.tft.options.compile == (folder == "h200/wave-8.13")
        bogus = {**m.to_dict(), "tft": {**m.tft.to_dict(), "options": {**m.tft.options.to_dict(), "bogus": True}}}
        with pytest.raises(ValueError, match=f"{path}: a part .* malformed .*unknown step option.*bogus"):
            records.Measurement.from_dict(bogus, str(path))


def test_model_peaks_are_each_steps_own_tensors_and_the_process_figure_adds_up():
    raw = committed("cpu", "8.13")
    cpu = records.Measurement.from_dict(raw)
    peaks = analysis.model_peaks(cpu)
    assert peaks == {n: p["peak"] for n, p in raw["step_profiles"].items()}  # profile_step's peak, model by model
    assert analysis.workspace_bytes(cpu) == 0 and analysis.process_figure(cpu) == sum(peaks.values())
    now = committed("h200", "8.13")
    r = records.Measurement.from_dict(now)  # measured after the warm-up: what it left allocated is the workspaces
    ctx = max(now["cap"]["context_bytes"], now["training"]["context_end_bytes"], now["inference"]["context_end_bytes"])
    assert analysis.workspace_bytes(r) == now["warmup"]["allocated_after_bytes"] > 0
    assert analysis.process_figure(r) == sum(analysis.model_peaks(r).values()) + analysis.workspace_bytes(r) + ctx
    tft = next(s for s in now["training"]["steps"] if s["model"] == "tft" and s["step"] == 2)
    st = now["training"]["models"]["tft"]
    assert analysis.model_peaks(r)["tft"] >= tft["peak_bytes"] - tft["start_bytes"] + sum(st[k] for k in (
        "parameters_bytes", "optimizer_state_bytes", "batch_device_bytes"))


def _cites_8_12_and_names_it(m, html):
    assert len(m["depends_on"]) == 1
    c = m["depends_on"][0]
    assert c["path"].endswith("cpu/wave-8.12/results.json") and len(c["sha256"]) == 64
    assert "Depends on: wave 8.12 results" in html and c["sha256"][:12] in html
    assert f"{nvml.NVML_CHECK}: not applicable on the CPU" in html and "Cap: not enforced" in html
    assert m["nvml"] == {"applicable": False, "note": "not applicable on the CPU: no NVML, no CUDA context",
                         "interval_s": None, "samples": []}


def test_the_committed_cpu_measurement_cites_the_8_12_results_it_used_and_the_report_names_it():
    m = committed("cpu", "8.13")
    assert m["schema_version"] >= 2  # measured with citations
    _cites_8_12_and_names_it(m, committed_path("cpu", "8.13", "report.html").read_text())


@pytest.mark.slow
def test_the_measurement_cites_the_8_12_results_it_used_and_the_report_names_it(report, written):
    _, m = written
    assert m["schema_version"] == records.SCHEMA_VERSION
    _cites_8_12_and_names_it(m, (report / "report.html").read_text())


def test_a_changed_8_12_results_file_fails_verification(tmp_path):
    path = _write_8_12(tmp_path)
    got = tft.resolve_tft("auto", "small", "cpu", tmp_path)
    assert got.depends_on == (provenance.cite(path),)
    provenance.verify(got.depends_on, base=tmp_path)  # unchanged: passes
    path.write_text(path.read_text().replace("GO", "NO-GO"))
    with pytest.raises(provenance.ProvenanceError, match="changed since it was used"):
        provenance.verify(got.depends_on, base=tmp_path)
    assert tft.resolve_tft('{"precision": "bf16"}', "small", "cpu", tmp_path).depends_on == ()
    assert tft.resolve_tft("auto", "small", "cpu", tmp_path / "none").depends_on == ()


def test_together_runs_every_model_once_a_round_and_times_it():
    from foxlib.waves.wave_8_13.serve import Together
    calls = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    with Together(fns, "threads", torch.device("cpu")) as together:
        assert together.streams == {}  # one stream per model on CUDA only
        latencies, wall = together()
    assert sorted(calls) == ["a", "b"] and set(latencies) == {"a", "b"} and wall >= max(latencies.values()) >= 0


def test_deployment_says_what_a_compiled_tft_costs_at_start_up():
    """The committed H200 run ships 8.12's compiled TFT: its deployment risks give the measured warm-up; the fp16
    class's run (no torch.compile) says nothing of it."""
    from foxlib.waves.wave_8_13 import deployment
    compiled = committed_measurement("h200", "8.13")
    plain = measurement_at(ROOT / "reports/h200/variants/wave-8.13-card_class-fp16/measurement.json")
    assert compiled.tft.options.compile and plain.tft.options is not None and plain.tft.options.is_default
    [line] = [r for r in deployment.risks(compiled, load_budgets()) if r.startswith("**Start-up.**")]
    assert f"took {compiled.warmup.seconds:,.1f} s on NVIDIA H200" in line
    assert not any(r.startswith("**Start-up.**") for r in deployment.risks(plain, load_budgets()))


def test_deployment_counts_the_models_the_measurement_holds():
    """The one-process sentence counts the measurement's members: four in the committed H200 run, three when one
    is left out (the words and the context arithmetic alike)."""
    import dataclasses
    from foxlib.waves.wave_8_13 import deployment
    m = committed_measurement("h200", "8.13")

    def one_process(r):
        [line] = [x for x in deployment.risks(r, load_budgets()) if "**one process**" in x]
        return line
    assert one_process(m).startswith("All four models run") and "Deployed as four processes" in one_process(m)
    three = one_process(dataclasses.replace(m, order=m.order[:3]))
    assert three.startswith("All three models run") and "Deployed as three processes, each pays its own: 3 × " in three


def test_a_phase_is_training_or_inference_and_another_name_is_refused():
    m = committed_measurement("cpu", "8.13")
    assert m.phase("training") is m.training and m.phase("inference") is m.inference
    with pytest.raises(ValueError, match="unknown phase 'cap'; valid: training, inference"):
        m.phase("cap")  # a field of the measurement, but not a phase
