"""A wave notebook's parameters, read from its cell tagged `parameters` (plain `name: type = value  # help`
lines of a jupytext py:percent file) with `ast`, no Jupyter: the same validation serves `make report`,
`python -m foxlib measure` on a bare GPU machine and the tests. Unknown names are errors (papermill only warns).
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from foxlib.core import config
from foxlib.core.critical_path import get_wave

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_CELL = re.compile(r"^# %%.*\btags=\[[^\]]*\"parameters\"[^\]]*\].*$", re.M)


class ParameterError(ValueError):
    """An unknown or ill-typed notebook parameter."""


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    default: Any
    help: str


def read_parameters(notebook_py: Path) -> dict[str, Parameter]:
    """The parameters declared in the notebook's `parameters` cell, in order."""
    text = notebook_py.read_text()
    m = _CELL.search(text)
    if not m:
        raise ParameterError(f"{notebook_py} has no cell tagged 'parameters'")
    cell = re.split(r"^# %%", text[m.end():], maxsplit=1, flags=re.M)[0]  # up to the next cell
    lines = cell.splitlines()
    params: dict[str, Parameter] = {}
    for node in ast.parse(cell).body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Name) and node.annotation.id in _TYPES):
            raise ParameterError(f"{notebook_py}: parameters cell line {node.lineno} is not "
                                 "`name: int|float|str|bool = value  # help`")
        help_text = lines[node.lineno - 1].partition("#")[2].strip()
        params[node.target.id] = Parameter(node.target.id, node.annotation.id, ast.literal_eval(node.value), help_text)
    return params


