"""Canonical reports only from canonical runs; one run at a time per report; OS errors as one line.
The fast tests fake the notebook's execution (no papermill); the slow one renders a real variant."""
import errno
import json
from pathlib import Path

import pytest

from foxlib.report import index

from foxlib.run import runner
from foxlib.run.cli import main
from foxlib.core.config import ROOT
from foxlib.core.parameters import (CPU_DEFAULTS, CPU_8_12_STRATEGIES, defaults_for, read_parameters, run_kind,
                               variant_name)
from foxlib.core.critical_path import WAVES
from tests.conftest import committed, committed_path

COMMITTED = ROOT / "reports"


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(autouse=True)
def _allow_dirty(monkeypatch):
    monkeypatch.setenv("FOXLIB_ALLOW_DIRTY", "1")


def test_the_committed_reports_are_canonical():
    """Every committed report's parameters are its device's defaults (CPU: CPU_DEFAULTS)."""
    for path in sorted(COMMITTED.glob("*/wave-*/results.json")):
        res = json.loads(path.read_text())
        m = json.loads((path.parent / "measurement.json").read_text())
        kind = run_kind(res["wave"], res["parameters"], m["measure_parameters"], m["device"]["type"])
        assert kind.variant is None, (path, kind.differs)


def test_cpu_defaults_of_8_12_are_the_eager_fp32_strategies_16_bit_alone_and_the_graphs():
    from foxlib.waves.wave_8_12.strategies import STRATEGIES, select
    # the fast path's strategies (step options inside a CUDA graph) are graph-only: skipped on a CPU either way
    # the batched VSNs are for a launch-bound GPU: not in the CPU's default set
    expected = [s.name for s in STRATEGIES.values()
                if (s.precision == "fp32" or not s.overrides) and s.options.is_default and "vsn_batched" not in s.overrides]
    assert [s.name for s in select(CPU_8_12_STRATEGIES)] == expected
    declared = read_parameters(WAVES["8.12"].notebook)
    cpu, cuda = defaults_for("8.12", declared, "cpu"), defaults_for("8.12", declared, "cuda")
    assert cuda["strategies"] == "all" and cuda["timing_repeats"] == 10
    assert cpu["timing_repeats"] == 6 and cpu["timing_warmup"] == 1 and cpu["strategies"] == CPU_8_12_STRATEGIES
    assert CPU_DEFAULTS["8.11"] == {"timing_repeats": 6}


@pytest.mark.parametrize("overrides, name", [
    ({}, None),
    ({"device": "cpu"}, None),  # the device picks the folder, it is not a variant
    ({"snapshot_path": "/tmp/s.pickle"}, None),
    ({"preset": "small"}, "preset-small"),
    ({"batch_size": 8, "preset": "small"}, "preset-small_batch_size-8"),
    ({"ensemble": False}, "ensemble-false"),
])
def test_variant_names(overrides, name):
    declared = read_parameters(WAVES["8.10"].notebook)
    values = {**defaults_for("8.10", declared, "cpu"), **overrides}
    assert run_kind("8.10", values, None, "cpu").variant == name


def test_variant_names_are_short_safe_and_distinct():
    a = variant_name({"strategies": {"value": "fp32 (baseline);bf16;batch ÷4", "default": "all"}})
    b = variant_name({"strategies": {"value": "fp32 (baseline);bf16;batch 4", "default": "all"}})
    c = variant_name({"budgets_file": {"value": "/tmp/../../etc/b.toml", "default": ""}})
    for n in (a, b, c):
        assert len(n) <= 40 and "/" not in n and ".." not in n.replace("...", "") and n == n.strip("-_.")
    assert a != b


