"""Measuring (and predicting) the memory of a training step. The profiler knows no model."""
from foxlib.memory.profile import PRECISIONS, MemoryProfile, NonFiniteLossError, profile_step

__all__ = ["PRECISIONS", "MemoryProfile", "NonFiniteLossError", "profile_step"]
