"""The Makefile passes P safely: through the environment, split like a shell line by foxlib; nothing
in it can end or change the command, and make fails when the command fails. No wave runs: the
interpreter is a stub that records the arguments make gave it."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from foxlib.core.config import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def stub(tmp_path):
    """A PYTHON for make that writes its arguments to argv.json and exits with $STUB_RC."""
    path = tmp_path / "python"
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                    "sys.exit(int(os.environ.get('STUB_RC', '0')))\n")
    path.chmod(0o755)
    return path


def _make(stub, *args, rc=0):
    env = {**os.environ, "STUB_RC": str(rc)}
    r = subprocess.run(["make", "-s", *args, f"PYTHON={stub}", "STAMP=Makefile"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    argv = json.loads((stub.parent / "argv.json").read_text()) if (stub.parent / "argv.json").exists() else None
    return r, argv


def _overrides(argv):
    from foxlib.run.cli import build_parser
    from foxlib.core.parameters import parse_assignments, split_parameters
    args = build_parser().parse_args(argv[2:])
    return parse_assignments(split_parameters(args.parameters) + args.parameter)


def test_the_readme_form_of_a_strategy_list_reaches_foxlib_whole(stub):
    from foxlib.waves.wave_8_12.strategies import select
    r, argv = _make(stub, "report", "WAVE=8.12",
                    "P=strategies='fp32 (baseline);bf16;checkpoint blocks' timing_repeats=3")
    assert r.returncode == 0, r.stderr
    assert argv[:4] == ["-m", "foxlib", "report", "--wave"] and argv[4] == "8.12"
    got = _overrides(argv)
    assert got == {"strategies": "fp32 (baseline);bf16;checkpoint blocks", "timing_repeats": "3"}
    assert [s.name for s in select(got["strategies"])] == ["fp32 (baseline)", "bf16", "checkpoint blocks"]
    r, argv = _make(stub, "report", "WAVE=8.12", "P=strategies=bf16;fp16")  # no spaces: no quotes needed
    assert _overrides(argv) == {"strategies": "bf16;fp16"}


def test_nothing_in_p_can_end_or_change_the_command(stub, tmp_path):
    canary = tmp_path / "canary"
    r, argv = _make(stub, "report", "WAVE=8.12", f"P=strategies=a;touch {canary} $(touch {canary}) `touch {canary}`")
    assert r.returncode == 0 and not canary.exists()
    assert f"touch {canary}" in argv[-1]  # all of it handed to foxlib as text, which refuses it (name=value)


def test_make_fails_when_the_command_fails(stub):
    r, _ = _make(stub, "report", "WAVE=8.10", "P=batch_size=-1", rc=2)
    assert r.returncode != 0
    r, _ = _make(stub, "reports", rc=1)
    assert r.returncode != 0


def test_test_fast_runs_the_unit_tier(stub):
    r, argv = _make(stub, "test-fast")
    assert argv[:2] == ["-m", "pytest"] and "not slow" in argv


def test_lab_allows_root_only_as_root(tmp_path):
    r = subprocess.run(["make", "-n", "lab", "STAMP=Makefile"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = next(x for x in r.stdout.splitlines() if "jupyter lab" in x)
    assert "--allow-root" in line and "id -u" in line  # decided when it runs, not always passed
    out = subprocess.run(["bash", "-c", line.split("jupyter lab", 1)[1].split("$(", 1)[1].rsplit(")", 1)[0]],
                         capture_output=True, text=True).stdout.strip()
    assert (out == "--allow-root") == (os.getuid() == 0)