def test_device_defaults_are_not_a_variant_but_other_values_are():
    declared = read_parameters(WAVES["8.12"].notebook)
    cpu = defaults_for("8.12", declared, "cpu")
    assert run_kind("8.12", cpu, None, "cpu").variant is None
    # the GPU's defaults on the CPU, and the CPU's on a GPU: variants
    assert run_kind("8.12", defaults_for("8.12", declared, "cuda"), None, "cpu").variant
    assert run_kind("8.12", cpu, None, "cuda").variant
    # the same set of strategies, spelt out: not a variant
    from foxlib.waves.wave_8_12.strategies import STRATEGIES
    cuda = defaults_for("8.12", declared, "cuda")
    assert run_kind("8.12", {**cuda, "strategies": ";".join(STRATEGIES)}, None, "cuda").variant is None
    assert run_kind("8.12", {**cuda, "strategies": "bf16;fp32 (baseline)"}, None, "cuda").variant


def test_a_measurement_made_with_other_parameters_renders_as_a_variant():
    m = committed("cpu", "8.10")
    params = defaults_for("8.10", read_parameters(WAVES["8.10"].notebook), "cpu")
    assert run_kind("8.10", {**params, "measurements": "m.json"}, m["measure_parameters"], "cpu").variant is None
    m["measure_parameters"]["batch_size"] = 8
    assert run_kind("8.10", {**params, "measurements": "m.json"}, m["measure_parameters"], "cpu").variant == "batch_size-8"


def test_plan_files_a_variant_under_variants(tmp_path):
    p = runner.plan("8.10", {"preset": "small", "device": "cpu"}, tmp_path)
    assert p.final == tmp_path.resolve() / "cpu" / "variants" / "wave-8.10-preset-small"
    assert p.lock.parent == tmp_path.resolve() / "cpu" and p.lock.name == ".wave-8.10-preset-small.lock"
    c = runner.plan("8.10", {"device": "cpu"}, tmp_path)
    assert c.final == tmp_path.resolve() / "cpu" / "wave-8.10" and c.kind.variant is None


def test_the_index_shows_canonical_reports_only(tmp_path):
    for where, verdict in (("cpu/wave-8.10", "NO-GO"), ("cpu/variants/wave-8.10-preset-small", "GO")):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "results.json").write_text(json.dumps(
            {"wave": "8.10", "verdict": verdict, "device": {"name": "x"}, "generated_at": "t"}))
    assert index.collect(tmp_path)["8.10"]["cpu"]["verdict"] == "NO-GO"
    page = index.write_index(tmp_path).read_text()
    path_section = page.split('id="path"')[1].split("</table>")[0]
    assert "variants/" not in path_section and ">GO<" not in path_section and ">NO-GO<" in path_section
    assert "variants/wave-8.10-preset-small/report.html" in page.split('id="variants"')[1]  # listed on its own
    lines = index.status_lines(tmp_path)
    assert "cpu: NO-GO" in lines[0] and any("variants/wave-8.10-preset-small" in line for line in lines)


def test_the_index_shows_every_revision_short(tmp_path):
    full = "0e92f84a9cf3bef89e4d54bcc7b5821c6ea635bc"
    assert index.short_revision(full) == "0e92f84" and index.short_revision("a29f3a4") == "a29f3a4"
    assert index.short_revision("?") == "?" and index.short_revision("z" * 40) == "z" * 40  # not a hex revision
    (tmp_path / "cpu" / "wave-8.10").mkdir(parents=True)
    (tmp_path / "cpu" / "wave-8.10" / "results.json").write_text(json.dumps(
        {"wave": "8.10", "verdict": "GO", "device": {"name": "x"}, "generated_at": "t",
         "measured_at_revision": full, "rendered_at_revision": "a29f3a4"}))
    page = index.write_index(tmp_path).read_text()
    assert "measured at 0e92f84, rendered at a29f3a4" in page and full not in page


# ----------------------------------------------------------------------------- one run at a time

