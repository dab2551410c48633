"""foxlib.report.charts on hand-made records (bytes in, MB on the axes): the bars, the budget and card
lines with their labels, the seed's marks and the legend entries a reader needs."""
import types

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from foxlib.core import seed_claims  # noqa: E402
from foxlib.core.config import MB  # noqa: E402
from foxlib.memory.tolerances import CATEGORIES  # noqa: E402
from foxlib.report import charts  # noqa: E402
from tests.conftest import step_profile  # noqa: E402

BUDGETS_MB = {"parameters_mb": 300.0, "forward_activations_mb": 200.0, "gradients_mb": 200.0,
              "optimizer_state_mb": 200.0, "peak_training_mb": 1000.0}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _memory_profile(buffers=None, **mb):
    """A typed step profile (what a wave's measurement holds) of these categories in MB (the others 0) and these
    buffers: its temporaries are what the peak holds beyond them."""
    return step_profile(buffers=buffers or {}, **{c: int(mb.get(c, 0) * MB) for c in CATEGORIES})


def test_breakdown_bars_budget_lines_seed_marks_and_legend():
    profile = _memory_profile(parameters=72.6, activations=592.0, gradients=72.6, optimizer_state=145.2, peak=938.0)
    ax = charts.breakdown(profile, BUDGETS_MB, "TFT step").axes[0]
    assert sorted(_legend(ax)) == ["budget", "measured (foxlib)", "seed (nvidia-smi)"]  # each once
    assert [t.get_text() for t in ax.get_yticklabels()] == ["parameters", "forward activations", "gradients",
                                                           "optimizer state", "model peak"]
    bars = ax.patches
    assert [round(b.get_width(), 1) for b in bars] == [72.6, 592.0, 72.6, 145.2, 938.0]  # MB = 10^6 bytes
    # over its budget: red; within: green
    colours = [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars]
    assert colours == ["#1a7f37", "#cf222e", "#1a7f37", "#1a7f37", "#1a7f37"]
    lines = ax.get_lines()
    budgets = [tuple(line.get_xdata()) for line in lines if line.get_linestyle() == "-"]
    assert budgets == [(300.0, 300.0), (200.0, 200.0), (200.0, 200.0), (200.0, 200.0), (1000.0, 1000.0)]
    seeds = [line.get_xdata()[0] for line in lines if line.get_marker() == "o"]
    assert seeds == [seed_claims.TFT_8_10_MB[k] for k in ("parameters", "activations", "gradients",
                                                           "optimizer_state", "peak")]
    assert [t.get_text() for t in ax.texts] == [" 73", " 592", " 73", " 145", " 938"]
    assert ax.get_xlabel() == "memory (MB = 10^6 bytes)" and ax.get_title() == "TFT step"


def test_activations_by_module_sorted_with_shares():
    ax = charts.activations_by_module({"lstm": 3 * MB, "attention": MB, "vsn": 0}, "blocks").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["vsn", "attention", "lstm"]  # smallest at the bottom
    assert [b.get_width() for b in ax.patches] == [0.0, 1.0, 3.0]
    assert [t.get_text() for t in ax.texts] == [" 0.0 MB (0 %)", " 1.0 MB (25 %)", " 3.0 MB (75 %)"]
    assert ax.get_xlim() == pytest.approx((0, 3 * 1.35))


def _totals(**kw):
    return types.SimpleNamespace(share_of=lambda card: kw["process_peak"] / card, **kw)