def coerce(param: Parameter, value: Any) -> Any:
    """`value` (a string from the command line, or a Python value) as the parameter's type."""
    kind = _TYPES[param.type]
    if isinstance(value, str) and kind is not str:
        try:
            value = _BOOLS[value.strip().lower()] if kind is bool else kind(value.strip())
        except (KeyError, ValueError):
            raise ParameterError(f"parameter {param.name!r} must be {param.type} ({param.help}), "
                                 f"got {value!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not kind:
        raise ParameterError(f"parameter {param.name!r} must be {param.type} ({param.help}), "
                             f"got {type(value).__name__} {value!r}")
    if kind is float and not math.isfinite(value):
        raise ParameterError(f"parameter {param.name!r} must be a finite number ({param.help}), got {value!r}")
    return value


def resolve(declared: dict[str, Parameter], overrides: dict[str, Any],
            defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Defaults (the notebook's, then `defaults`: the device's, see `device_defaults`) with
    `overrides` applied; ParameterError for an unknown name or a bad value."""
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        close = {u: difflib.get_close_matches(u, declared, n=1) for u in unknown}
        hint = "".join(f"; {u}: did you mean {m[0]}?" for u, m in close.items() if m)
        listing = "; ".join(f"{p.name} ({p.type}, default {p.default!r}): {p.help}" for p in declared.values())
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}{hint}; valid parameters: {listing}")
    return ({name: p.default for name, p in declared.items()}
            | {k: v for k, v in (defaults or {}).items() if k in declared}
            | {name: coerce(declared[name], value) for name, value in overrides.items()})


def split_parameters(text: str) -> list[str]:
    """'a=1 b="x y"' -> ["a=1", "b=x y"]: a line of assignments split as a shell would (make's P)."""
    try:
        return shlex.split(text or "")
    except ValueError as exc:
        raise ParameterError(f"parameters {text!r} cannot be split ({exc}): close every quote, e.g. "
                             "P=\"strategies='fp32 (baseline);bf16' timing_repeats=3\"") from None


def parse_assignments(items: list[str]) -> dict[str, str]:
    """["name=value", ...] from the command line -> {name: "value"}."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"parameter {item!r} is not of the form name=value")
        name, value = item.split("=", 1)
        out[name.strip()] = value
    return out


def to_assignments(values: Mapping[str, Any]) -> list[str]:
    """{name: value} -> ["name=value", ...], parse_assignments' inverse (booleans as true/false, as coerce reads
    them)."""
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()]


def p_flags(assignments: Iterable[str]) -> str:
    """["name=value", ...] -> "-p name=value ...", each quoted for a shell (`python -m foxlib report/measure`)."""
    return " ".join(f"-p {shlex.quote(a)}" for a in assignments)


# ------------------------------------------------------------------ defaults that depend on the device
# A wave's canonical report comes from its default parameters. Some defaults are sized for a GPU and
# would take hours on a 2-core CPU; on the CPU these values replace the notebook's (whatever `device`
# was asked: auto on a machine without CUDA, or cpu). They are the values the CPU reports were made with.
CPU_8_12_STRATEGIES = ";".join((  # the eager fp32 strategies, fp16 and bf16, and the CUDA-graph ones
    "fp32 (baseline)", "fp16", "bf16", "checkpoint VSNs", "checkpoint blocks", "checkpoint all",
    "memory-efficient path", "batch ÷4", "sequence ÷2", "efficient + checkpoint blocks", "checkpoint variables",
    "efficient + checkpoint variables", "efficient + checkpoint VSN variables",
    "efficient + checkpoint VSN variables (8 per chunk)", "CUDA graph", "memory-efficient path + CUDA graph",
    "efficient + checkpoint VSN variables + CUDA graph",
    "efficient + checkpoint VSN variables (8 per chunk) + CUDA graph"))  # (skipped on the CPU, and said so)
# Timing rounds: 6, the fewest whose interval of a median can cover it with 95 % (foxlib.harness.timing:
# ROUNDS_FOR_CONFIDENCE; 2 rounds give 50 %, 5 give 93.75 %).
CPU_DEFAULTS: dict[str, dict[str, Any]] = {
    "8.11": {"timing_repeats": 6},
    # a 16-bit precision combined with checkpointing costs minutes per step on the CPU: not in the default set
    # independent claim runs cost minutes per run on two cores: the CPU's claims rest on its one run (said so)
    "8.12": {"timing_repeats": 6, "timing_warmup": 1, "strategies": CPU_8_12_STRATEGIES, "claim_runs": 0},
}

# parameters that steer a run (where it reads and writes, the budgets it is judged by), not what it measures
RUN_PARAMETERS = ("measurements", "output_dir", "budgets_file")
# parameters left out when a run is compared with the defaults, so they never make a variant: where it reads and
# writes, and the device (a run's device is its folder); budgets_file is compared (other limits, other verdicts)
NOT_COMPARED = ("measurements", "output_dir", "snapshot_path", "timeline_dir", "checkpoint_path", "device")
VARIANT_NAME_MAX = 40  # characters of a variant's folder name after "wave-<N>-"


def device_defaults(wave_id: str, device_type: str) -> dict[str, Any]:
    """The parameter values that replace the notebook's defaults on this device type ("cpu", "cuda")."""
    return dict(CPU_DEFAULTS.get(wave_id, {})) if device_type == "cpu" else {}


def defaults_for(wave_id: str, declared: dict[str, Parameter], device_type: str) -> dict[str, Any]:
    """Every declared parameter's default on this device type."""
    return resolve(declared, {}, device_defaults(wave_id, device_type))


def same_value(name: str, value: Any, default: Any) -> bool:
    """Whether `value` of parameter `name` is `default` as a run sees it (a variant's rule; a render's refusal)."""
    if name == "strategies" and isinstance(value, str) and isinstance(default, str):
        # "all" and an explicit list of every strategy are one set: the wave that has strategies reads them
        select = get_wave("8.12").part("strategies").select
        try:
            return [s.name for s in select(value)] == [s.name for s in select(default)]
        except ValueError:
            return False
    if name == "budgets_file":
        norm = lambda v: str(Path(v).resolve()) if v else str(config.BUDGETS_FILE.resolve())  # noqa: E731
        return norm(value) == norm(default)
    return value == default and type(value) is type(default)


def differences(wave_id: str, declared: dict[str, Parameter], values: dict[str, Any],
                device_type: str) -> dict[str, dict[str, Any]]:
    """{name: {"value", "default"}} for each parameter of `values` that is not its default on this
    device type (run parameters excluded: see NOT_COMPARED), in the notebook's order."""
    base = defaults_for(wave_id, declared, device_type)
    return {name: {"value": values[name], "default": base[name]} for name in declared
            if name in values and name not in NOT_COMPARED and not same_value(name, values[name], base[name])}


def _slug(value: Any) -> str:
    text = re.sub(r"[^a-z0-9.]+", "-", str(value).lower())
    return re.sub(r"[-.]*-[-.]*|\.{2,}", "-", text).strip("-.") or "empty"  # no "..", no "-.-"


def variant_name(differs: dict[str, dict[str, Any]]) -> str | None:
    """A short, filesystem-safe name for a run that differs from the defaults (None: it does not):
    `name-value` pairs joined by `_`; cut and suffixed with a hash of the exact values when long or
    when a value had characters a folder name cannot hold."""
    if not differs:
        return None
    name = "_".join(f"{name}-{_slug(d['value'])}" for name, d in differs.items())
    lossy = any(_slug(d["value"]) != str(d["value"]).lower() for d in differs.values())
    if len(name) > VARIANT_NAME_MAX or lossy:
        digest = hashlib.sha1(json.dumps({k: d["value"] for k, d in differs.items()}, sort_keys=True,
                                         ensure_ascii=False).encode()).hexdigest()[:8]
        name = name[:VARIANT_NAME_MAX - 9].rstrip("-_.") + "-" + digest
    return name


@dataclass(frozen=True)
class RunKind:
    """What a run is against its defaults: the device type whose defaults apply, those of them that
    are not the notebook's, and the parameters that differ (a variant when any do)."""
    device_type: str
    device_defaults: dict[str, Any] = field(default_factory=dict)
    differs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def variant(self) -> str | None:
        return variant_name(self.differs)

    def to_dict(self) -> dict[str, Any]:
        return {"device_type": self.device_type, "device_defaults": self.device_defaults,
                "variant": self.variant, "differs": self.differs}


def run_kind(wave_id: str, params: dict[str, Any], measure_parameters: dict[str, Any] | None,
             device_type: str) -> RunKind:
    """Canonical or variant: `params` as run, the measurement's own parameters (`measure_parameters`, a
    measurement file made elsewhere; None: measured in this run) taking precedence, against the defaults of
    `device_type`."""
    declared = read_parameters(get_wave(wave_id).notebook)
    values = {**params, **(measure_parameters or {})}
    return RunKind(device_type, device_defaults(wave_id, device_type),
                   differences(wave_id, declared, values, device_type))
