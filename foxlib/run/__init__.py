"""Running the workbook: the command line (cli), the checks before anything runs or is written
(preflight), executing a wave's notebook with papermill and publishing its report (runner), and the
few calls every notebook makes (notebook_cells).

Layer rule (core < data < memory < models < harness < waves < report < run; tests/test_layout.py
checks it): run is the top layer and may import all the others; nothing in foxlib imports it
(foxlib/__main__.py, above the layers, calls run.cli).
"""