def test_ensemble_stacks_categories_marks_peaks_and_draws_the_card_line_with_its_label():
    # dqn: 2 MB of temporaries over its categories; tft: none
    profiles = {"dqn": _memory_profile(parameters=1, gradients=1, optimizer_state=2, activations=4, peak=10,
                                       buffers={"replay": {"device_bytes": 0}}),
                "tft": _memory_profile(parameters=10, gradients=10, optimizer_state=20, activations=40, peak=85,
                                       buffers={"mask": {"device_bytes": 5 * MB}})}
    assert [p.temporaries for p in profiles.values()] == [2 * MB, 0]
    totals = _totals(model_peaks={"dqn": 10 * MB, "tft": 85 * MB}, workspace_bytes=8 * MB, context_bytes=500 * MB,
                     on_cuda=True, process_peak=603 * MB)
    ax = charts.ensemble(profiles, totals, 4096.0, "ensemble").axes[0]
    labels = _legend(ax)
    for entry in ("parameters", "gradients", "optimizer state", "activations", "buffers (device)", "temporaries",
                  "model peak", "seed (nvidia-smi)", "cuBLAS workspaces (once)", "CUDA context (once)"):
        assert entry in labels, (entry, labels)
    assert labels.count("model peak") == 1  # once, not per model
    card = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(card) == 1 and tuple(card[0].get_ydata()) == (4096.0, 4096.0)
    assert "4 GB card: 4,096 MB" in [t.get_text() for t in ax.texts]
    peaks = [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert peaks == [10.0, 85.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["dqn", "tft", "workspaces", "CUDA context"]
    stacked = {round(b.get_y() + b.get_height(), 6) for b in ax.patches if b.get_x() == pytest.approx(1 - 0.4)}
    assert max(stacked) == 85.0  # the TFT's categories add up to 85 MB: 10 + 10 + 20 + 40 + 5 (buffers)
    assert "process peak (model peaks + workspaces + context) 603 MB = 14.7 % of the card" in ax.get_title()
    # on the CPU: no workspace or context bars, and the title says what the process peak is there
    cpu = _totals(model_peaks={"dqn": 10 * MB, "tft": 85 * MB}, workspace_bytes=0, context_bytes=0, on_cuda=False,
                  process_peak=95 * MB)
    ax = charts.ensemble(profiles, cpu, 4096.0, "ensemble").axes[0]
    assert "CUDA context (once)" not in _legend(ax) and "(model peaks' sum (CPU)) 95 MB = 2.3 % of the card" in ax.get_title()


def test_precision_memory_budget_line_label_and_seed_expectation():
    profiles = {"fp32": _memory_profile(parameters=10, gradients=10, optimizer_state=20, activations=50, peak=100),
                "bf16": _memory_profile(parameters=10, gradients=10, optimizer_state=20, activations=30, peak=70)}
    ax = charts.precision_memory(profiles, 1000.0, {"bf16": 50.0}, "precisions").axes[0]
    labels = _legend(ax)
    assert "budget 1,000 MB" in labels and "seed's expectation" in labels
    assert {"parameters", "gradients", "optimizer state", "activations", "temporaries"} <= set(labels)
    budget = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(budget) == 1 and tuple(budget[0].get_ydata()) == (1000.0, 1000.0)
    assert budget[0].get_label() == "budget 1,000 MB"
    seed = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(seed) == 1 and tuple(seed[0].get_ydata()) == (50.0, 50.0)
    assert [t.get_text() for t in ax.texts] == ["model peak 100", "model peak 70"]
    # fp32's temporaries (the profile's: 100 - 90 MB of categories) are stacked on top, up to its model peak
    fp32 = [b for b in ax.patches if b.get_x() == pytest.approx(-0.25)]
    assert [round(b.get_height(), 6) for b in fp32] == [10.0, 10.0, 20.0, 50.0, 10.0]
    assert round(max(b.get_y() + b.get_height() for b in fp32), 6) == 100.0


def test_step_time_ratios_points_intervals_and_the_baseline_line():
    from foxlib.harness.timing import RatioInterval
    ratios = {"fp32": RatioInterval(1.0, 1.0, 1.0), "bf16": RatioInterval(0.64, 0.58, 0.71),
              "fp16": RatioInterval(1.25, 1.1, 1.4, confidence=0.95)}
    ax = charts.step_time_ratios(ratios, "speed").axes[0]
    assert [c.lines[0].get_xdata()[0] for c in ax.containers] == [1.0, 0.64, 1.25]  # the medians, in order
    assert [t.get_text() for t in ax.texts] == ["1.00x [1.00, 1.00]", "0.64x [0.58, 0.71]", "1.25x [1.10, 1.40]"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["fp32", "bf16", "fp16"]
    baseline = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(baseline) == 1 and tuple(baseline[0].get_xdata()) == (1.0, 1.0)
    assert _legend(ax) == ["baseline (1x)"] and "95 % bootstrap interval" in ax.get_xlabel()
    lo, hi = ax.get_xlim()
    assert 0 <= lo < 0.58 and hi > 1.4  # every interval inside, never below 0


def test_accuracy_spread_means_seeds_and_the_gate_line_with_its_label():
    rows = [types.SimpleNamespace(precision="fp32", mean=2.0, values=[1.0, 3.0]),  # Degradation's fields read
            types.SimpleNamespace(precision="bf16", mean=2.5, values=[2.0, 3.0])]
    ax = charts.accuracy_spread(rows, (2.0, "fp32 mean"), (2.2, "gate: fp32 + 10 %"), "QL", "accuracy").axes[0]
    assert [c.lines[0].get_ydata()[0] for c in ax.containers] == [2.0, 2.5]  # the means
    seeds = [list(line.get_ydata()) for line in ax.get_lines() if line.get_marker() == "o"]
    assert seeds == [[1.0, 3.0], [2.0, 3.0]]
    gate = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(gate) == 1 and tuple(gate[0].get_ydata()) == (2.2, 2.2) and gate[0].get_label() == "gate: fp32 + 10 %"
    assert sorted(_legend(ax)) == ["each seed", "fp32 mean", "gate: fp32 + 10 %", "mean over seeds (range: whisker)"]
    assert [t.get_text() for t in ax.texts] == ["2.0000", "2.5000"]
    lo, hi = ax.get_ylim()
    assert lo < 1.0 and hi > 3.0 and ax.get_ylabel() == "QL"
