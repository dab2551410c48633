"""Measuring (and predicting) the memory of a training step. The profiler knows no model.

the one training step (step); profile_step (profile): exact per-category accounting (accounting), peaks on the CPU and on CUDA (cuda,
cuda_graph, NVML), the devices (devices); predict_step (predict and predict_*, on fake tensors) and
the tolerances predicted and measured are compared with (tolerances); the yardsticks from shapes
(theory, theory_tft); PyTorch's own memory profiler as a second opinion (second_opinion); live-memory
timelines (timeline, live_series and live_series_*, timeline_chart).

Layer rule (core < data < memory < models < harness < waves < report < run; tests/test_layout.py
checks it): memory imports foxlib.core and data only. A model arrives as an argument (a card, a
module, a loss): nothing here imports foxlib.models.
"""
from foxlib.memory.profile import MemoryProfile, profile_step
from foxlib.memory.step import PRECISIONS, NonFiniteLossError


def predict_step(card, config, **kwargs) -> MemoryProfile:
    """foxlib.memory.predict.predict_step (imported on first use: fake-tensor machinery is heavy)."""
    from foxlib.memory.predict import predict_step as predict
    return predict(card, config, **kwargs)


__all__ = ["PRECISIONS", "MemoryProfile", "NonFiniteLossError", "predict_step", "profile_step"]
