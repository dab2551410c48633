"""`python -m foxlib measure` must run where there is no Jupyter (the GPU machine has torch, pandas,
matplotlib and nvidia-ml-py, no papermill, nbformat or nbconvert)."""
import subprocess
import sys

from foxlib.core import config


def test_the_measure_command_imports_without_jupyter():
    code = ("import sys\n"
            "for name in ('nbformat', 'nbconvert', 'papermill', 'jupytext', 'nbclient'):\n"
            "    sys.modules[name] = None  # importing any of them now raises ImportError\n"
            "import foxlib.run.cli as cli, foxlib.run.runner, foxlib.run.notebook_cells\n"
            "from foxlib.waves import wave_8_10, wave_8_11, wave_8_12, wave_8_13\n"
            "cli.build_parser().parse_args(['measure', '--wave', '8.10', '--out', 'x.json'])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=config.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
