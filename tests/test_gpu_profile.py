"""The counterpart of the seed's test_tft_gpu_memory_profiling: the seed TFT profiled on a GPU,
its budget table printed, and the measurement checked against itself and against the theory."""
import pytest
import torch

from foxlib.memory import tolerances as prediction
from foxlib.core.budgets import load_budgets
from foxlib.core.config import MB
from foxlib.harness.measure_step import measure_model
from foxlib.models import MODELS
from foxlib.memory.profile import MemoryProfile
from foxlib.memory.theory import activation_theory_by_block

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")]


def test_tft_gpu_memory_profiling():
    cfg = MODELS["tft"].preset("seed")
    m = measure_model("tft", cfg, torch.device("cuda"))
    p, cuda = m["profile"], m["profile"]["cuda"]
    b = load_budgets()["tft"]
    rows = [("parameters", p["parameters"], b["parameters_mb"]),
            ("forward activations", p["activations"], b["forward_activations_mb"]),
            ("gradients", p["gradients"], b["gradients_mb"]),
            ("optimizer state", p["optimizer_state"], b["optimizer_state_mb"]),
            ("peak training", p["peak"], b["peak_training_mb"])]
    print(f"\nseed TFT on {p['device_name']}, fp32, batch {cfg.batch_size}, sequence {cfg.encoder_length}")
    print(f"{'component':<22}{'measured (MB)':>15}{'budget (MB)':>13}  status")
    for name, value, budget in rows:
        print(f"{name:<22}{value / MB:>15,.1f}{budget:>13,.0f}  {'PASS' if value <= budget * MB else 'FAIL'}")
    nvml = cuda["nvml"]
    print(f"allocator reserved (MB): {cuda['reserved_bytes'] / MB:,.1f} (peak {cuda['reserved_peak_bytes'] / MB:,.1f}); "
          f"NVML process (MB): {nvml.get('process_used_bytes', 0) / MB:,.1f}; "
          f"CUDA context (MB): {(cuda['context_bytes'] or 0) / MB:,.1f}; {nvml.get('note')}")

    # categories that must equal the CPU's for the same dtype: they are fixed by the parameters
    n = p["n_parameters"]
    assert p["parameters"] == 4 * n and p["gradients"] == 4 * n
    assert p["optimizer_state"] == 8 * n + 4 * len(list(MODELS["tft"].build(cfg).parameters()))
    # the step's peak covers weights, gradients and Adam state; the reserve covers the peak
    assert p["peak"] >= p["parameters"] + p["gradients"] + p["optimizer_state"]
    assert p["forward_peak"] >= p["live_before_step"] + p["activations"] - p["batch"] - 1
    # the model peak is the allocator's peak less the workspaces held before the step (cuBLAS, per stream and
    # thread: the warm-up's matrix products made them); the process peak adds them and the context back
    assert cuda["reserved_peak_bytes"] >= cuda["allocated_peak_bytes"] == p["peak"] + p["workspace_bytes"]
    assert p["workspace_bytes"] > 0
    assert p["live_before_step"] == cuda["allocated_at_step_start_bytes"] - p["workspace_bytes"]
    assert p["process_peak"] == p["peak"] + p["workspace_bytes"] + (cuda["context_bytes"] or 0)
    if "process_used_bytes" in nvml:  # NVML's process figure covers the allocator's reserve
        assert nvml["process_used_bytes"] >= cuda["reserved_bytes"]
        assert cuda["context_bytes"] > 0
    # saved activations: every block but the LSTMs (cuDNN workspace) equals the shape count
    theory = activation_theory_by_block(cfg, "cuda")
    for block, measured in p["activations_by_module"].items():
        print(f"  {block:<22}{measured / MB:>10,.2f} MB measured, {theory[block] / MB:>10,.2f} MB theory")
    mismatched = {k: (v, theory[k]) for k, v in p["activations_by_module"].items()
                  if not k.startswith("lstm") and v != theory[k]}
    assert not mismatched

    # the prediction made before the step (target CUDA): within the tolerances its report claims
    # (foxlib.memory.tolerances: CUDA_LSTM_TOLERANCE_PCT on activations and forward peak, the TFT's
    # cuDNN LSTM reserve not being modelled; PEAK_TOLERANCE_PCT on the step's peak, less the
    # cuBLAS workspaces allocated before the step)
    predicted, measured = prediction.predicted_profile(m["predicted"]), MemoryProfile.from_dict(p)
    table = prediction.compare(predicted, measured, "cuda")
    print(table.to_string())
    assert prediction.runs_lstm(predicted, measured)
    rows = table[table["category"].isin([prediction.LABELS[c] for c in prediction.CATEGORIES])]
    assert len(rows) == len(prediction.CATEGORIES) and rows["within"].eq(True).all(), rows[~rows["within"].eq(True)]
