"""Measuring (and predicting) the memory of a training step. The profiler knows no model."""
from foxlib.memory.profile import PRECISIONS, MemoryProfile, NonFiniteLossError, profile_step


def predict_step(card, config, **kwargs) -> MemoryProfile:
    """foxlib.memory.predict.predict_step (imported on first use: fake-tensor machinery is heavy)."""
    from foxlib.memory.predict import predict_step as predict
    return predict(card, config, **kwargs)


__all__ = ["PRECISIONS", "MemoryProfile", "NonFiniteLossError", "predict_step", "profile_step"]
