"""Wave 8.12: the seed's optimisation-strategy table, measured, and the configuration to ship.

The seed guessed every cell: FP16 50 % / +20 % faster, checkpointing 75 % / −40 %, batch 32→8
75 %, sequence 60→30 50 %. Each strategy here is a TFT configuration (strategies.py): its
training-step memory is profiled, its step time measured with all strategies alternating in one run,
and — where it changes the numbers the model computes — its accuracy measured with wave 8.11's
harness (foxlib.harness.training); the strategies that compute the same function inherit the
accuracy of their precision, the claim shown as max |Δ| of outputs and gradients (measuring.py).

measuring.py measures (workspace.py: the cuBLAS workspace knob, in fresh processes); records.py types its data (`Measurement812`, intervals included); analysis.py
decides on the record; tables.py only formats. Callers import what they use from the module that defines it (no re-exports here).
"""
