"""Running a wave: check everything (foxlib.run.preflight) before anything is written, execute its notebook
with papermill, render, publish. Defaults (those of its device) make the canonical report
`reports/<device>/wave-<N>/`; other parameters a variant, `reports/<device>/variants/wave-<N>-<name>/`.

Each run works in its own hidden folder beside the report (`.<label>.<unique>.partial`) while holding a lock
(`fcntl.flock` on `.<label>.lock`): a second run of the same report stops at once. Only a complete report
replaces the previous one, by renaming; a failed run leaves it as it was and keeps the failed notebook in
`.<label>.failed/`.
"""
from __future__ import annotations

import datetime as dt
import errno
import fcntl
import logging
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foxlib.core import config, provenance, results
from foxlib.core.critical_path import Wave, get_wave
from foxlib.core.parameters import (NOT_COMPARED, RunKind, device_defaults, read_parameters, resolve, run_kind,
                                    same_value)
from foxlib.core.schema import WaveMeasurement
from foxlib.report.index import write_index
from foxlib.run import preflight

log = logging.getLogger("foxlib")


class WaveFailed(RuntimeError):
    """A wave's notebook raised; the previous report is untouched."""


class WaveBusy(RuntimeError):
    """Another run of the same report holds its lock."""


class ReportsNotWritable(RuntimeError):
    """The report folder cannot be replaced (read-only, permission): found before the run."""


