"""results.json says where a report comes from: schema 2, the revisions it was measured and rendered
at, the files it depends on (which must still be the ones read); the first screen says so too."""
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from foxlib.run import notebook_cells as notebook

from foxlib.core import provenance, results
from foxlib.core.budgets import Check
from foxlib.core.config import ROOT
from tests.conftest import committed, committed_measurement


@pytest.fixture
def m():
    return committed_measurement("cpu", "8.10")


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "feed123")
    monkeypatch.setattr(provenance, "is_commit", lambda revision, root=None: True)  # the fixtures' made-up revisions


def test_results_carry_schema_revisions_and_dependencies(m, clean, tmp_path):
    cited = tmp_path / "r.json"
    cited.write_text('{"wave": "8.12", "measured_at_revision": "abc"}')
    m = m.to_dict() | {"depends_on": [provenance.cite(cited).to_dict()]}
    res = results.build("8.10", {}, m, [Check.at_most("a", 1, 2, "bytes")])
    assert res["schema_version"] == 2
    assert res["measured_at_revision"] == m["environment"]["git_revision"] and len(res["measured_at_revision"]) >= 7
    assert res["rendered_at_revision"] == "feed123"
    assert res["depends_on"] == [{"path": str(cited.resolve()), "revision": "abc",
                                  "sha256": provenance.sha256_of(cited)}]
    assert res["depends_on"][0] is not m["depends_on"][0] or res["depends_on"] == m["depends_on"]


def test_finish_refuses_a_dependency_that_changed(m, clean, tmp_path):
    cited = tmp_path / "r.json"
    cited.write_text('{"wave": "8.12"}')
    m = dataclasses.replace(m, depends_on=[provenance.cite(cited)])
    cited.write_text('{"wave": "8.12", "recommended": "something else"}')
    out = tmp_path / "out"
    with pytest.raises(provenance.ProvenanceError, match="changed since it was used"):
        notebook.finish("8.10", {"output_dir": str(out)}, m, [Check.at_most("a", 1, 2, "bytes")])
    assert not (out / "results.json").exists()


def test_a_citation_is_a_record_from_cite_to_verify(tmp_path):
    """cite gives a Citation and verify takes Citations: a file's citations are typed once, where they are read."""
    cited = tmp_path / "r.json"
    cited.write_text('{"wave": "8.12", "measured_at_revision": "abc"}')
    c = provenance.cite(cited)
    assert c == provenance.Citation(str(cited.resolve()), "abc", provenance.sha256_of(cited))
    provenance.verify([c])  # unchanged: passes
    cited.write_text('{"wave": "8.12"}')
    with pytest.raises(provenance.ProvenanceError, match="changed since it was used"):
        provenance.verify([c])
    cited.unlink()
    with pytest.raises(provenance.ProvenanceError, match=r"is missing \(revision abc\)"):
        provenance.verify([c])


def test_a_measurement_names_the_files_it_cites_as_citations(m):
    """What finish and preflight verify: the typed measurement's citations, none for a wave that reads none."""
    c = provenance.Citation("reports/cpu/wave-8.12/results.json", "abc", "0" * 64)
    assert dataclasses.replace(m, depends_on=(c,)).citations() == (c,) and m.citations() == ()
    assert committed_measurement("cpu", "8.11").citations() == ()
    cites = committed_measurement("cpu", "8.13").citations()
    assert len(cites) == 1 and isinstance(cites[0], provenance.Citation)


