"""Running a wave: check its parameters, execute its notebook with papermill, render, publish.

Nothing is written before the parameters check out. The run happens in a hidden folder beside
the report; only a complete report (executed notebook, results.json, HTML, Markdown) replaces
the previous one, by renaming. A failed run leaves the previous report as it was, keeps the
failed notebook in `.wave-<N>.failed/` and says which cell failed.
"""
from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from foxlib import config, preflight, results
from foxlib.devices import resolve_device, short_name
from foxlib.index import write_index
from foxlib.parameters import read_parameters, resolve
from foxlib.render import render
from foxlib.waves import get_wave

log = logging.getLogger("foxlib")


class WaveFailed(RuntimeError):
    """A wave's notebook raised; the previous report is untouched."""


def ensure_kernel() -> None:
    """Register the `foxlib` Jupyter kernel for this interpreter's environment if it is missing."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try:
        spec = KernelSpecManager().get_kernel_spec(config.KERNEL_NAME)
        if Path(spec.argv[0]).exists():
            return
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install
    install(kernel_name=config.KERNEL_NAME, display_name="foxlib", prefix=sys.prefix)


def device_label(params: dict[str, Any]) -> str:
    """The folder a run's report goes to: that of the measurement's device, or of the device asked for."""
    if params.get("measurements"):
        return results.read_json(params["measurements"])["device"]["short"]
    return short_name(resolve_device(params.get("device", "auto")))


def run_wave(wave_id: str, overrides: dict[str, Any] | None = None, reports_dir: Path | None = None,
             progress: bool = True) -> Path:
    """Run wave `wave_id` with parameter `overrides`; return the folder of its new report."""
    import jupytext
    import papermill
    from papermill.exceptions import PapermillExecutionError

    wave = get_wave(wave_id)
    params = resolve(read_parameters(wave.notebook), dict(overrides or {}))
    if params.get("measurements"):
        params["measurements"] = str(Path(params["measurements"]).resolve())
    preflight.check(wave.id, params)
    device = device_label(params)
    reports_dir = Path(reports_dir or config.REPORTS_DIR).resolve()
    final = reports_dir / device / f"wave-{wave.id}"
    work = reports_dir / device / f".wave-{wave.id}.partial"
    failed = reports_dir / device / f".wave-{wave.id}.failed"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    params["output_dir"] = str(work)
    ensure_kernel()
    try:
        notebook = jupytext.read(wave.notebook)
        source = work / "input.ipynb"
        jupytext.write(notebook, source)
        log.info("wave %s (%s) on %s: executing %s", wave.id, wave.title, device, wave.notebook.name)
        try:
            papermill.execute_notebook(str(source), str(work / "notebook.ipynb"), parameters=params,
                                       kernel_name=config.KERNEL_NAME, progress_bar=progress,
                                       stderr_file=sys.stderr if progress else None,  # the kernel's progress bars
                                       cwd=str(config.ROOT))
        except PapermillExecutionError as exc:
            shutil.rmtree(failed, ignore_errors=True)
            work.rename(failed)
            raise WaveFailed(
                f"wave {wave.id} failed in notebook cell {exc.cell_index} "
                f"(`{exc.source.strip().splitlines()[0] if exc.source.strip() else ''}` ...): "
                f"{exc.ename}: {exc.evalue}. "
                f"The previous report in {final} is untouched; the failed notebook is "
                f"{failed / 'notebook.ipynb'}") from None
        source.unlink()
        res = results.read_json(work / results.RESULTS_FILE)
        render(work / "notebook.ipynb", work, f"foxlib wave {wave.id}: {wave.title} ({device})")
        old = reports_dir / device / f".wave-{wave.id}.old"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        work.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(failed, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # interrupted or failed before publishing
    write_index(reports_dir)
    log.info("wave %s: %s — %s", wave.id, res["verdict"], final / "report.html")
    return final
