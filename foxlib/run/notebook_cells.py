"""The few calls every wave notebook makes, so notebooks stay thin."""
from __future__ import annotations

import gc
import html
from pathlib import Path
from typing import Any

import pandas as pd

from foxlib.core import config, provenance, results
from foxlib.core.budgets import Check, load_budgets, verdict
from foxlib.core.critical_path import get_wave
from foxlib.core.parameters import RUN_PARAMETERS, read_parameters, run_kind as parameters_run_kind
from foxlib.core.schema import WaveMeasurement
from foxlib.report.reading import format_value

# the parameters of the wave this kernel runs (set by `parameters`, read by the banner and `finish`)
_RUN: dict[str, Any] = {}


def settle_imports() -> None:
    """Move the objects alive after the imports (about 400,000) to the garbage collector's permanent
    generation, so that every gc.collect before a profiled step scans only what the run creates (wave 8.10's
    tiny measurement on 2 cores: 8.5 s instead of 12 s). Only cycles among frozen objects are never
    collected, and none holds a tensor: nothing has been measured yet."""
    gc.collect()
    gc.freeze()


def parameters(wave_id: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """The wave's declared parameters, with their values in the notebook's namespace (called after the
    notebook's imports: settle_imports). Run without foxlib's runner (no `output_dir`: JupyterLab's "Run
    All"), the values `make report` would use and a scratch folder (interactive_parameters), said on screen
    and put in the namespace."""
    from IPython.display import Markdown, display
    params = {name: namespace[name] for name in read_parameters(get_wave(wave_id).notebook)}
    if not params.get("output_dir"):
        params, text = interactive_parameters(wave_id, params)
        namespace.update(params)
        display(Markdown(text))
    _RUN.update(wave=wave_id, params=dict(params))  # both of its keys replaced
    settle_imports()
    return params


def interactive_parameters(wave_id: str, values: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """For a notebook run outside the runner: (parameters, what the run will do, as Markdown). A value that
    differs from the notebook's default is the user's choice; the rest is what `make report` takes (the same
    plan: foxlib.run.runner.plan). The files go to SCRATCH_DIR/wave-<N>/, never notebooks/ or reports/."""
    from foxlib.run.runner import plan
    declared = read_parameters(get_wave(wave_id).notebook)
    run = plan(wave_id, {k: v for k, v in values.items() if k != "output_dir" and v != declared[k].default})
    out = config.SCRATCH_DIR / f"wave-{wave_id}"
    params = {**run.params, "output_dir": str(out)}
    kind, device = run.kind, run.kind.device_type.upper()
    applied = "; ".join(f"`{k}` = {v!r}" for k, v in kind.device_defaults.items() if k not in kind.differs)
    differs = ", ".join(f"`{k}` = {d['value']!r} (default {d['default']!r})" for k, d in kind.differs.items())
    what = f"a variant: {differs}" if differs else "with the defaults `make report` uses"
    lines = [f"**Run here, not by `make report`.** Wave {wave_id} on the {device}, {what}"
             + (f"; the {device}'s own defaults applied: {applied}" if applied else "") + ".",
             f"Its results.json and measurement.json go to the scratch folder `{out}`: nothing is written into "
             f"`notebooks/` or `reports/`. `make report WAVE={wave_id}` writes the report."]
    return params, "  \n".join(lines)


def run_kind(wave_id: str, measurement: WaveMeasurement, params: dict[str, Any] | None = None):
    """foxlib.core.parameters.run_kind of this run, on the device the measurement was made on; `params` default: those
    `parameters` kept for this wave."""
    if params is None:
        params = _RUN.get("params", {}) if _RUN.get("wave") == wave_id else {}
    return parameters_run_kind(wave_id, params, measurement.measure_parameters, measurement.device.type)


def _value(v: Any) -> str:
    return html.escape(repr(v) if isinstance(v, str) else str(v))


def measure(wave_id: str, params: dict[str, Any], keep: Path | None = None) -> WaveMeasurement:
    """The wave's measure() with the notebook's parameters but the runner's own (RUN_PARAMETERS), the imports settled
    first (settle_imports): its records.Measurement, checked, the data kept at `keep` if refused
    (foxlib.core.results.measures)."""
    settle_imports()
    kwargs = {k: v for k, v in params.items() if k not in RUN_PARAMETERS}
    return get_wave(wave_id).part("measuring").measure(keep=keep, **kwargs)


def measure_or_load(wave_id: str, params: dict[str, Any]) -> WaveMeasurement:
    """The wave's records.Measurement, checked (a ValueError naming what is wrong): the file `params["measurements"]`
    (made by `python -m foxlib measure`) as foxlib.run.preflight.check_measurement reads it, else measured now."""
    if not params.get("measurements"):
        return measure(wave_id, params)
    from foxlib.run.preflight import check_measurement
    return check_measurement(wave_id, params["measurements"])


def budgets(params: dict[str, Any]) -> dict[str, dict[str, float]]:
    return load_budgets(params.get("budgets_file") or None)


def verdict_banner(wave_id: str, checks: list[Check], measurement: WaveMeasurement) -> str:
    """HTML for the top of the report: verdict, device, the revisions it was measured and rendered at (a
    warning when either had uncommitted changes), the failing checks, and for a variant what differs. Reads
    only the header every wave's measurement has (WaveMeasurement)."""
    v = verdict(checks)
    colour = "#1a7f37" if v == "GO" else "#cf222e"
    dev = measurement.device
    failed = [c for c in checks if not c.passed]
    lines = "".join(f"<li>{html.escape(c.name)}: {format_value(c.measured, c.unit)} &gt; limit "
                    f"{format_value(c.limit, c.unit)}</li>" for c in failed)
    measured, rendered = results.measured_revision(measurement), provenance.git_revision()
    measured_html, rendered_html = html.escape(measured or "unknown"), html.escape(rendered or "unknown")
    notes = []
    if not (provenance.is_clean(measured) and provenance.is_clean(rendered)):
        notes.append('<p class="foxlib-dirty" style="color:#9a6700"><b>Not a commit\'s report:</b> made from '
                     f"uncommitted changes (measured at {measured_html}, rendered at {rendered_html}; "
                     "run with --allow-dirty). Its figures may not be reproducible from any revision.</p>")
    kind = run_kind(wave_id, measurement)
    if kind.variant:
        diffs = "; ".join(f"<b>{html.escape(k)}</b> = {_value(d['value'])} (default {_value(d['default'])})"
                          for k, d in kind.differs.items())
        notes.append(f'<p class="foxlib-variant" style="color:#9a6700"><b>Variant <code>{html.escape(kind.variant)}'
                     f"</code>, not the canonical report.</b> It differs from the defaults in: {diffs}.</p>")
    if applied := "; ".join(f"{html.escape(k)} = {_value(v)}" for k, v in kind.device_defaults.items()
                            if k not in kind.differs):
        notes.append(f"<p><small>Defaults for the {html.escape(kind.device_type.upper())} (sized for two cores): "
                     f"{applied}.</small></p>")
    return (f'<div class="foxlib-verdict" style="border:3px solid {colour};padding:12px;border-radius:6px">'
            f'<h2 style="color:{colour};margin:0">Verdict: {v}</h2>'
            f"<p>{len(checks) - len(failed)} of {len(checks)} checks passed · measured on "
            f"<b>{html.escape(dev.name)}</b> ({html.escape(dev.type)}, <code>{html.escape(dev.short)}"
            f"</code>) · {measurement.measured_at} · measured at revision "
            f"<code>{measured_html}</code>, rendered at <code>{rendered_html}</code></p>"
            + "".join(notes) + (f"<ul>{lines}</ul>" if lines else "") + "</div>")


def checks_table(checks: list[Check]) -> pd.DataFrame:
    return pd.DataFrame([{"check": c.name, "measured": format_value(c.measured, c.unit),
                          "limit": format_value(c.limit, c.unit), "result": "PASS" if c.passed else "FAIL",
                          "note": c.note} for c in checks])


def finish(wave_id: str, params: dict[str, Any], measurement: WaveMeasurement, checks: list[Check],
           **extra: Any) -> dict[str, Any]:
    """Write results.json and the measurement (its to_dict(): measurement.json) into the output folder (last cell
    of a wave). The files the measurement cites (depends_on) must still be the ones it read (ProvenanceError)."""
    kind = run_kind(wave_id, measurement, params)
    data = measurement.to_dict()
    res = results.build(wave_id, params, data, checks, run=kind.to_dict(), **extra)
    provenance.verify(measurement.citations())
    out = Path(params.get("output_dir") or config.SCRATCH_DIR / f"wave-{wave_id}")
    out.mkdir(parents=True, exist_ok=True)
    _keep_snapshot(measurement, params, out)
    results.write_json(out / results.MEASUREMENT_FILE, data)
    results.write_json(out / results.RESULTS_FILE, res)
    return res


def footer(res: dict[str, Any]) -> str:
    """The report's last line (Markdown), from its results.json (finish): when it was made, torch, the revision it was
    measured at (results.measured_revision, as results.json holds it) and the verdict."""
    return (f"*Generated {res['generated_at']} · torch {res['environment']['torch']} · "
            f"git {res['measured_at_revision']} · verdict **{res['verdict']}***")


def table(df: pd.DataFrame):
    """A DataFrame as a clean HTML table: no index, missing values as "—", thousands separated."""
    from IPython.display import HTML

    def fmt(x):
        return f"{x:,.1f}" if isinstance(x, float) else str(x)

    def ratio(x):  # ratios near 1 need their second decimal (0.99 is not 1.0)
        return f"{x:,.2f}" if isinstance(x, float) and x == x else ("—" if isinstance(x, float) else str(x))

    formatters = {c: ratio for c in df.columns if "ratio" in str(c) or " / " in str(c)}
    return HTML(df.to_html(index=False, na_rep="—", border=0, classes="foxlib-table", float_format=fmt,
                           formatters=formatters, escape=True))


def figure(fig, caption: str | None = None, alt: str | None = None) -> None:
    """Show a chart once, with alt text and a caption (foxlib.report.captioned), and free it. caption: default
    its title; alt: default read from the chart's title, axes and marks (captioned.describe)."""
    from foxlib.report import captioned
    if caption is None:
        title = fig.get_suptitle() or next((ax.get_title() for ax in fig.axes if ax.get_title()), "Chart")
        caption = f"{title}. Memory in MB = 10^6 bytes."
    captioned.show_figure(fig, caption, alt)


SNAPSHOT_FILE = "memory_snapshot.pickle"


def measurement_dirs(params: dict[str, Any]) -> list[Path]:
    """Where the files a measurement made elsewhere names (paths on that machine) are looked for here, by name:
    beside the measurement file and in its timelines/ (`make render` unpacks 8.12's there); none if measured now."""
    if not params.get("measurements"):
        return []
    folder = Path(params["measurements"]).parent
    return [folder, folder / "timelines"]


def _keep_snapshot(measurement: WaveMeasurement, params: dict[str, Any], out: Path) -> None:
    """Copy the CUDA allocator snapshot of the measured step (if one was taken: WaveMeasurement.snapshot_file)
    beside the report. A measurement made elsewhere names a path on that machine: look for the file beside it here,
    by that name or by the name a published report keeps it under (SNAPSHOT_FILE: rendering from a report's folder)."""
    import shutil
    snapshot = measurement.snapshot_file()
    if not snapshot:
        return
    names = (Path(snapshot).name, SNAPSHOT_FILE)
    for path in [Path(snapshot)] + [folder / name for folder in measurement_dirs(params) for name in names]:
        if path.is_file():
            shutil.copyfile(path, out / SNAPSHOT_FILE)
            return
