"""What the waves run on the models: the one step recipe, its measurement, screening, timing, training,
"same function" checks and live-memory timelines. Layer rule (tests/test_layout.py): harness imports
foxlib.core, data, memory and models; never a wave, report or run.
"""
