"""The ground floor: paths and units, budgets and checks, the waves, notebook parameters, named figures,
results.json, provenance, the seed's figures, progress bars.

foxlib's layers, lowest first: core < data < memory < models < harness < waves < report < run. A package imports
its own modules and those of the layers below it, never one above (tests/test_layout.py); core imports none.
"""
