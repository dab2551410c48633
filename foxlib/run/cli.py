"""The command line behind `python -m foxlib {report,reports,waves,measure,index}` (see --help)."""
from __future__ import annotations

import argparse
import logging
import sys
from functools import partial
from pathlib import Path

from foxlib.core import config, provenance


def _run_flags(p: argparse.ArgumentParser, parameter_help: str | None = None) -> None:
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE", help=parameter_help)
    p.add_argument("--parameters", default="", metavar="'NAME=VALUE ...'",
                   help="several overrides in one string, split like a shell line (what make's P passes): "
                        "quote a value that holds spaces or ';', e.g. \"strategies='fp32 (baseline);bf16'\"")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run from a tree with uncommitted changes (FOXLIB_ALLOW_DIRTY=1); the report says so")
    p.add_argument("--force", action="store_true",
                   help="run even when the predicted peak exceeds the device's free memory (FOXLIB_FORCE=1)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m foxlib", description="foxlib: the ensemble's memory workbook")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="run one wave's notebook and write its report")
    r.add_argument("--wave", required=True, help="wave id, e.g. 8.10")
    _run_flags(r, "override a notebook parameter (repeatable); other than the defaults: a variant, "
                  "written to reports/<device>/variants/wave-<N>-<name>/")
    r.add_argument("--reports-dir", type=Path, default=None, help=f"default: {config.REPORTS_DIR}")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    a = sub.add_parser("reports", help="run every built wave in dependency order, then the index page")
    _run_flags(a, "override a parameter in every wave that has it")
    a.add_argument("--reports-dir", type=Path, default=None)
    a.add_argument("--quiet", action="store_true")
    sub.add_parser("waves", help="list the waves with their titles and status").add_argument(
        "--reports-dir", type=Path, default=None)
    m = sub.add_parser("measure", help="measure a wave without Jupyter and write the measurement JSON "
                                       "(for a GPU machine; render it later with report -p measurements=FILE)")
    m.add_argument("--wave", required=True)
    _run_flags(m)
    m.add_argument("--out", type=Path, required=True, help="the measurement JSON to write")
    sub.add_parser("index", help="rewrite reports/index.html").add_argument("--reports-dir", type=Path, default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
                        format="%(message)s", stream=sys.stderr)
    from foxlib.memory import NonFiniteLossError
    from foxlib.memory.devices import DeviceError
    from foxlib.run.runner import os_error_line
    try:
        return _run(args)
    except (DeviceError, ValueError) as exc:  # ValueError: ParameterError, BudgetsError, ProvenanceError too
        print(f"foxlib: error: {exc}", file=sys.stderr)
        return 2
    except (NonFiniteLossError, FileNotFoundError, RuntimeError) as exc:  # RuntimeError: MarketDataError too
        print(f"foxlib: failed: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # read-only folder, disk full, permission: one line, no traceback
        print(f"foxlib: failed: {os_error_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("foxlib: interrupted; the previous reports are untouched", file=sys.stderr)
        return 130


def _run(args) -> int:
    from foxlib.core.critical_path import WAVES
    from foxlib.core.parameters import ParameterError, parse_assignments, read_parameters, split_parameters
    from foxlib.report import index
    if args.command == "waves":
        print("\n".join(index.status_lines(args.reports_dir)))
        return 0
    if args.command == "index":
        print(index.write_index(args.reports_dir))
        return 0
    from foxlib.run.runner import plan, run_wave
    allow_dirty = args.allow_dirty or config.env_flag("FOXLIB_ALLOW_DIRTY")
    force = args.force or config.env_flag("FOXLIB_FORCE")
    overrides = parse_assignments(split_parameters(args.parameters) + args.parameter)
    if args.command == "measure":
        return _measure(args.wave, overrides, args.out, allow_dirty, force)
    run = partial(run_wave, reports_dir=args.reports_dir, progress=not args.quiet, allow_dirty=allow_dirty, force=force)
    if args.command == "report":
        print(run(args.wave, overrides) / "report.html")
        return 0
    built = [w for w in WAVES.values() if w.built]  # WAVES is in dependency order: 8.13 reads 8.12's report
    declared = {w.id: read_parameters(w.notebook) for w in built}
    if unknown := sorted(set(overrides) - {name for names in declared.values() for name in names}):
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}: no wave has them; valid parameters: "
                             + "; ".join(f"{w}: {', '.join(names)}" for w, names in declared.items()))
    mine = {w.id: {k: v for k, v in overrides.items() if k in declared[w.id]} for w in built}
    provenance.check_tree(allow_dirty)
    for wave in built:  # every wave's parameters checked before the first one runs
        plan(wave.id, mine[wave.id], args.reports_dir)
    for i, wave in enumerate(built, 1):
        print(f"[{i}/{len(built)}] wave {wave.id}: {wave.title}", file=sys.stderr, flush=True)
        print(run(wave.id, mine[wave.id]) / "report.html")
    print(index.write_index(args.reports_dir))
    return 0


def _measure(wave_id: str, overrides: dict, out: Path, allow_dirty: bool, force: bool) -> int:
    from foxlib.core import results
    from foxlib.run import notebook_cells as notebook, preflight
    from foxlib.run.runner import plan
    if overrides.get("measurements"):
        raise ValueError("measure takes no measurements parameter: it makes the measurement")
    p = plan(wave_id, overrides)  # checked, with the device's defaults
    provenance.check_tree(allow_dirty)
    preflight.check_memory(wave_id, p.params, force, p.checked)
    print(results.write_json(out, notebook.measure(wave_id, p.params, keep=out).to_dict()))
    return 0