def ensure_kernel() -> None:
    """Register the `foxlib` Jupyter kernel for this interpreter's environment if it is missing."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    with suppress(NoSuchKernel):
        if Path(KernelSpecManager().get_kernel_spec(config.KERNEL_NAME).argv[0]).exists():
            return
    from ipykernel.kernelspec import install
    install(kernel_name=config.KERNEL_NAME, display_name="foxlib", prefix=sys.prefix)


@dataclass(frozen=True)
class Plan:
    """A run, checked: its wave, parameters, device folder, canonical or variant, and where it goes."""
    wave: Wave
    params: dict[str, Any]
    device: str  # the device's short name: the report's folder under reports/
    kind: RunKind
    reports_dir: Path
    checked: Any = None
    """What preflight.check resolved of the parameters (8.13: its TFT), for preflight.check_memory."""
    measurement: WaveMeasurement | None = None
    """The measurement file rendered (the measurements parameter), checked and typed; None: measured in the run."""

    @property
    def label(self) -> str:  # wave-<N>[-<variant name>]
        return f"wave-{self.wave.id}" + (f"-{self.kind.variant}" if self.kind.variant else "")

    @property
    def device_dir(self) -> Path:
        return self.reports_dir / self.device

    @property
    def final(self) -> Path:
        return self.device_dir / "variants" / self.label if self.kind.variant else self.device_dir / self.label

    @property
    def failed(self) -> Path:
        return self.device_dir / f".{self.label}.failed"

    @property
    def lock(self) -> Path:
        return self.device_dir / f".{self.label}.lock"


def plan(wave_id: str, overrides: dict[str, Any] | None = None, reports_dir: Path | None = None) -> Plan:
    """Every check that needs no run: parameters (with the device's defaults), budgets, measurement file."""
    from foxlib.memory.devices import resolve_device, short_name
    wave = get_wave(wave_id)
    declared = read_parameters(wave.notebook)
    overrides = dict(overrides or {})
    first = resolve(declared, overrides)  # the notebook's defaults: enough to find the device
    measurement = None
    if first.get("measurements"):
        path = Path(first["measurements"]).expanduser().resolve()
        overrides["measurements"] = str(path)
        measurement = preflight.check_measurement(wave.id, path)
        device_type, device = measurement.device.type, measurement.device.short
    else:
        dev = resolve_device(first.get("device", "auto"))
        device_type, device = dev.type, short_name(dev)
    params = resolve(declared, overrides, device_defaults(wave.id, device_type))
    if measurement is not None:
        made = measurement.measure_parameters
        changed = {k: made[k] for k in overrides
                   if k in made and k not in NOT_COMPARED and not same_value(k, params[k], made[k])}
        if changed:  # a render cannot change what was measured: refused, not silently ignored
            given = ", ".join(f"{k}={params[k]!r} (measured with {v!r})" for k, v in changed.items())
            raise ValueError(f"{given}: the measurement {path} was made with other values, and rendering it cannot "
                             "change what was measured; drop these parameters, or measure again with them "
                             f"(python -m foxlib measure --wave {wave.id} ...)")
    checked = preflight.check(wave.id, params)
    kind = run_kind(wave.id, params, measurement.measure_parameters if measurement else None, device_type)
    return Plan(wave, params, device, kind, Path(reports_dir or config.REPORTS_DIR).resolve(), checked, measurement)


def _probe_writable(folder: Path) -> None:
    """ReportsNotWritable unless files can be created and removed in `folder` and every folder in it (what
    replacing a report needs): checked before the run, so that nothing is left half-replaced."""
    for d in [folder, *[p for p in folder.rglob("*") if p.is_dir()]]:
        try:
            fd, probe = tempfile.mkstemp(prefix=".foxlib-probe-", dir=d)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise ReportsNotWritable(
                f"{folder} cannot be replaced: {d} is not writable ({exc.strerror}); make it writable "
                f"(chmod -R u+w {folder}) or write elsewhere with --reports-dir") from None


@contextmanager
def _locked(plan: Plan):
    """Hold the report's lock for the run; WaveBusy at once when another run holds it."""
    plan.device_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(plan.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise WaveBusy(f"wave {plan.wave.id} is already running into {plan.final} ({holder}); wait for it to "
                           "finish and run again — nothing was changed") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {dt.datetime.now().isoformat(timespec='seconds')}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race with a run opening it)


def _remove_leftovers(plan: Plan) -> None:
    """Work and old folders of this report left by runs that were killed (we hold the lock: none is running)."""
    for suffix in ("*.partial", "*.old", "partial", "old"):
        for p in plan.final.parent.glob(f".{plan.label}.{suffix}"):
            shutil.rmtree(p, ignore_errors=True)


def _publish(work: Path, plan: Plan) -> None:
    """Replace the report by `work`, by renaming; the previous one is back in place if that fails."""
    final = plan.final
    final.parent.mkdir(parents=True, exist_ok=True)
    old = final.parent / (work.name.removesuffix(".partial") + ".old")
    if final.exists():
        final.rename(old)
    try:
        work.rename(final)
    except OSError:
        if old.exists() and not final.exists():
            old.rename(final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def run_wave(wave_id: str, overrides: dict[str, Any] | None = None, reports_dir: Path | None = None,
             progress: bool = True, *, allow_dirty: bool | None = None, force: bool | None = None) -> Path:
    """Run wave `wave_id` with parameter `overrides`; return the folder of its new report. allow_dirty and force
    (run even when the predicted peak exceeds the free memory) default to FOXLIB_ALLOW_DIRTY and FOXLIB_FORCE."""
    allow_dirty = config.env_flag("FOXLIB_ALLOW_DIRTY") if allow_dirty is None else allow_dirty
    force = config.env_flag("FOXLIB_FORCE") if force is None else force
    p = plan(wave_id, overrides, reports_dir)
    provenance.check_tree(allow_dirty, measurement=p.measurement)
    if p.final.exists():
        _probe_writable(p.final)
    if memory := preflight.check_memory(p.wave.id, p.params, force, p.checked):
        log.info("wave %s: predicted peak %.1f MB (%s); %s MB free (%s)", p.wave.id, memory["predicted_bytes"] / 1e6,
                 memory["predicted"], f"{memory['free_bytes'] / 1e6:,.1f}" if memory["free_bytes"] else "?",
                 memory["free"])
    with _locked(p):
        _remove_leftovers(p)
        res = _execute(p, progress)
    if not p.kind.variant:
        write_index(p.reports_dir)
    log.info("wave %s: %s — %s", p.wave.id, res["verdict"], p.final / "report.html")
    return p.final


def _execute(p: Plan, progress: bool) -> dict[str, Any]:
    import jupytext
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    from foxlib.report.render import render  # imported only to render: a bare GPU machine measures without nbconvert

    # beside the report it becomes (a variant's under variants/): its links, e.g. back to the index, hold once moved
    p.final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{p.label}.", suffix=".partial", dir=p.final.parent))
    params = {**p.params, "output_dir": str(work)}
    ensure_kernel()
    what = f"variant {p.kind.variant}" if p.kind.variant else "canonical"
    try:
        source = work / "input.ipynb"
        jupytext.write(jupytext.read(p.wave.notebook), source)
        log.info("wave %s (%s) on %s, %s: executing %s", p.wave.id, p.wave.title, p.device, what,
                 p.wave.notebook.name)
        try:
            papermill.execute_notebook(str(source), str(work / "notebook.ipynb"), parameters=params,
                                       kernel_name=config.KERNEL_NAME, progress_bar=progress,
                                       stderr_file=sys.stderr if progress else None,  # the kernel's progress bars
                                       cwd=str(config.ROOT))
        except PapermillExecutionError as exc:
            kept = ""
            with suppress(OSError):
                shutil.rmtree(p.failed, ignore_errors=True)
                work.rename(p.failed)
                kept = f"; the failed notebook is {p.failed / 'notebook.ipynb'}"
            raise WaveFailed(
                f"wave {p.wave.id} failed in notebook cell {exc.cell_index} "
                f"(`{exc.source.strip().splitlines()[0] if exc.source.strip() else ''}` ...): "
                f"{exc.ename}: {exc.evalue}. The previous report in {p.final} is untouched{kept}") from None
        except DeadKernelError:
            raise WaveFailed(f"wave {p.wave.id}: the notebook's kernel died (most likely the machine ran out of "
                             f"memory: make the run smaller). The previous report in {p.final} is untouched") from None
        source.unlink()
        res = results.read_json(work / results.RESULTS_FILE)
        title = f"foxlib wave {p.wave.id}: {p.wave.title} ({p.device})" + \
            (f" — variant {p.kind.variant}" if p.kind.variant else "")
        render(work / "notebook.ipynb", work, title)
        _publish(work, p)
        shutil.rmtree(p.failed, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # interrupted or failed before publishing
    return res


def os_error_line(exc: OSError) -> str:
    """An OSError as one line that says what to do."""
    where = f" ({exc.filename})" if exc.filename else ""
    hint = ("the disk is full: free some space and run again" if exc.errno == errno.ENOSPC else
            "make the reports folder writable, or write elsewhere with --reports-dir"
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else "the previous reports are untouched")
    return f"{exc.strerror or exc}{where}: {hint}"
