"""The command line: `python -m foxlib {report,reports,waves,measure,index}` (see --help)."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from foxlib import config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m foxlib", description="foxlib: the ensemble's memory workbook")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="run one wave's notebook and write its report")
    r.add_argument("--wave", required=True, help="wave id, e.g. 8.10")
    r.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="override a notebook parameter (repeatable)")
    r.add_argument("--reports-dir", type=Path, default=None, help=f"default: {config.REPORTS_DIR}")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    a = sub.add_parser("reports", help="run every built wave, then the index page")
    a.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="override a parameter in every wave that has it")
    a.add_argument("--reports-dir", type=Path, default=None)
    a.add_argument("--quiet", action="store_true")
    sub.add_parser("waves", help="list the waves with their titles and status").add_argument(
        "--reports-dir", type=Path, default=None)
    m = sub.add_parser("measure", help="measure a wave without Jupyter and write the measurement JSON "
                                       "(for a GPU machine; render it later with report -p measurements=FILE)")
    m.add_argument("--wave", required=True)
    m.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE")
    m.add_argument("--out", type=Path, required=True, help="the measurement JSON to write")
    sub.add_parser("index", help="rewrite reports/index.html").add_argument("--reports-dir", type=Path, default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
                        format="%(message)s", stream=sys.stderr)
    from foxlib.budgets import BudgetsError
    from foxlib.data import MarketDataError
    from foxlib.devices import DeviceError
    from foxlib.memory import NonFiniteLossError
    from foxlib.parameters import ParameterError
    try:
        return _run(args)
    except (ParameterError, BudgetsError, DeviceError, ValueError) as exc:
        print(f"foxlib: error: {exc}", file=sys.stderr)
        return 2
    except (MarketDataError, NonFiniteLossError, FileNotFoundError, RuntimeError) as exc:
        print(f"foxlib: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("foxlib: interrupted; the previous reports are untouched", file=sys.stderr)
        return 130


def _run(args) -> int:
    from foxlib import index
    from foxlib.parameters import parse_assignments
    if args.command == "waves":
        print("\n".join(index.status_lines(args.reports_dir)))
        return 0
    if args.command == "index":
        print(index.write_index(args.reports_dir))
        return 0
    if args.command == "measure":
        return _measure(args.wave, parse_assignments(args.parameter), args.out)
    from foxlib.runner import run_wave
    overrides = parse_assignments(args.parameter)
    if args.command == "report":
        out = run_wave(args.wave, overrides, args.reports_dir, progress=not args.quiet)
        print(out / "report.html")
        return 0
    from foxlib.parameters import read_parameters
    from foxlib.waves import WAVES
    built = [w for w in WAVES.values() if w.built]
    for i, wave in enumerate(built, 1):
        print(f"[{i}/{len(built)}] wave {wave.id}: {wave.title}", file=sys.stderr, flush=True)
        mine = {k: v for k, v in overrides.items() if k in read_parameters(wave.notebook)}
        print(run_wave(wave.id, mine, args.reports_dir, progress=not args.quiet) / "report.html")
    print(index.write_index(args.reports_dir))
    return 0


def _measure(wave_id: str, overrides: dict, out: Path) -> int:
    from foxlib import notebook, results
    from foxlib.parameters import read_parameters, resolve
    from foxlib.waves import get_wave
    from foxlib import preflight
    params = resolve(read_parameters(get_wave(wave_id).notebook), overrides)
    preflight.check(wave_id, params)
    data = notebook.measure(wave_id, params)
    print(results.write_json(out, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
