"""Wave 8.10 end to end: the notebook run through papermill with tiny parameters, and what it wrote."""
import json
import os

import pytest
import re
import subprocess
import sys

import torch

from foxlib.core import results
from foxlib.core.config import MB, ROOT
from foxlib.models import MODELS
from foxlib.waves.wave_8_10 import analysis, measuring, records, tables
from tests.conftest import TINY_8_10, committed


@pytest.mark.slow
def test_writes_the_report_files(tiny_8_10):
    for name in ("report.html", "report.md", "results.json", "notebook.ipynb"):
        assert (tiny_8_10 / name).is_file(), name
    # tiny parameters are not the defaults: a variant, in its own folder, off the index
    assert tiny_8_10.parents[1].name == "cpu" and tiny_8_10.parent.name == "variants"
    assert tiny_8_10.name.startswith("wave-8.10-")


@pytest.mark.slow
def test_a_variant_page_links_back_to_the_index(tiny_8_10):
    """A variant lies under reports/<device>/variants/: its back link climbs three folders (it was rendered in a
    work folder beside the device's reports and climbed two, to reports/<device>/index.html, which is none)."""
    import re
    assert tiny_8_10.parent.name == "variants"
    for page in ("report.md", "report.html"):
        hrefs = set(re.findall(r"\(([./]*index\.html)\)|href=\"([./]*index\.html)\"", (tiny_8_10 / page).read_text()))
        links = {a or b for a, b in hrefs}
        assert links and {(tiny_8_10 / h).resolve() for h in links} == {tiny_8_10.parents[2].resolve() / "index.html"}


@pytest.mark.slow
def test_results_follow_from_the_measurement(tiny_8_10):
    res = json.loads((tiny_8_10 / "results.json").read_text())
    m = json.loads((tiny_8_10 / "measurement.json").read_text())
    assert res["wave"] == "8.10" and res["title"] == "TFT GPU memory profile"
    assert res["device"]["type"] == "cpu"
    assert res["parameters"]["batch_size"] == 4 and res["parameters"]["preset"] == "small"
    p = m["tft"]["profile"]
    by_name = {c["name"]: c for c in res["checks"]}
    assert by_name["TFT peak training memory"]["measured"] == p["peak"]
    assert by_name["TFT peak training memory"]["limit"] == 1000 * MB
    assert by_name["TFT gradients"]["measured"] == p["gradients"] == p["parameters"]  # one fp32 grad a weight
    assert by_name["TFT optimizer state"]["measured"] > 2 * p["parameters"]  # two Adam moments + steps
    assert all(c["passed"] == (c["measured"] <= c["limit"]) for c in res["checks"])
    assert res["verdict"] == ("GO" if all(c["passed"] for c in res["checks"]) else "NO-GO")
    # the small TFT has as many parameters as a fresh one built from the same config
    cfg = MODELS["tft"].config("small", batch_size=4, encoder_length=10)
    assert p["n_parameters"] == sum(x.numel() for x in MODELS["tft"].build(cfg).parameters())
    assert p["activations"] > 0 and sum(p["activations_by_module"].values()) == p["activations"]
    assert p["peak"] >= p["forward_peak"] >= p["live_before_step"]


@pytest.mark.slow
def test_prediction_stands_beside_every_measured_step(tiny_8_10):
    """predict_step ran before each measured step; on the CPU the small presets agree within tolerance."""
    m = json.loads((tiny_8_10 / "measurement.json").read_text())
    res = json.loads((tiny_8_10 / "results.json").read_text())
    rows = {r["step"]: r for r in res["prediction"]}
    assert set(rows) == set(MODELS)
    for name, row in rows.items():
        entry = m["tft"] if name == "tft" else m["ensemble"][name]
        assert entry["predicted"]["n_parameters"] == entry["profile"]["n_parameters"]
        assert row["predicted peak (MB)"] == entry["predicted"]["peak"] / MB
        assert abs(row["peak error (%)"]) <= 10, row
    assert "Predicted before running" in (tiny_8_10 / "report.md").read_text()


