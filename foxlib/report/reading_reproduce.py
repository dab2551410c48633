"""The "Reproduce this report" section (foxlib/report/reading.py's closing): the commands, the
measured-at and rendered-at revisions, the device, the software and the data set behind a report,
from its results.json; and the parameters a run changed from the wave notebook's defaults
(tests/test_reading.py)."""
from __future__ import annotations

import html
import shlex
from typing import Any, Mapping

from foxlib.report.reading_block import Block, code_html

RUN_PARAMETERS = ("measurements", "output_dir", "budgets_file")  # steer the run, not the measurement


def default_parameters(wave: str) -> dict[str, Any]:
    """The wave notebook's declared parameters with their default values."""
    from foxlib.core.parameters import read_parameters
    from foxlib.core.critical_path import get_wave
    return {name: p.default for name, p in read_parameters(get_wave(wave).notebook).items()}


def changed_parameters(parameters: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The measurement parameters that differ from the notebook's defaults (run parameters left out;
    a parameter the notebook no longer declares is kept: it was part of the run)."""
    return {k: v for k, v in parameters.items()
            if k not in RUN_PARAMETERS and (k not in defaults or defaults[k] != v)}


def _value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def commands(results: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> list[str]:
    """The shell commands that reproduce a report from its results.json.

    Measured on this machine: `make report WAVE=<N> P="name=value ..."` (or the equivalent
    `python -m foxlib report` where a value holds a space, which make's P cannot carry). Measured
    elsewhere (the measurements parameter: a GPU run): `python -m foxlib measure` there, then
    `make render` here with the measurement file in the MEASURED folder."""
    wave = results["wave"]
    params = dict(results.get("parameters") or {})
    if defaults is None:
        defaults = default_parameters(wave)
    changed = changed_parameters(params, defaults)
    budgets = params.get("budgets_file") or ""
    assignments = [f"{k}={_value(v)}" for k, v in changed.items()]
    if budgets:
        assignments.append(f"budgets_file={budgets}")
    flags = " ".join(f"-p {shlex.quote(a)}" for a in assignments)
    if params.get("measurements"):
        device = (results.get("device") or {}).get("type", "cuda")
        measure_flags = " ".join(f"-p {shlex.quote(a)}" for a in
                                 [f"{k}={_value(v)}" for k, v in changed.items() if k != "device"]
                                 + [f"device={device}"])
        where = (results.get("device") or {}).get("name") or device
        return [f"python -m foxlib measure --wave {wave} {measure_flags} --out measured/wave-{wave}.json"
                f"   # on the machine to measure ({where})",
                "make render MEASURED=measured   # here: renders every wave-<N>.json in that folder"
                + (f" (this report also used {flags})" if budgets else "")]
    if any(" " in a or "'" in a or '"' in a for a in assignments):
        return [f"python -m foxlib report --wave {wave} {flags}".rstrip()]
    return [f"make report WAVE={wave}" + (f' P="{" ".join(assignments)}"' if assignments else "")]


def revisions(results: Mapping[str, Any]) -> tuple[str, str]:
    """(measured-at, rendered-at) revisions; "not recorded" where results.json has neither the field
    nor (for the measurement) environment.git_revision."""
    env = results.get("environment") or {}
    measured = results.get("measured_at_revision") or env.get("git_revision") or "not recorded"
    rendered = results.get("rendered_at_revision") or "not recorded"
    return str(measured), str(rendered)


def dataset_description() -> str:
    """The data every model uses, with its date range and split, read from foxlib.data.market."""
    from foxlib.data import market as data
    frames = data.load_ohlcv()
    first = next(iter(frames.values()))
    names = {"sp500": "S&P 500", "nasdaq": "NASDAQ"}
    series = " and ".join(names.get(s, s) for s in data.SERIES)
    return (f"{series} daily prices (open, high, low, close, volume) shipped offline with the `arch` package, "
            f"{first.index[0]:%Y-%m-%d} to {first.index[-1]:%Y-%m-%d} ({len(first):,} trading days on both), "
            f"validation from {data.VALIDATION_START:%Y-%m-%d}; the TFT and Mamba-2 forecast the next day's "
            "return from windows of it, DQN and PPO trade in an environment built on it (foxlib/data/trading_env.py).")


def reproduce(results: Mapping[str, Any], defaults: Mapping[str, Any] | None = None,
              dataset: str | None = None) -> Block:
    """"Reproduce this report": commands, measured-at and rendered-at revisions, device, environment,
    data set. `results` is results.json's dict (wave, parameters, device, environment and, where
    present, measured_at_revision / rendered_at_revision); `dataset` defaults to dataset_description()."""
    cmds = commands(results, defaults)
    measured, rendered = revisions(results)
    dev = results.get("device") or {}
    env = results.get("environment") or {}
    device = dev.get("name", "unknown device") + (f" ({dev['type']})" if dev.get("type") else "")
    stack = ", ".join(f"{k} {env[k]}" for k in ("python", "torch", "cuda", "driver") if env.get(k))
    dataset = dataset or dataset_description()
    facts = [("measured at revision", measured), ("rendered at revision", rendered), ("device", device),
             ("software", stack or "not recorded"), ("data", dataset)]
    md = ("**Reproduce this report**\n\n```sh\n" + "\n".join(cmds) + "\n```\n\n"
          + "\n".join(f"- {k}: {v}" for k, v in facts))
    rows = "".join(f"<li>{html.escape(k)}: {code_html(html.escape(v))}</li>" for k, v in facts)
    return Block('<div class="foxlib-reproduce"><b>Reproduce this report</b>'
                 f"<pre>{html.escape(chr(10).join(cmds))}</pre><ul>{rows}</ul></div>", md)


def differences(wave: str, parameters: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> str:
    """"batch_size=8 (default 32), preset=small (default seed)": what a run changed, or ""."""
    defaults = default_parameters(wave) if defaults is None else defaults
    changed = changed_parameters(parameters, defaults)
    return ", ".join(f"{k}={_value(v)}" + (f" (default {_value(defaults[k])})" if k in defaults else "")
                     for k, v in changed.items())