def test_finish_writes_the_run_kind(m, clean, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    params = {"preset": "seed", "batch_size": 32, "output_dir": str(out)}
    res = notebook.finish("8.10", params, m, [Check.at_most("a", 1, 2, "bytes")])
    assert res["run"] == {"device_type": "cpu", "device_defaults": {}, "variant": None, "differs": {}}
    assert json.loads((out / "results.json").read_text())["rendered_at_revision"] == "feed123"
    assert json.loads((out / "measurement.json").read_text()) == committed("cpu", "8.10")


def test_finish_keeps_no_snapshot_where_the_measurement_took_none(m, clean, tmp_path):
    """A CPU run given snapshot_path writes the profiler's CPU events there, and its measurement records no CUDA
    snapshot (""): nothing is copied beside the report as the allocator snapshot."""
    events = tmp_path / "events.json"
    events.write_text("{}")
    cpu_run = dataclasses.replace(m, measure_parameters={**m.measure_parameters, "snapshot_path": str(events)})
    assert cpu_run.snapshot_file() == ""
    out = tmp_path / "out"
    notebook.finish("8.10", {"output_dir": str(out)}, cpu_run, [Check.at_most("a", 1, 2, "bytes")])
    assert (out / "results.json").is_file() and not (out / notebook.SNAPSHOT_FILE).exists()


def test_finish_keeps_the_snapshot_a_published_report_holds_beside_its_measurement(m, clean, tmp_path):
    """A measurement made elsewhere names its snapshot by a path on that machine; rendered from a published report's
    folder, the snapshot lies beside it under the report's name (SNAPSHOT_FILE): it is kept beside the new report."""
    folder = tmp_path / "published"
    folder.mkdir()
    (folder / notebook.SNAPSHOT_FILE).write_bytes(b"snapshot")
    cuda_run = dataclasses.replace(m, snapshot="/root/out/wave-8.10-snapshot.pickle")
    out = tmp_path / "out"
    params = {"output_dir": str(out), "measurements": str(folder / "measurement.json")}
    notebook.finish("8.10", params, cuda_run, [Check.at_most("a", 1, 2, "bytes")])
    assert (out / notebook.SNAPSHOT_FILE).read_bytes() == b"snapshot"


def test_banner_shows_revisions_and_device(m, clean):
    banner = notebook.verdict_banner("8.10", [Check.at_most("a", 1, 2, "bytes")], m)
    assert (f"measured at revision <code>{m.environment.git_revision}</code>, rendered at <code>feed123</code>"
            in banner)
    assert m.device.name and m.device.name in banner
    assert f" · {m.measured_at} · " in banner and "<code>cpu</code>" in banner
    assert "uncommitted" not in banner and "Variant" not in banner


def test_banner_names_the_measured_revision_results_json_names(m, clean, monkeypatch):
    """One definition of the revision a measurement was made at (results.measured_revision), for the typed
    measurement the banner reads as for the data results.json is built from."""
    m = dataclasses.replace(m, environment=dataclasses.replace(m.environment, git_revision="cafe456"))
    assert results.measured_revision(m) == results.measured_revision(m.to_dict()) == "cafe456"
    assert "measured at revision <code>cafe456</code>" in notebook.verdict_banner("8.10", [], m)
    monkeypatch.setattr(results, "measured_revision", lambda measurement: "0ne0def")
    assert "measured at revision <code>0ne0def</code>" in notebook.verdict_banner("8.10", [], m)


def test_banner_says_so_when_made_from_uncommitted_changes(m, monkeypatch):
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "feed123+dirty")
    banner = notebook.verdict_banner("8.10", [Check.at_most("a", 1, 2, "bytes")], m)
    assert "made from uncommitted changes" in banner and "feed123+dirty" in banner
    assert banner.index("uncommitted") < banner.index("</div>")


def test_banner_of_a_variant_says_what_differs(m, clean):
    notebook.parameters("8.10", {**{k: None for k in ("preset", "batch_size", "encoder_length", "precision",
                                                       "device", "seed", "ensemble", "ensemble_preset",
                                                       "snapshot_path", "second_opinion", "target_state", "target_state_slow", "measurements",
                                                       "budgets_file")}, "output_dir": "x"})
    m = dataclasses.replace(m, measure_parameters={**m.measure_parameters, "batch_size": 8})
    banner = notebook.verdict_banner("8.10", [Check.at_most("a", 1, 2, "bytes")], m)
    assert "not the canonical report" in banner and "<b>batch_size</b> = 8 (default 32)" in banner


def test_banner_names_the_cpu_defaults_it_used(clean):
    m = committed_measurement("cpu", "8.11")
    banner = notebook.verdict_banner("8.11", [Check.at_most("a", 1, 2, "bytes")], m)
    assert "Defaults for the CPU" in banner and "timing_repeats = 6" in banner and "not the canonical" not in banner


def test_environment_revision_is_provenances(monkeypatch):
    from foxlib.memory import devices
    monkeypatch.setenv("FOXLIB_GIT_REVISION", "cafe123")
    assert devices.environment().git_revision == "cafe123" == provenance.git_revision()


