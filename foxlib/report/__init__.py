"""From measurements to pages: the charts (charts, captioned: alt text and captions), the reading aids
and table styling (reading), report.html and report.md from an executed notebook (render), the index
with the seed's claims ledger and the pages' fp32 baselines (index, ledger, baselines), the benchmarks'
pages (peer_figures, peer_page, throughput_page; their templates through page_template), the
cross-report check (consistency) and the headless browser check (browser).

Layer rule (core < data < memory < models < harness < waves < report < run; tests/test_layout.py
checks it): report may import every layer below it, waves included; never foxlib.run.
"""
