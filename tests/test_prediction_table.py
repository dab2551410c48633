"""The predicted-beside-measured table (foxlib/memory/tolerances.py) on hand-made profiles."""
import dataclasses
import math

from foxlib.memory import tolerances as prediction
from foxlib.core.config import MB
from tests.conftest import committed_measurement, graphed_profile
from tests.conftest import step_profile as profile


def test_errors_and_tolerances_per_category():
    measured = profile(activations=100 * MB, peak=200 * MB)
    predicted = profile(activations=106 * MB, peak=219 * MB)  # +6 % (over 5 %), +9.5 % (under 10 %)
    df = prediction.compare(predicted, measured, "cpu").set_index("category")
    assert df.loc["activations (saved for backward)", "error (%)"] == 6.0
    assert not df.loc["activations (saved for backward)", "within"]
    assert df.loc["activations (saved for backward)", "why"] == "unexplained"
    assert df.loc["step peak (tensors)", "error (%)"] == 9.5 and df.loc["step peak (tensors)", "within"]
    assert df.loc["step peak (tensors)", "tolerance (%)"] == prediction.PEAK_TOLERANCE_PCT == 10.0
    assert df.loc["gradients", "tolerance (%)"] == prediction.CATEGORY_TOLERANCE_PCT == 5.0
    assert df.loc["gradients", "error (%)"] == 0.0 and df.loc["gradients", "predicted (MB)"] == 10.0


def test_cuda_gaps_are_named_and_tiny_differences_are_slack():
    measured = profile(activations=100 * MB, batch=10_000)
    predicted = profile(activations=120 * MB, batch=40_000)  # +300 % of 10 kB: under the 64 KiB slack
    df = prediction.compare(predicted, measured, "cuda").set_index("category")
    assert "dropout" in df.loc["activations (saved for backward)", "why"]
    assert df.loc["batch", "within"] and df.loc["batch", "error (%)"] == 300.0


def test_zero_measured_and_missing_prediction():
    assert prediction.error_pct(0, 0) == 0.0 and math.isinf(prediction.error_pct(1, 0))
    df = prediction.compare(prediction.predicted_profile({"error": "prediction failed: boom"}), profile(), "cpu")
    assert len(df) == 1 and not df["within"].iloc[0] and "boom" in df["why"].iloc[0]
    assert "no prediction" in prediction.compare(None, profile(), "cpu")["why"].iloc[0]
    assert prediction.predicted_profile(profile().to_dict()) == profile() and prediction.predicted_profile(None) is None
    failed = prediction.predicted_profile({"error": "prediction failed: boom"})
    assert failed == prediction.FailedPrediction("prediction failed: boom")
    assert failed.to_dict() == {"error": "prediction failed: boom"}


def test_pairs_and_summary_for_each_wave_shape():
    p, q = profile(), profile(peak=12 * MB)  # peak +20 %
    m_810, m_811 = committed_measurement("cpu", "8.10"), committed_measurement("cpu", "8.11")
    # the records hold a prediction typed (a profile, or why there is none), beside the typed measurement
    m_810 = dataclasses.replace(m_810, tft=dataclasses.replace(m_810.tft, profile=p, predicted=q),
                                ensemble={"dqn": dataclasses.replace(m_810.ensemble["dqn"], profile=p,
                                                                     predicted=None)})
    m_811 = dataclasses.replace(m_811, memory={"tft": {"fp32": p, "bf16": p}}, predicted={"tft": {"fp32": p}})
    graph = graphed_profile(peak=30 * MB, workspace_bytes=MB)  # no activations: never predicted
    m_812 = dataclasses.replace(committed_measurement("cpu", "8.12"), memory={"fp32 (baseline)": p, "CUDA graph": graph},
                                predicted={"fp32 (baseline)": p, "CUDA graph": prediction.FailedPrediction("not predicted")})
    assert list(m_810.prediction_pairs()) == ["tft", "dqn"]
    assert list(m_811.prediction_pairs()) == ["tft fp32", "tft bf16"]
    assert list(m_812.prediction_pairs()) == ["fp32 (baseline)", "CUDA graph"]
    assert committed_measurement("cpu", "8.13").prediction_pairs() == {}
    assert m_810.prediction_pairs()["tft"] == (q, p)
    assert m_811.prediction_pairs()["tft bf16"] == (None, p)
    assert m_812.prediction_pairs()["CUDA graph"] == (prediction.FailedPrediction("not predicted"), graph)
    s = prediction.summary(m_810.prediction_pairs(), "cpu").set_index("step")
    assert s.loc["tft", "peak error (%)"] == 20.0 and s.loc["tft", "categories outside tolerance"] == "step peak (tensors) +20.0 %"
    assert "no prediction" in s.loc["dqn", "categories outside tolerance"]
    s = prediction.summary(m_812.prediction_pairs(), "cpu").set_index("step")
    assert s.loc["fp32 (baseline)", "categories outside tolerance"] == "none"
    assert s.loc["CUDA graph", ["measured peak (MB)", "non-tensor (MB)", "categories outside tolerance"]].tolist() == [
        30.0, 1.0, "not predicted"]


