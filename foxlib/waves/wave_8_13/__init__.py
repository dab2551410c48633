"""Wave 8.13: production validation — the whole ensemble trained (interleaved) and served (all at once) under
a real 4 GB cap: on a GPU the allocator capped at card − CUDA context, on the CPU the cap checked by accounting.

measuring.py runs it (members.py, serve.py, nvml.py, cap.py; tft.py reads 8.12's recommended TFT); records.py
types its data; analysis.py decides, tables.py and charts.py show; cards.py says which card fits;
deployment.py writes deployment.md.
"""
