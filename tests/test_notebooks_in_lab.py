"""The notebooks as JupyterLab runs them ("Run All": nbclient, no papermill, no runner): the same defaults as
`make report`, files in a scratch folder, nothing written into notebooks/ or reports/, and the first output
saying so (foxlib.run.notebook_cells.parameters)."""
import pytest

from foxlib.core import config
from foxlib.core.critical_path import get_wave
from foxlib.core.parameters import ParameterError, read_parameters
from foxlib.run import notebook_cells as notebook
from tests.conftest import snapshot


def defaults(wave_id):
    return {k: p.default for k, p in read_parameters(get_wave(wave_id).notebook).items()}


def test_a_run_outside_the_runner_takes_the_cpus_defaults_and_a_scratch_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "SCRATCH_DIR", tmp_path / "scratch")
    params, text = notebook.interactive_parameters("8.12", {**defaults("8.12"), "device": "cpu"})
    assert params["timing_repeats"] == 6 and params["timing_warmup"] == 1  # CPU_DEFAULTS["8.12"]
    assert params["output_dir"] == str(tmp_path / "scratch" / "wave-8.12")
    assert "with the defaults `make report` uses" in text and "`timing_repeats` = 6" in text
    assert str(tmp_path / "scratch" / "wave-8.12") in text and "nothing is written into `notebooks/`" in text


def test_a_value_the_user_changed_is_kept_checked_and_named(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "SCRATCH_DIR", tmp_path)
    params, text = notebook.interactive_parameters("8.12", {**defaults("8.12"), "device": "cpu", "timing_repeats": 7})
    assert params["timing_repeats"] == 7 and params["timing_warmup"] == 1
    assert "a variant: `timing_repeats` = 7 (default 6)" in text
    with pytest.raises(ParameterError, match="timing_repeats"):
        notebook.interactive_parameters("8.12", {**defaults("8.12"), "timing_repeats": "many"})


def test_the_runner_s_parameters_are_taken_as_they_are(tmp_path):
    namespace = {**defaults("8.10"), "output_dir": str(tmp_path)}
    assert notebook.parameters("8.10", namespace) == namespace


@pytest.mark.slow
@pytest.mark.parametrize("name, wave_id", [("explore", None), ("wave-8.10", "8.10")])
def test_run_all_in_jupyterlab_leaves_notebooks_and_reports_as_they_were(tmp_path, monkeypatch, name, wave_id):
    """Each notebook with its own defaults, executed by nbclient from notebooks/ as JupyterLab executes it."""
    import jupytext
    import nbclient

    from foxlib.run.runner import ensure_kernel
    ensure_kernel()
    monkeypatch.setenv("FOXLIB_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.setenv("MPLBACKEND", "agg")
    before = {d: snapshot(d) for d in (config.NOTEBOOKS_DIR, config.ROOT / "reports")}
    nb = jupytext.read(config.NOTEBOOKS_DIR / f"{name}.py")
    nbclient.NotebookClient(nb, kernel_name=config.KERNEL_NAME, timeout=600,
                            resources={"metadata": {"path": str(config.NOTEBOOKS_DIR)}}).execute()
    assert {d: snapshot(d) for d in before} == before
    if wave_id is None:
        return
    outputs = [c.outputs for c in nb.cells if c.cell_type == "code" and c.outputs]
    first = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs[0])
    out = tmp_path / "scratch" / f"wave-{wave_id}"
    assert "**Run here, not by `make report`.**" in first and str(out) in first
    assert "with the defaults `make report` uses" in first
    import json
    res = json.loads((out / "results.json").read_text())
    assert res["wave"] == wave_id and res["run"]["variant"] is None and res["verdict"] in ("GO", "NO-GO")
    assert (out / "measurement.json").is_file()


@pytest.mark.parametrize("wave_id", ["8.10", "8.11", "8.12", "8.13"])
def test_the_note_for_jupyterlab_users_is_in_the_notebook_not_the_report(wave_id):
    import jupytext

    from foxlib.report.render import NOTEBOOK_ONLY, for_readers
    nb = jupytext.read(get_wave(wave_id).notebook)
    [note] = [c for c in nb.cells if "Opened in JupyterLab" in c.source]
    assert note.cell_type == "markdown" and note.metadata["tags"] == [NOTEBOOK_ONLY]
    assert f"`scratch/wave-{wave_id}/`" in note.source and f"`make report WAVE={wave_id}`" in note.source
    assert not any("Opened in JupyterLab" in c.source for c in for_readers(nb).cells)