@pytest.mark.parametrize("revision", ["", "adb0b9e5", "ADB0B9EAC2AAAA34B193768D0479F7B106404A66", "x" * 40])
def test_the_gpu_script_takes_only_a_full_revision_hash(tmp_path, revision):
    """scripts/h200.sh labels every measurement with FOXLIB_GIT_REVISION (the GPU machine's copy has no
    .git): a short or mistyped hash would be a label nobody can check, so it stops before measuring."""
    env = {**os.environ, "OUT": str(tmp_path), "FOXLIB_GIT_REVISION": revision}
    r = subprocess.run(["bash", "scripts/h200.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "all 40 hex digits" in r.stderr
    assert not any(tmp_path.iterdir())  # nothing measured, nothing logged


def test_a_failed_test_stage_fails_the_gpu_script(tmp_path):
    """A failing GPU test stage fails scripts/h200.sh, and run.log (what comes back from the machine) says why."""
    env = {**os.environ, "OUT": str(tmp_path), "FOXLIB_GIT_REVISION": "a" * 40, "WAVES": "none", "PEER": "0",
           "DIAG_EAGER": "0", "CPU_TESTS": "0", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTEST_ADDOPTS": "--no-such-option",  # pytest refuses to start: the stage fails
           "WHEELS": "0"}  # a checkout holding the GPU machine's wheels (.whl/, Python 3.12) does not install them here
    r = subprocess.run(["bash", "scripts/h200.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "FAILED: GPU-tests" in r.stdout
    assert "--no-such-option" in (tmp_path / "run.log").read_text()  # pytest's own error, not only "failed"


def test_the_gpu_script_runs_every_gpu_test_file():
    """Every test file with a CUDA-marked test is in scripts/h200.sh's GPU tests: a file left out is never run."""
    gpu_files = sorted(p.name for p in (ROOT / "tests").glob("test_*.py")
                       if re.search(r"\bpytest\.mark\.cuda\b", p.read_text()))  # this file's own text has none
    script = (ROOT / "scripts" / "h200.sh").read_text()
    start = script.index('stamp "GPU tests"')
    listed = script[start:script.index("CPU_TESTS", start)]
    assert len(gpu_files) >= 8 and [f for f in gpu_files if f"tests/{f}" not in listed] == []


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def test_a_revision_is_told_a_commit_only_where_the_repository_has_it(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f").write_text("x")
    _git(repo, "add", "f")
    _git(repo, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert provenance.is_commit(head, repo) is True and provenance.is_commit(head[:7], repo) is True
    assert provenance.is_commit(head[:7] + "+dirty", repo) is True  # the commit it was dirty from
    assert provenance.is_commit("adb0b9e5", repo) is False and provenance.is_commit("", repo) is False
    outside = tmp_path / "no-repo"
    outside.mkdir()
    assert provenance.is_commit(head, outside) is None  # no repository: cannot be told


def test_a_measurement_naming_no_commit_is_refused_unless_allowed(monkeypatch, tmp_path):
    """A mistyped FOXLIB_GIT_REVISION on the GPU machine labels a measurement with a revision no commit has:
    every render refuses it (waves, peer and throughput pages), as it refuses one from uncommitted changes."""
    from foxlib.report import throughput_page
    monkeypatch.setattr(provenance, "git_revision", lambda root=None: "feed123")
    monkeypatch.setattr(provenance, "is_commit", lambda revision, root=None: revision == "abc1234")
    provenance.check_measured("abc1234", False)
    provenance.check_measured("adb0b9e5", True)
    with pytest.raises(provenance.ProvenanceError, match="names revision adb0b9e5, which is no commit"):
        provenance.check_tree(False, measurement={"measured_at_revision": "adb0b9e5"})
    assert provenance.check_tree(True, measurement={"measured_at_revision": "adb0b9e5"}) == "feed123"
    measured = tmp_path / "throughput.json"
    measured.write_text(json.dumps({"measured_at_revision": "adb0b9e5"}))
    with pytest.raises(provenance.ProvenanceError, match="no commit of this repository"):
        throughput_page.write(measured, tmp_path / "page.md")
    assert not (tmp_path / "page.md").exists()


def test_the_footer_names_the_revision_results_json_was_measured_at():
    """Every notebook's last line comes from its results.json: the measured revision as results.build records it."""
    from foxlib.run import notebook_cells
    res = {"generated_at": "2026-12-04T18:00:00+00:00", "environment": {"torch": "2.13.0", "git_revision": "old"},
           "measured_at_revision": "a" * 40, "verdict": "GO"}
    assert notebook_cells.footer(res) == (f"*Generated 2026-12-04T18:00:00+00:00 · torch 2.13.0 · git {'a' * 40} · "
                                          "verdict **GO***")
