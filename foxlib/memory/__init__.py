"""Measuring (and predicting) the memory of a training step; the profiler knows no model.

Layer rule (tests/test_layout.py): memory imports foxlib.core and data only; a model arrives as an argument.
"""
from foxlib.memory.profile import MemoryProfile, profile_step
from foxlib.memory.step import PRECISIONS, NonFiniteLossError


def predict_step(card, config, **kwargs) -> MemoryProfile:
    """foxlib.memory.predict.predict_step, imported on first use (fake-tensor machinery is heavy)."""
    from foxlib.memory.predict import predict_step as predict
    return predict(card, config, **kwargs)


__all__ = ["PRECISIONS", "MemoryProfile", "NonFiniteLossError", "predict_step", "profile_step"]
