"""Wave 8.13: production validation — the whole ensemble trained and served under a real 4 GB cap.

On a GPU the caching allocator is capped with `torch.cuda.set_per_process_memory_fraction` so
that the cap plus this process's CUDA context (the context is outside the cap) equals the card. An
out-of-memory error inside the cap is then a real one. The context grows as kernels and library
handles load lazily, so every library the run uses is warmed up first (`warm_up`: each model's
training step and inference, in its precision, on the run's streams or threads), then the context
is measured (NVML per-process used − allocator reserved) and the cap set (`cap_arithmetic`). Through
training and inference a background thread samples NVML's per-process figure (`Sampler`,
`NvmlProcessReader`), also after every step and inference round; the largest sample is checked
against the card (`nvml_peak`, NVML_CHECK). Where NVML does not list this process the check is
not applicable, and says so; on the CPU it is not applicable.
The four models train in one process, interleaved round-robin (one step of each in turn, each
with its own Adam; gradients are freed after every step), then all four serve at once.

On the CPU nothing can be capped. There the cap is checked by accounting: each model's training
step is measured on its own (`foxlib.harness.measure_step.measure_model`) and the interleaved run is walked on
paper — the stepping model's step peak plus what every other model keeps between its steps. The
real CPU run stops where that accounting says the cap would be exceeded, as a GPU run would stop
at its out-of-memory error. Every such figure is labelled "not enforced (accounting)".

Names: a model's "model peak" is its own step's tensors at their largest; the ensemble's "process
figure" is the model peaks summed + the cuBLAS workspaces once per stream + the CUDA context.

`measure(...)` does the work and returns measurement.json's data (JSON-able, bytes). `Measurement.from_dict`
checks it and types it; everything after it turns that measurement into checks, tables and charts on raw
bytes and seconds, and touches no model. "depends_on" cites
(foxlib.core.provenance) the wave 8.12 results whose recommendation the TFT took.

The modules, one idea each: tft.py (the TFT's
configuration, 8.12's recommendation), account.py (the CPU's accounting), oom.py (out-of-memory
records), cap.py (the context and the cap), nvml.py (NVML's per-process figure), members.py (the
models' lifecycle), train.py (the interleaved training run), serve.py (concurrent inference),
warmup.py (the warm-up before the context), measuring.py (`measure`), records.py (the typed record),
analysis.py (figures, checks, sentences), tables.py, charts.py. cards.py with card_table.py (which
card fits) and deployment.py (deployment.md). Callers import what they use from the module that defines it
(no re-exports here).
"""
