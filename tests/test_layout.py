"""The package layout's rules (README, "Where things are"): imports point down the layers, never up
and never sideways between waves; no private name (a leading underscore) is imported from another file."""
from __future__ import annotations

import ast
from pathlib import Path


FOXLIB = Path(__file__).resolve().parent.parent / "foxlib"
# lowest first: a package may import its own modules and those of the packages before it
LAYERS = ("core", "data", "memory", "models", "harness", "waves", "report", "run")


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "foxlib" else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every foxlib import in the file, nested (lazy) imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("foxlib")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("foxlib"):
            if node.module == "foxlib":
                found += [(node.lineno, f"foxlib.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def violations(root: Path = FOXLIB) -> list[str]:
    """Every import that points up a layer or sideways from one wave to another."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        parts = rel.with_suffix("").parts  # ("foxlib", package, ...)
        if len(parts) < 3:  # foxlib/__main__.py, foxlib/__init__.py: above every layer
            continue
        here = parts[1]
        if here not in LAYERS:
            bad.append(f"{rel}: package {here!r} is not in the layers {LAYERS}")
            continue
        wave_here = parts[2] if here == "waves" and len(parts) > 3 else None
        for line, module in _imports(path):
            there = _package(module)
            if there is None:
                continue
            if there not in LAYERS:
                bad.append(f"{rel}:{line}: imports {module}, outside the layers")
            elif LAYERS.index(there) > LAYERS.index(here):
                bad.append(f"{rel}:{line}: imports {module} ({there} is above {here})")
            elif here == "waves" == there:
                wave_there = module.split(".")[2] if module.count(".") >= 2 else None
                if wave_there and wave_there.startswith("wave_") and wave_here and wave_there != wave_here:
                    bad.append(f"{rel}:{line}: imports {module} (sideways, from {wave_here})")
    return bad


def test_imports_point_down_the_layers():
    assert violations() == []


def test_the_check_catches_an_upward_and_a_sideways_import(tmp_path):
    root = tmp_path / "foxlib"
    for rel, text in {"core/a.py": "from foxlib.run import cli\n",
                      "waves/wave_8_12/x.py": "def f():\n    from foxlib.waves.wave_8_11 import y\n",
                      "waves/wave_8_11/y.py": "from foxlib.harness import recipe\nfrom foxlib.waves import WAVES\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    found = violations(root)
    assert len(found) == 2
    assert "core/a.py:1: imports foxlib.run" in found[0]
    assert "sideways, from wave_8_12" in found[1]


def private_imports(roots) -> list[str]:
    """Every `from foxlib... import _name` (or benchmarks...) in the files under `roots`: a private name is its
    module's own, never another file's."""
    bad = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("foxlib", "benchmarks")):
                    bad += [f"{path}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    return bad


def test_no_private_name_is_imported_from_another_file():
    here = FOXLIB.parent
    assert private_imports([here / "foxlib", here / "benchmarks", here / "tests", here / "notebooks"]) == []


def test_the_private_import_check_catches_one(tmp_path):
    (tmp_path / "a.py").write_text("from foxlib.harness.timing import _sync, median_interval\n")
    assert private_imports([tmp_path]) == [f"{tmp_path / 'a.py'}:1: foxlib.harness.timing._sync"]