@pytest.mark.slow
def test_second_opinion_covers_every_model(tiny_8_10):
    """torch.profiler's categories for each model's step; what it cannot place is a share of its peak."""
    m = json.loads((tiny_8_10 / "measurement.json").read_text())
    df = tables.unexplained_by_model(records.Measurement.from_dict(m)).set_index("model")
    assert set(df.index) == set(MODELS)
    for name, row in df.iterrows():
        so = m["second_opinion"] if name == "tft" else m["ensemble"][name]["second_opinion"]
        if not so.get("available"):
            continue
        assert row["unexplained (%)"] == round(100 * so["at_peak"].get("unknown", 0) / so["peak_bytes"], 2)
        assert 0 <= row["unexplained (%)"] <= 100


@pytest.mark.slow
def test_ensemble_is_in_the_results_and_checked(tiny_8_10):
    m = json.loads((tiny_8_10 / "measurement.json").read_text())
    res = json.loads((tiny_8_10 / "results.json").read_text())
    assert set(m["ensemble"]) == set(MODELS) - {"tft"}
    total = sum(v["profile"]["peak"] for v in m["ensemble"].values()) + m["tft"]["profile"]["peak"]
    check = next(c for c in res["checks"] if c["name"] == "ensemble fits in 4 GB")
    assert check["measured"] == total  # on the CPU there is no CUDA context to add


@pytest.mark.slow
def test_report_is_self_contained_with_the_verdict_on_top_and_no_code(tiny_8_10):
    html = (tiny_8_10 / "report.html").read_text()
    res = json.loads((tiny_8_10 / "results.json").read_text())
    assert f"Verdict: {res['verdict']}" in html
    assert html.index("Verdict:") < html.index("Checks against the budgets")
    assert "data:image/png;base64" in html          # charts inline
    assert "notebook.measure_or_load" not in html   # no code cells
    assert "seed (MB)" in html and "why they differ" in html
    md = (tiny_8_10 / "report.md").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(figures) >= 3 and all((tiny_8_10 / f).is_file() for f in figures)


