"""The ground floor: paths and units (config), budgets and checks, the waves of the critical path,
notebook parameters, named figures, results.json, provenance (revisions and citations), the seed's
figures, progress bars.

Layer rule (foxlib's layers, lowest first: core < data < memory < models < harness < waves < report
< run; tests/test_layout.py checks it): a package imports its own modules and those of the layers
below it, never one above. core is the lowest: it imports no other foxlib package.
"""