def test_a_second_run_of_the_same_report_says_one_is_running(tmp_path, capsys):
    source = committed_path("cpu", "8.10")
    p = runner.plan("8.10", {"measurements": str(source)}, tmp_path)
    with runner._locked(p):
        before = _snapshot(tmp_path)
        assert main(["report", "--wave", "8.10", "-p", f"measurements={source}", "--reports-dir", str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert "wave 8.10 is already running" in err and f"pid {__import__('os').getpid()}" in err
        assert "nothing was changed" in err and err.count("\n") == 1
        assert _snapshot(tmp_path) == before
    with runner._locked(p):  # released: the next run goes ahead
        pass


def _fake_papermill(monkeypatch, fail_render=None):
    """papermill.execute_notebook writing what a wave's notebook writes, without a kernel."""
    import papermill

    from foxlib.report import render as render_module

    def execute(source, output, parameters, **kwargs):
        out = Path(parameters["output_dir"])
        (out / "results.json").write_text(json.dumps({"wave": "8.10", "verdict": "GO", "device": {"name": "cpu"},
                                                      "generated_at": "2026-12-03T00:00:00+00:00"}))
        Path(output).write_text("{}")
    monkeypatch.setattr(papermill, "execute_notebook", execute)
    monkeypatch.setattr(runner, "ensure_kernel", lambda: None)

    def render(executed, out_dir, title):
        if fail_render:
            raise fail_render
        (out_dir / "report.html").write_text("new")
    monkeypatch.setattr(render_module, "render", render)


def _canonical(tmp_path):
    final = tmp_path / "cpu" / "wave-8.10"
    final.mkdir(parents=True)
    (final / "report.html").write_text("old")
    return final


def test_a_run_replaces_only_its_report_and_leaves_no_work_folder(tmp_path, monkeypatch):
    _fake_papermill(monkeypatch)
    final = _canonical(tmp_path)
    (tmp_path / "cpu" / ".wave-8.10.abc.partial").mkdir()  # a killed run's leftovers: removed under the lock
    (tmp_path / "cpu" / ".wave-8.10.partial").mkdir()
    source = committed_path("cpu", "8.10")
    assert runner.run_wave("8.10", {"measurements": str(source)}, tmp_path, progress=False) == final.resolve()
    assert (final / "report.html").read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "cpu").iterdir()) == [".wave-8.10.lock", "wave-8.10"]