def _cli(*args, env_reports):
    env = {**os.environ, "FOXLIB_REPORTS": str(env_reports), "FOXLIB_PROGRESS": "0", "FOXLIB_ALLOW_DIRTY": "1"}
    return subprocess.run([sys.executable, "-m", "foxlib", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


@pytest.mark.slow
def test_unknown_wave_fails_naming_valid_ones_and_writes_nothing(tmp_path):
    r = _cli("report", "--wave", "8.99", env_reports=tmp_path)
    assert r.returncode == 2
    assert "unknown wave '8.99'; valid waves: 8.10, 8.11, 8.12, 8.13" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_parameter_fails_naming_valid_ones_and_writes_nothing(tmp_path, capsys):
    """The command's own code (foxlib.run.cli.main), in this process: the entry point `python -m foxlib` is
    test_unknown_wave_fails_naming_valid_ones_and_writes_nothing's."""
    from foxlib.run.cli import main
    assert main(["report", "--wave", "8.10", "-p", "batch=8", "--reports-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter(s) batch" in err and "batch_size (int, default 32)" in err
    assert main(["report", "--wave", "8.10", "-p", "batch_size=big", "--reports-dir", str(tmp_path)]) == 2
    assert "must be int" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cuda_where_there_is_none_is_a_clear_error(tmp_path, capsys):
    import torch

    from foxlib.run.cli import main
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: device=cuda is no error here")
    assert main(["report", "--wave", "8.10", "-p", "device=cuda", "--reports-dir", str(tmp_path)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_failed_run_leaves_the_last_good_report_untouched(tiny_8_10, tmp_path, capsys):
    before = {p.name: p.read_bytes() for p in tiny_8_10.iterdir() if p.is_file()}
    # a measurement that passes the checks but lacks what a later cell reads fails in the notebook
    m = json.loads((tiny_8_10 / "measurement.json").read_text())
    del m["tft"]["config"]["encoder_length"]
    (tmp_path / "m.json").write_text(json.dumps(m))
    from foxlib.run.cli import main  # the command's code in this process; the notebook runs in its kernel
    assert main(["report", "--wave", "8.10", "-p", f"measurements={tmp_path / 'm.json'}", "--allow-dirty",
                 "--reports-dir", str(tiny_8_10.parents[2])]) == 1
    err = capsys.readouterr().err
    assert "failed in notebook cell" in err and "encoder_length" in err
    assert "previous report" in err
    after = {p.name: p.read_bytes() for p in tiny_8_10.iterdir() if p.is_file()}
    assert after == before
    assert (tiny_8_10.parents[1] / f".{tiny_8_10.name}.failed" / "notebook.ipynb").is_file()
    assert not list(tiny_8_10.parents[1].glob("*.partial"))


@pytest.mark.slow
def test_waves_lists_status(tiny_8_10, capsys):
    from foxlib.run.cli import main
    assert main(["waves", "--reports-dir", str(tiny_8_10.parents[2])]) == 0
    out = capsys.readouterr().out
    assert "8.10  TFT GPU memory profile" in out and "cpu: " in out
    assert "8.14" in out


# ----------------------------------------------------------------------------- typed records and the two peaks

COMMITTED = [(wave, device) for wave in ("8.10", "8.11") for device in ("cpu", "h200")]


def _record(wave, device):
    from foxlib.waves.wave_8_10 import records as records_8_10
    from foxlib.waves.wave_8_11 import records as records_8_11
    module = records_8_10 if wave == "8.10" else records_8_11
    data = committed(device, wave)
    return module, data, module.Measurement.from_dict(data)


def test_every_committed_8_10_and_8_11_measurement_loads_as_a_record():
    """The reports are re-rendered from these files: each loads at this schema version, and its peaks are model
    peaks, the workspaces kept apart (workspace_bytes, on CUDA only); that it writes back byte for byte is
    test_validation's check over every committed measurement."""
    for wave, device in COMMITTED:
        module, data, m = _record(wave, device)
        assert m.to_dict()["schema_version"] == module.SCHEMA_VERSION
        raw = ([data["tft"]["profile"]] + [e["profile"] for e in data.get("ensemble", {}).values()] if wave == "8.10"
               else [p for per in data["memory"].values() for p in per.values()])
        typed = ([m.tft.profile] + [e.profile for e in m.ensemble.values()] if wave == "8.10"
                 else [p for per in m.memory.values() for p in per.values()])
        for r, p in zip(raw, typed, strict=True):
            assert p.peak == r["peak"] and p.workspace_bytes == r["workspace_bytes"]
            assert (p.workspace_bytes > 0) == (device == "h200")


def test_a_citation_is_a_record_and_a_malformed_one_is_refused_naming_the_file():
    from foxlib.core.provenance import Citation
    data = committed("h200", "8.10")
    cited = {"path": "reports/h200/wave-8.12/results.json", "revision": "abc1234", "sha256": "0" * 64}
    m = records.Measurement.from_dict({**data, "depends_on": [cited]})
    assert m.depends_on == (Citation(**cited),) and m.to_dict()["depends_on"] == [cited]
    with pytest.raises(ValueError, match="x.json: a part of this wave 8.10 measurement is malformed"):
        records.Measurement.from_dict({**data, "depends_on": [{"path": "p", "revision": None}]}, "x.json")


def slow_fp16(monkeypatch) -> dict:
    """target_state_kernels as measuring.slow_target writes it on a CPU whose fp16 product took 33x fp32's time (a
    hand value on the conversion path's side of SLOW_PATH_RATIO): the committed CPU page is whichever CPU measured it
    last, with or without fp16 kernels."""
    from foxlib.memory.cpu_support import KernelSpeed
    from foxlib.waves.wave_8_10 import measuring
    monkeypatch.setattr(measuring, "kernel_speed", lambda precision: KernelSpeed(precision, 33.0, "AVX512"))
    return measuring.slow_target(torch.device("cpu"), "predict").to_dict()


def test_the_bare_context_and_the_kernel_probe_are_records_the_tables_read(monkeypatch):
    """bare_context (foxlib.memory.cuda.BareContext: the H200's) and target_state_kernels (records.SlowKernels: a
    CPU's without fp16 kernels, slow_fp16) typed on load, None where not measured, and read by the tables by
    attribute."""
    from foxlib.memory.cuda import BareContext
    _, gpu_data, gpu = _record("8.10", "h200")
    _, cpu_data, _ = _record("8.10", "cpu")
    assert gpu.bare_context == BareContext(641_728_512, 2_097_152, 639_631_360,
                                           "this process found in NVML's process list", 33_553_920)
    assert gpu.bare_context.to_dict() == gpu_data["bare_context"] and gpu.target_state_kernels is None
    cpu_data = {**cpu_data, "target_state_kernels": slow_fp16(monkeypatch)}
    cpu = records.Measurement.from_dict(cpu_data)
    assert cpu.bare_context is None and isinstance(cpu.target_state_kernels, records.SlowKernels)
    assert cpu.target_state_kernels.to_dict() == cpu_data["target_state_kernels"]
    assert (cpu.target_state_kernels.precision, cpu.target_state_kernels.fast) == ("fp16", False)
    rows = tables.cuda_reconciliation(gpu).set_index("quantity")
    assert rows.loc["bare CUDA context at start", "MB"] == round(639_631_360 / MB, 1)
    assert "bare cuBLAS workspace of one stream measured at start: 33.6 MB" in rows["how"].str.cat()
    assert tables.target_state_note(cpu).startswith("**Predicted, not run**: this CPU has no fp16 matrix-product "
                                                    "kernels (ATen capability AVX512): a fp16 product took 33x")
    assert "(33x ≥ 4x)" in tables.target_state_note(cpu) and tables.target_state_note(gpu) == ""
    # a part's unknown key: refused, the file named
    with pytest.raises(ValueError, match="m.json: .*malformed .*bogus"):
        records.Measurement.from_dict({**gpu_data, "bare_context": {**gpu_data["bare_context"], "bogus": 1}}, "m.json")
    with pytest.raises(ValueError, match="m.json: .*malformed .*reason"):  # a missing key, too
        records.Measurement.from_dict({**cpu_data, "target_state_kernels": {
            k: v for k, v in cpu_data["target_state_kernels"].items() if k != "reason"}}, "m.json")


def test_a_model_writes_source_and_note_only_where_its_step_was_predicted_not_run(monkeypatch):
    """harness.measure_step.ModelMeasurement through Sparse's rule, on the CPU's committed 8.10: a measured
    model has neither source nor note (their defaults), a target-state model predicted instead (on a CPU without
    fp16 kernels, slow_fp16) has both; its stored prediction typed (a profile, or why it failed); an unknown key is
    refused."""
    from foxlib.harness.measure_step import ModelMeasurement
    from foxlib.memory.profile import MemoryProfile
    from foxlib.memory.tolerances import FailedPrediction
    data = committed("cpu", "8.10")
    measured, target = data["ensemble"]["dqn"], data["target_state"]["tft"]
    instead = {**{k: v for k, v in target.items() if k not in ("source", "note")}, "source": "predicted",
               "note": slow_fp16(monkeypatch)["reason"]}
    m, p = ModelMeasurement.from_dict(measured), ModelMeasurement.from_dict(instead)
    assert (m.source, m.note, m.learning_rate) == ("measured", "", 0.00025) and isinstance(m.predicted, MemoryProfile)
    assert list(m.to_dict()) == ["model", "title", "config", "learning_rate", "profile", "predicted", "second_opinion"]
    assert m.to_dict() == measured and p.to_dict() == instead and p.predicted_only and p.predicted is None
    assert list(p.to_dict())[-2:] == ["source", "note"] and p.note.startswith("this CPU has no fp16 matrix-product")
    failed = ModelMeasurement.from_dict({**measured, "predicted": {"error": "prediction failed: boom"}})
    assert failed.predicted == FailedPrediction("prediction failed: boom")
    assert failed.to_dict()["predicted"] == {"error": "prediction failed: boom"}
    with pytest.raises(TypeError, match="bogus"):
        ModelMeasurement.from_dict({**measured, "bogus": 1})


def test_a_record_of_a_newer_schema_or_another_wave_is_refused():
    import pytest
    for wave, device in COMMITTED[:2]:
        module, data, _ = _record(wave, device)
        with pytest.raises(ValueError, match="schema"):
            module.Measurement.from_dict({**data, "schema_version": module.SCHEMA_VERSION + 1})
        with pytest.raises(ValueError, match="is not a wave 8.1"):
            module.Measurement.from_dict({**data, "wave": "8.12"})
        with pytest.raises(ValueError, match="schema_version 1"):  # a file from before the schema's version
            module.Measurement.from_dict({k: v for k, v in data.items() if k != "schema_version"})


def test_one_figure_one_value_across_8_10_and_8_11_on_the_h200():
    """The TFT check reads the model peak; 8.11's per-model table gives 8.10's model peaks; the ensemble
    check, table and chart give one process peak = model peaks + workspaces once + context once."""
    import matplotlib
    matplotlib.use("Agg")
    from foxlib.report import charts
    from foxlib.core.budgets import load_budgets
    budgets = load_budgets()
    from foxlib.waves.wave_8_10 import analysis as analysis_8_10, tables as tables_8_10
    from foxlib.waves.wave_8_11 import tables as tables_8_11
    _, _, m810 = _record("8.10", "h200")
    _, _, m811 = _record("8.11", "h200")
    checks = {c.name: c for c in analysis_8_10.checks(m810, budgets)}
    assert checks["TFT peak training memory"].measured == m810.tft.profile.peak
    e = analysis_8_10.ensemble_totals(m810)
    assert e.process_peak == sum(e.model_peaks.values()) + e.workspace_bytes + e.context_bytes
    assert e.workspace_bytes == max(mm.profile.workspace_bytes for mm in m810.models.values())
    assert checks["ensemble fits in 4 GB"].measured == e.process_peak
    table = tables_8_10.ensemble_table(m810, budgets).set_index("model")
    for name, peak in e.model_peaks.items():
        assert table.loc[name, "model peak (MB)"] == round(peak / MB, 1)
    total = next(i for i in table.index if i.startswith("process peak"))
    assert table.loc[total, "process peak (MB)"] == round(e.process_peak / MB, 1)
    fig = charts.ensemble({k: v.profile for k, v in m810.models.items()}, e,
                          budgets["ensemble"]["card_mb"], "t")
    card = budgets["ensemble"]["card_mb"] * MB
    assert f"{e.process_peak / MB:,.0f} MB = {100 * e.share_of(card):.1f} %" in fig.axes[0].get_title()
    assert table.loc["share of a 4 GB card (%)", "process peak (MB)"] == round(100 * e.share_of(card), 1)
    models = tables_8_11.models_table(m811).set_index("model")
    for name in ("dqn", "ppo", "mamba2", "tft"):
        # two runs of the same step: the same figure, to the allocator's noise
        assert abs(models.loc[name, "fp32 model peak (MB)"] - table.loc[name, "model peak (MB)"]) <= 1.0


def test_the_target_state_is_predicted_on_a_cpu_without_fp16_kernels_unless_asked_to_measure(monkeypatch):
    import torch

    from foxlib.memory.cpu_support import KernelSpeed
    from foxlib.waves.wave_8_10 import measuring
    for ratio, choice, device, predicted in [(31.9, "predict", "cpu", True), (0.5, "predict", "cpu", False),
                                             (31.9, "measure", "cpu", False), (31.9, "predict", "cuda", False)]:
        monkeypatch.setattr(measuring, "kernel_speed", lambda p, r=ratio: KernelSpeed(p, r, "AVX2"))
        slow = measuring.slow_target(torch.device(device), choice)
        assert bool(slow) == predicted
        if predicted:
            assert slow.ratio == 31.9 and "no fp16 matrix-product kernels" in slow.reason
            assert slow.to_dict() == {"precision": "fp16", "ratio": 31.9, "capability": "AVX2", "fast": False,
                                      "slow_path_ratio": 4.0, "reason": slow.reason}  # as kernel_speed gives it


@pytest.mark.parametrize("choice, source", [("predict", "predicted"), ("measure", "measured")])
def test_target_state_is_predicted_only_where_the_cpu_has_no_fp16_kernels(monkeypatch, choice, source):
    """The seed's target state on a CPU whose fp16 products run the conversion path (cpu_support.kernel_speed)
    is predicted, said so in its record, its figure's name, its table and the ledger; elsewhere, or asked to
    measure, it runs."""
    from foxlib.core import seed_claims
    from foxlib.core.budgets import load_budgets
    from foxlib.memory.cpu_support import KernelSpeed
    from foxlib.report import ledger
    from foxlib.waves.wave_8_10 import measuring
    monkeypatch.setattr(measuring, "kernel_speed", lambda p: KernelSpeed(p, 31.9, "AVX2"))
    params = {**TINY_8_10, "second_opinion": False, "target_state_slow": choice}
    m = measuring.measure(**params)
    assert type(m) is records.Measurement  # typed and checked, with the header
    assert (m.wave, m.measure_parameters, m.device.type, m.device.short) == ("8.10", params, "cpu", "cpu")
    assert {v.source for v in m.target_state.values()} == {source} and set(m.target_state) == set(m.models)
    assert all(v.profile.peak > 0 for v in m.target_state.values())
    predicted = source == "predicted"
    assert m.target_state_predicted == predicted and bool(m.target_state_kernels) == predicted
    assert records.Measurement.from_dict(m.to_dict()) == m  # the record round-trips
    figures = {f.key: f.value for f in analysis.named_figures(m)}
    key = "ensemble/small/fp16-checkpoint/" + ("predicted_process_peak" if predicted else "process_peak")
    assert figures[key] == sum(v.profile.peak for v in m.target_state.values())  # the CPU: the models' sum
    table = tables.target_state_table(m, load_budgets())
    assert table.columns[1] == ("predicted model peak (MB)" if predicted else "model peak (MB)")
    assert ("Predicted, not run" in tables.target_state_note(m)) == predicted
    if predicted:
        assert "no fp16 matrix-product kernels" in m.target_state["tft"].note
        judge = dict((c.name, c.judge) for c in ledger.CLAIMS)["Ensemble target (FP16 + checkpointing)"]
        figs = {k.replace("/small/", "/seed/"): {"value": v} for k, v in figures.items()}
        text, verdict = judge(figs)
        assert text.startswith("predicted (not run: no kernels)")
        total_mb = figures[key] / MB  # the small presets: far under the seed's 932 MB, judged as such
        assert verdict == ("holds" if abs(total_mb - sum(seed_claims.ENSEMBLE_TARGET_MB.values())) <= 93.2 else "wrong")


def test_an_unknown_target_state_choice_is_an_error():
    with pytest.raises(ValueError, match="predict, measure"):
        measuring.measure(**TINY_8_10, target_state_slow="guess")


def test_measure_keeps_a_measurement_it_cannot_read_back_and_names_it(tmp_path, monkeypatch, capsys):
    """`foxlib measure` checks what the wave measured as a render will read it: a measurement that would fail
    there fails here, naming the file, which is kept as measured (a long GPU run is not lost)."""
    from foxlib.run.cli import main
    data = committed("cpu", "8.10")
    monkeypatch.setenv("FOXLIB_ALLOW_DIRTY", "1")
    header = ("wave", "measured_at", "measure_parameters")  # results.measures'
    measures = results.measures(records.Measurement)  # the wave's data, as its measure() is made of it
    monkeypatch.setattr(measuring, "measure", measures(lambda **kw: {k: v for k, v in data.items() if k not in header}
                                                       | {"tft": None}))
    out = tmp_path / "wave-8.10.json"
    assert main(["measure", "--wave", "8.10", "-p", "preset=small", "--out", str(out), "--force"]) == 2
    kept = json.loads(out.read_text())
    assert str(out) in capsys.readouterr().err and kept["tft"] is None
    assert kept["wave"] == "8.10" and kept["measure_parameters"]["preset"] == "small"  # with its header
    # a measurement that reads back is written as its record writes it (to_dict: measurement.json's order)
    monkeypatch.setattr(measuring, "measure", measures(lambda **kw: {k: v for k, v in data.items() if k not in header}))
    assert main(["measure", "--wave", "8.10", "-p", "preset=small", "--out", str(out), "--force"]) == 0
    written = json.loads(out.read_text())
    assert list(written) == list(data) and {k: v for k, v in written.items() if k not in header} == {
        k: v for k, v in data.items() if k not in header}
    assert written["measure_parameters"] == kept["measure_parameters"]
    assert "measurements" not in kept["measure_parameters"]  # the runner's own parameters are not the wave's