def test_cuda_workspaces_are_kept_out_of_the_model_peaks_and_shown():
    measured = profile(peak=100 * MB, forward_peak=95 * MB, workspace_bytes=10 * MB)
    predicted = profile(peak=100 * MB, forward_peak=95 * MB)
    df = prediction.compare(predicted, measured, "cuda").set_index("category")
    assert df.loc["step peak (tensors)", "measured (MB)"] == 100.0 and df.loc["step peak (tensors)", "error (%)"] == 0.0
    assert df.loc["forward peak (tensors)", "measured (MB)"] == 95.0
    assert df.loc[prediction.NON_TENSOR_LABEL, "measured (MB)"] == 10.0
    s = prediction.summary({"m": (predicted, measured)}, "cuda")
    assert s["non-tensor (MB)"].iloc[0] == 10.0 and s["categories outside tolerance"].iloc[0] == "none"


def test_a_skipped_fp16_optimizer_step_is_named():
    measured = profile(peak=80 * MB, optimizer_step_skipped=True)
    df = prediction.compare(profile(peak=100 * MB), measured, "cuda").set_index("category")
    assert df.loc["step peak (tensors)", "why"] == prediction.SKIPPED_STEP_REASON
    # an fp16 step that was taken: a gap is not explained away
    measured = profile(peak=80 * MB, precision="fp16", optimizer_step_skipped=False, warmup_steps=2)
    df = prediction.compare(profile(peak=100 * MB), measured, "cuda").set_index("category")
    assert df.loc["step peak (tensors)", "why"] == prediction.CUDA_REASONS["peak"]


def test_cuda_lstm_gaps_are_named_with_their_own_tolerance():
    """On CUDA, a model with an LSTM (the TFT): the cuDNN LSTM's reserve and workspace are not
    modelled; activations and forward peak get CUDA_LSTM_TOLERANCE_PCT, a gap beyond is named."""
    lstm = {"activations_by_module": {"lstm_encoder": 1, "loss": 1}}
    measured = profile(activations=100 * MB, forward_peak=100 * MB, peak=11 * MB, **lstm)
    predicted = profile(activations=110 * MB, forward_peak=120 * MB, peak=3 * MB, **lstm)
    df = prediction.compare(predicted, measured, "cuda").set_index("category")
    act, fwd, peak = (df.loc[prediction.LABELS[c]] for c in ("activations", "forward_peak", "peak"))
    assert act["tolerance (%)"] == prediction.CUDA_LSTM_TOLERANCE_PCT and act["within"]  # +10 % < 15 %
    assert not fwd["within"] and fwd["why"].startswith(prediction.CUDA_LSTM_REASON)  # +20 %
    assert peak["tolerance (%)"] == prediction.PEAK_TOLERANCE_PCT and not peak["within"]
    assert "not modelled: cuDNN LSTM workspace/reserve" in peak["why"]
    # the same gaps on the CPU: the CPU tolerance, unexplained
    cpu = prediction.compare(predicted, measured, "cpu").set_index("category")
    assert cpu.loc[prediction.LABELS["activations"], "tolerance (%)"] == prediction.CATEGORY_TOLERANCE_PCT
    assert cpu.loc[prediction.LABELS["activations"], "why"] == "unexplained"
    # a model without an LSTM on CUDA: the common tolerance and reasons
    plain = prediction.compare(profile(activations=110 * MB), profile(activations=100 * MB), "cuda")
    assert not plain.set_index("category").loc[prediction.LABELS["activations"], "within"]
    assert prediction.CUDA_LSTM_REASON not in " ".join(plain["why"])
    # the prediction says it ran an LSTM (measurements without block names still get the reason)
    assert prediction.runs_lstm(profile(peak_method=f"...; {prediction.LSTM_MARK} oneDNN's"), profile())
    assert not prediction.runs_lstm(profile(peak_method="...", activations_by_module={"q_network": 1}))


def test_the_notebooks_state_the_tolerances_the_table_applies():
    """Each notebook with a prediction table says its tolerances in a markdown cell, the CUDA LSTM's included:
    the figures it states are foxlib.memory.tolerances' (the table's tolerance column applies them, per row), so
    the two cannot drift."""
    import re

    from foxlib.core.config import ROOT
    stated = {}
    for wave in ("8.10", "8.11", "8.12"):
        text = " ".join(line.lstrip("# ") for line in (ROOT / "notebooks" / f"wave-{wave}.py").read_text().splitlines())
        stated[wave] = re.findall(r"Tolerance: ([\d.]+) % per category, ([\d.]+) % on the peak; on CUDA, ([\d.]+) % "
                                  r"on the activations and the forward peak of a model with an LSTM", text)
    expected = [(f"{prediction.CATEGORY_TOLERANCE_PCT:g}", f"{prediction.PEAK_TOLERANCE_PCT:g}",
                 f"{prediction.CUDA_LSTM_TOLERANCE_PCT:g}")]
    assert stated == {wave: expected for wave in stated}