@pytest.mark.parametrize("error, says", [
    (OSError(errno.ENOSPC, "No space left on device", "report.md"), "No space left on device (report.md): the disk is full"),
    (PermissionError(errno.EACCES, "Permission denied", "figures"), "Permission denied (figures): make the reports"),
    (OSError(errno.EROFS, "Read-only file system", "x"), "Read-only file system (x): make the reports folder writable"),
])
def test_os_errors_are_one_line_and_leave_nothing_behind(tmp_path, monkeypatch, capsys, error, says):
    _fake_papermill(monkeypatch, fail_render=error)
    final = _canonical(tmp_path)
    source = committed_path("cpu", "8.10")
    assert main(["report", "--wave", "8.10", "-p", f"measurements={source}", "--reports-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert (final / "report.html").read_text() == "old"
    assert sorted(p.name for p in (tmp_path / "cpu").iterdir()) == [".wave-8.10.lock", "wave-8.10"]


def test_a_failed_publish_puts_the_previous_report_back(tmp_path, monkeypatch, capsys):
    _fake_papermill(monkeypatch)
    final = _canonical(tmp_path)
    real = Path.rename

    def rename(self, target):
        if self.name.endswith(".partial"):
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        return real(self, target)
    monkeypatch.setattr(Path, "rename", rename)
    source = committed_path("cpu", "8.10")
    assert main(["report", "--wave", "8.10", "-p", f"measurements={source}", "--reports-dir", str(tmp_path)]) == 1
    assert "the disk is full" in capsys.readouterr().err
    assert (final / "report.html").read_text() == "old"
    assert sorted(p.name for p in (tmp_path / "cpu").iterdir()) == [".wave-8.10.lock", "wave-8.10"]


def test_a_report_folder_that_cannot_be_replaced_is_found_before_the_run(tmp_path, monkeypatch, capsys):
    import tempfile
    _fake_papermill(monkeypatch)
    final = _canonical(tmp_path)
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if Path(dir) == final.resolve():
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real(*args, dir=dir, **kwargs)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    source = committed_path("cpu", "8.10")
    before = _snapshot(tmp_path)
    assert main(["report", "--wave", "8.10", "-p", f"measurements={source}", "--reports-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "cannot be replaced" in err and "chmod -R u+w" in err and err.count("\n") == 1
    assert _snapshot(tmp_path) == before


def test_a_dirty_tree_is_refused_unless_allowed(monkeypatch, tmp_path, capsys):
    from foxlib.core import provenance
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "abc1234+dirty")
    monkeypatch.delenv("FOXLIB_ALLOW_DIRTY")
    source = committed_path("cpu", "8.10")
    args = ["report", "--wave", "8.10", "-p", f"measurements={source}", "--reports-dir", str(tmp_path)]
    assert main(args) == 2
    assert "uncommitted changes (revision abc1234+dirty)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    _fake_papermill(monkeypatch)
    assert main([*args, "--allow-dirty"]) == 0


def test_a_dirty_measurement_is_refused_unless_allowed(monkeypatch, tmp_path):
    from foxlib.core import provenance
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "abc1234")
    m = committed("cpu", "8.10")
    m["environment"]["git_revision"] = "0ld0ne+dirty"
    with pytest.raises(provenance.ProvenanceError, match="measurement: measured from uncommitted changes"):
        provenance.check_tree(False, measurement=m)
    assert provenance.check_tree(True, measurement=m) == "abc1234"


# ----------------------------------------------------------------------------- the real thing

@pytest.mark.slow
def test_a_variant_render_writes_only_its_own_labelled_report(tiny_8_10, tiny_8_10_rendered):
    """A measurement made with other parameters renders as a variant: its own folder, its first screen
    says what differs, the canonical report and the index untouched (the render: conftest's
    tiny_8_10_rendered, into a copy of the committed canonical report and its index)."""
    out, _, reports, before = tiny_8_10_rendered
    assert out == (reports / "cpu" / "variants" / tiny_8_10.name).resolve()
    assert (reports / "cpu" / "wave-8.10" / "report.html").is_file() and (reports / "index.html").is_file()
    after = _snapshot(reports)
    assert {k: v for k, v in after.items() if "variants" not in k.parts and not k.name.endswith(".lock")} == before
    res = json.loads((out / "results.json").read_text())
    assert res["run"]["variant"] == tiny_8_10.name.removeprefix("wave-8.10-")
    assert res["run"]["differs"]["preset"] == {"value": "small", "default": "seed"}
    html = (out / "report.html").read_text()
    first_screen = html[html.index("Verdict:"):][:3000]
    assert "not the canonical report" in first_screen and "preset" in first_screen and "small" in first_screen
    assert "measured at revision" in first_screen and "rendered at" in first_screen


def test_a_render_refuses_parameters_that_would_change_what_was_measured(capsys, tmp_path):
    """Rendering the committed CPU 8.10 measurement (batch 32) with batch_size=16 would show batch 32 under a
    batch-16 run's parameters: refused, naming both values; the measured value itself, or a render-only
    parameter, is accepted."""
    source = committed_path("cpu", "8.10")
    with pytest.raises(ValueError, match=r"batch_size=16 \(measured with 32\).*measure again"):
        runner.plan("8.10", {"measurements": str(source), "batch_size": "16"})
    assert runner.plan("8.10", {"measurements": str(source), "batch_size": "32"}).params["batch_size"] == 32
    assert runner.plan("8.10", {"measurements": str(source), "budgets_file": ""}).kind.variant is None
    # one rule with the variants' (parameters.same_value): the device a measurement was made on ("auto") named
    assert runner.plan("8.10", {"measurements": str(source), "device": "cpu"}).kind.variant is None
    from foxlib.waves.wave_8_12.strategies import select  # "all" measured, every strategy named: one set
    every = ";".join(s.name for s in select("all"))
    assert runner.plan("8.12", {"measurements": str(committed_path("h200", "8.12")), "strategies": every}).params
    assert main(["report", "--wave", "8.10", "-p", f"measurements={source}", "-p", "preset=small",
                 "--reports-dir", str(tmp_path)]) == 2
    assert "preset='small' (measured with 'seed')" in capsys.readouterr().err
