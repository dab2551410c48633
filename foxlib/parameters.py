"""A wave notebook's parameters: read from its `parameters` cell, and user overrides checked.

The notebooks live as jupytext py:percent files; the cell tagged `parameters` holds plain
`name: type = value  # help` lines. Reading it with `ast` needs no Jupyter at all, so the
same validation serves `make report`, `python -m foxlib measure` on a bare GPU machine, and
the tests. papermill only warns about unknown names: here they are errors.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
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
    body = text[m.end():]
    nxt = re.search(r"^# %%", body, re.M)
    cell = body[: nxt.start()] if nxt else body
    lines = cell.splitlines()
    params: dict[str, Parameter] = {}
    for node in ast.parse(cell).body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Name) and node.annotation.id in _TYPES):
            raise ParameterError(f"{notebook_py}: parameters cell line {node.lineno} is not "
                                 "`name: int|float|str|bool = value  # help`")
        line = lines[node.lineno - 1]
        help_text = line.split("#", 1)[1].strip() if "#" in line else ""
        params[node.target.id] = Parameter(node.target.id, node.annotation.id,
                                           ast.literal_eval(node.value), help_text)
    return params


def coerce(param: Parameter, value: Any) -> Any:
    """`value` (a string from the command line, or a Python value) as the parameter's type."""
    kind = _TYPES[param.type]
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        if kind is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
        else:
            try:
                return kind(text)
            except ValueError:
                pass
        raise ParameterError(f"parameter {param.name!r} must be {param.type} ({param.help}), got {value!r}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not kind:
        raise ParameterError(f"parameter {param.name!r} must be {param.type} ({param.help}), "
                             f"got {type(value).__name__} {value!r}")
    return value


def resolve(declared: dict[str, Parameter], overrides: dict[str, Any]) -> dict[str, Any]:
    """Defaults with `overrides` applied; ParameterError for an unknown name or a bad value."""
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        listing = "; ".join(f"{p.name} ({p.type}, default {p.default!r}): {p.help}" for p in declared.values())
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; valid parameters: {listing}")
    values = {name: p.default for name, p in declared.items()}
    for name, value in overrides.items():
        values[name] = coerce(declared[name], value)
    return values


def parse_assignments(items: list[str]) -> dict[str, str]:
    """["name=value", ...] from the command line -> {name: "value"}."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"parameter {item!r} is not of the form name=value")
        name, value = item.split("=", 1)
        out[name.strip()] = value
    return out
