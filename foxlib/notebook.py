"""The few calls every wave notebook makes, so notebooks stay thin."""
from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import pandas as pd

from foxlib import results
from foxlib.budgets import Check, load_budgets, verdict
from foxlib.parameters import read_parameters
from foxlib.waves import get_wave

# parameters that steer the run rather than the measurement
RUN_PARAMETERS = ("measurements", "output_dir", "budgets_file")


def parameters(wave_id: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """The wave's declared parameters, with the values they have in the notebook's namespace."""
    return {name: namespace[name] for name in read_parameters(get_wave(wave_id).notebook)}


def measure(wave_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run the wave's measurement here with the notebook's parameters."""
    kwargs = {k: v for k, v in params.items() if k not in RUN_PARAMETERS}
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    data = get_wave(wave_id).module.measure(**kwargs)
    return {"wave": wave_id, "measured_at": started, "measure_parameters": kwargs, **data}


def measure_or_load(wave_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """The measurement: loaded from `params["measurements"]` when given (a GPU run made with
    `python -m foxlib measure`), else measured now."""
    if params.get("measurements"):
        data = results.read_json(params["measurements"])
        if data.get("wave") != wave_id:
            raise ValueError(f"{params['measurements']} holds wave {data.get('wave')!r}, not {wave_id}")
        return data
    return measure(wave_id, params)


def budgets(params: dict[str, Any]) -> dict[str, dict[str, float]]:
    return load_budgets(params.get("budgets_file") or None)


def verdict_banner(wave_id: str, checks: list[Check], measurement: dict[str, Any]) -> str:
    """HTML for the top of the report: verdict, device and the failing checks."""
    v = verdict(checks)
    colour = "#1a7f37" if v == "GO" else "#cf222e"
    dev = measurement["device"]
    failed = [c for c in checks if not c.passed]
    lines = "".join(f"<li>{html.escape(c.name)}: {_fmt(c.measured, c.unit)} &gt; limit {_fmt(c.limit, c.unit)}</li>"
                    for c in failed)
    return (f'<div class="foxlib-verdict" style="border:3px solid {colour};padding:12px;border-radius:6px">'
            f'<h2 style="color:{colour};margin:0">Verdict: {v}</h2>'
            f"<p>{len(checks) - len(failed)} of {len(checks)} checks passed · measured on "
            f"<b>{html.escape(dev['name'])}</b> ({html.escape(dev['type'])}) · {measurement.get('measured_at', '')}</p>"
            + (f"<ul>{lines}</ul>" if lines else "") + "</div>")


def _fmt(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / 1e6:,.1f} MB"
    return f"{value:,.3g} {unit}"


def checks_table(checks: list[Check]) -> pd.DataFrame:
    return pd.DataFrame([{"check": c.name, "measured": _fmt(c.measured, c.unit), "limit": _fmt(c.limit, c.unit),
                          "result": "PASS" if c.passed else "FAIL", "note": c.note} for c in checks])


def finish(wave_id: str, params: dict[str, Any], measurement: dict[str, Any], checks: list[Check],
           **extra: Any) -> dict[str, Any]:
    """Write results.json and the raw measurement into the output folder (last cell of a wave)."""
    res = results.build(wave_id, params, measurement, checks, **extra)
    out = Path(params.get("output_dir") or ".")
    _keep_snapshot(measurement, params, out)
    results.write_json(out / results.MEASUREMENT_FILE, measurement)
    results.write_json(out / results.RESULTS_FILE, res)
    return res


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


def figure(fig) -> None:
    """Show a chart once, whatever matplotlib backend the kernel has, and free it."""
    import matplotlib.pyplot as plt
    from IPython.display import display
    display(fig)
    plt.close(fig)


SNAPSHOT_FILE = "memory_snapshot.pickle"


def _keep_snapshot(measurement: dict[str, Any], params: dict[str, Any], out: Path) -> None:
    """Copy the CUDA allocator snapshot of the measured step (if one was taken) beside the report.
    A measurement made elsewhere names a path on that machine: look for the file beside it here."""
    import shutil
    snapshot = measurement.get("snapshot") or measurement.get("measure_parameters", {}).get("snapshot_path")
    if not snapshot:
        return
    candidates = [Path(snapshot)]
    if params.get("measurements"):
        candidates.append(Path(params["measurements"]).parent / Path(snapshot).name)
    for path in candidates:
        if path.is_file():
            shutil.copyfile(path, out / SNAPSHOT_FILE)
            return
