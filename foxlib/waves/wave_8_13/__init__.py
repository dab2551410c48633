"""Wave 8.13: production validation — the whole ensemble trained and served under a real 4 GB cap.

On a GPU the caching allocator is capped so that the cap plus this process's CUDA context (outside the cap)
equals the card: an out-of-memory error inside it is a real one. Every library the run uses is warmed up
before the context is measured (it grows as kernels load lazily), and NVML's per-process figure is sampled
through the run and checked against the card. The four models train in one process, interleaved (one step
of each in turn, each with its own Adam), then all four serve at once. On the CPU nothing can be capped: the
cap is checked by accounting, and every such figure says "not enforced (accounting)".

measuring.py runs it (with members.py, serve.py, nvml.py, cap.py and tft.py: 8.12's recommended TFT, cited
in "depends_on"); records.py types its data; analysis.py decides, tables.py and charts.py show;
cards.py says which card fits and deployment.py writes deployment.md.
"""
