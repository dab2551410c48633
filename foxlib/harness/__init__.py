"""What the waves run on the models: the one training-step recipe (recipe), a card's step measured to
plain data (measure_step), screening by prediction (screening), alternating timings with bootstrap
intervals (timing), the accuracy harness (training, skill), "same function" checks (equivalence) and
live-memory timelines (timelines).

Layer rule (core < data < memory < models < harness < waves < report < run; tests/test_layout.py
checks it): harness imports foxlib.core, data, memory and models; never a wave, report or run.
"""
