#!/usr/bin/env bash
# Find what stopped wave 8.13's graph mode on the H200 ("an illegal memory access was encountered",
# 2026-12-03, revision 79e3cfb): each capture 8.13 makes, alone, with synchronous launches so that the
# failing kernel is the one named. Run on the GPU machine from the repository root (a clean tree):
#   FOXLIB_GIT_REVISION=<commit> bash scripts/h200-graphmode-diagnose.sh
# Each line prints "ok" or the error; the first failing piece is the one to fix before
# GRAPH_MODE_VALIDATED (foxlib/waves/wave_8_12/strategies.py) may become True.
set -uo pipefail
export PYTHONUNBUFFERED=1 CUDA_LAUNCH_BLOCKING=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
for piece in train:tft train:mamba2 infer:tft infer:dqn infer:ppo infer:mamba2; do
  timeout 120 python3 - "$piece" <<'PY' 2>&1 | tail -n 3
import sys, torch
from foxlib.models import MODELS
from foxlib.waves.wave_8_13.members import _Member, _load, _step
from foxlib.waves.wave_8_13.serve import _forward, _inference_input
kind, name = sys.argv[1].split(":")
dev = torch.device("cuda")
cfg = MODELS[name].config("seed", memory_efficient=True, checkpointing="vsn_variables", vsn_chunk=8) \
    if name == "tft" else MODELS[name].preset("seed")
m = _Member(name, cfg, "fp32", cuda_graph=True)
try:
    _load(m, dev, 0)
    if kind == "train":
        for _ in range(3):
            _step(m, dev)
        torch.cuda.synchronize()
        print(sys.argv[1], "ok:", m.graph_note)
    else:
        x = _inference_input(m, dev, 0, 0)
        m.model.eval()
        fn = _forward(m, x, dev)
        fn(); fn()
        torch.cuda.synchronize()
        print(sys.argv[1], "ok:", m.inference_note)
except Exception as exc:  # noqa: BLE001 - the point is to see it
    print(sys.argv[1], "FAILED:", type(exc).__name__, str(exc)[:300])
PY
done
