#!/usr/bin/env bash
# Find what stops wave 8.13's graph mode on the H200 ("an illegal memory access was encountered",
# 2026-12-03, revisions 79e3cfb and dc0e666, with the TFT of scripts/h200-fastpath.sh; each capture
# alone, uncapped, passed at dc0e666). At b499286: "no-infer" ran to the end; "all", "no-train" and
# "uncapped" failed in serve.py's concurrent round (_Together._streams, replaying the captured forwards);
# at 3ac015a also on one shared stream: the warm-up's round replayed a graph whose input it had freed
# (serve.py, _captured now keeps it). Runs the whole wave at 3 steps with synchronous launches, in
# one process per variant, and prints the traceback and the last thing the wave was doing:
#   all             graph mode as the wave runs it
#   no-infer        inference forwards eager (training captured)
#   no-train        training steps eager (inference captured)
#   uncapped        the allocator cap not set
# Run on the GPU machine from the repository root (a clean tree):
#   FOXLIB_GIT_REVISION=<commit> bash scripts/h200-graphmode-diagnose.sh [variant ...]
set -uo pipefail
export PYTHONUNBUFFERED=1 CUDA_LAUNCH_BLOCKING=1 PYTHONFAULTHANDLER=1 FOXLIB_PROGRESS=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
# the TFT 8.13 ran in graph mode when it failed
export TFT='{"precision": "bf16", "memory_efficient": true, "checkpointing": "vsn_variables", "cuda_graph": true, "options": {"adam": "fused", "optimizer_in_backward": true}}'
for variant in "${@:-all no-infer no-train uncapped}"; do
  for v in $variant; do
  echo "=== $(date -u +%T) variant $v"
  timeout "${TVAR:-120}" python3 - "$v" <<'PY' 2>&1 | tr '\r' '\n' | grep -v '^\s*$' | tail -n 14
import os, sys, traceback, torch
import foxlib.waves.wave_8_13.members as members
import foxlib.waves.wave_8_13.serve as serve
from foxlib.waves.wave_8_13.measuring import measure
v = sys.argv[1]
if v == "no-infer":
    def _eager(run, device, member):
        raise RuntimeError("disabled by the diagnosis")
    serve._captured = _eager
if v == "no-train":
    def _no(*a, **k):
        raise RuntimeError("disabled by the diagnosis")
    members.capture_step = _no
if v == "uncapped":
    torch.cuda.set_per_process_memory_fraction = lambda *a, **k: None
try:
    out = measure(tft_config=os.environ["TFT"], steps=3, inference_repeats=5)
    print(v, "ok:", out.graph_mode, "training oom", out.training.oom, "inference oom", out.inference.oom)
except Exception as exc:  # noqa: BLE001 - the point is to see it
    print(v, "FAILED:", type(exc).__name__, str(exc)[:200])
    print("".join(traceback.format_exc().splitlines(True)[-16:]))
PY
  done
done
