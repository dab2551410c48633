"""`python -m foxlib measure` must run where there is no Jupyter (the GPU machine has torch, pandas,
matplotlib and nvidia-ml-py, no papermill, nbformat or nbconvert)."""
import subprocess
import sys

from foxlib.core import config

NO_JUPYTER = ("import sys\n"
              "for name in ('nbformat', 'nbconvert', 'papermill', 'jupytext', 'nbclient'):\n"
              "    sys.modules[name] = None  # importing any of them now raises ImportError\n")


def test_the_measure_command_imports_without_jupyter():
    code = (NO_JUPYTER + "import foxlib.run.cli as cli, foxlib.run.runner, foxlib.run.notebook_cells\n"
            "from foxlib.waves import wave_8_10, wave_8_11, wave_8_12, wave_8_13\n"
            "cli.build_parser().parse_args(['measure', '--wave', '8.10', '--out', 'x.json'])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=config.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_benchmarks_pages_render_without_jupyter():
    """peer_tft.py --html and throughput_tft.py write their pages where they measure (a 2026-12-05 GPU run of
    test_on_a_gpu_the_benchmarks_best_row_is_one_cuda_graph failed on `import nbformat`): the committed H200 pages'
    results render there to the same first lines."""
    code = (NO_JUPYTER + "from foxlib.core.results import read_json\n"
            "from foxlib.report import peer_page, throughput_page\n"
            "peer = peer_page.render(read_json('reports/h200/peer-benchmark.json'))\n"
            "md = throughput_page.render(read_json('reports/h200/throughput-benchmark.json'))\n"
            "print(peer.count('<table'), md.splitlines()[0])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=config.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    tables, title = done.stdout.split(" ", 1)
    committed_md = (config.ROOT / "reports/h200/throughput-benchmark.md").read_text().splitlines()[0]
    assert int(tables) >= 2 and title.strip() == committed_md
