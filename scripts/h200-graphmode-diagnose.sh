#!/usr/bin/env bash
# Find what stopped wave 8.13's graph mode on the H200 ("an illegal memory access was encountered",
# 2026-12-03, revision 79e3cfb, with the TFT of scripts/h200-fastpath.sh): each capture 8.13 makes,
# alone, with synchronous launches so that the failing kernel is the one named, then the whole wave at
# 3 steps. Run on the GPU machine from the repository root (a clean tree):
#   FOXLIB_GIT_REVISION=<commit> bash scripts/h200-graphmode-diagnose.sh
# Each line prints "ok" or the error; the first failing piece is the one to fix before
# GRAPH_MODE_VALIDATED (foxlib/waves/wave_8_12/strategies.py) may become True.
set -uo pipefail
export PYTHONUNBUFFERED=1 CUDA_LAUNCH_BLOCKING=1 PYTHONFAULTHANDLER=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
# the TFT 8.13 ran in graph mode when it failed
TFT='{"precision": "bf16", "memory_efficient": true, "checkpointing": "vsn_variables", "cuda_graph": true, "options": {"adam": "fused", "optimizer_in_backward": true}}'
export TFT
for piece in train:tft:plain train:tft:fused train:tft:inbackward train:tft:asrun train:mamba2 \
             infer:tft:asrun infer:dqn infer:ppo infer:mamba2; do
  timeout 120 python3 - "$piece" <<'PY' 2>&1 | tail -n 4
import json, os, sys, torch
from foxlib.harness.step_options import StepOptions
from foxlib.models import MODELS
from foxlib.waves.wave_8_13.members import _Member, _load, _step
from foxlib.waves.wave_8_13.serve import _forward, _inference_input
from foxlib.waves.wave_8_13.tft import resolve_tft
kind, name, *variant = sys.argv[1].split(":")
dev = torch.device("cuda")
if name == "tft":
    tft = resolve_tft(os.environ["TFT"], "seed", "h200")
    opts = {"plain": {}, "fused": {"adam": "fused"}, "inbackward": {"optimizer_in_backward": True},
            "asrun": tft["options"]}[variant[0]]
    m = _Member(name, tft["config"], tft["precision"], cuda_graph=True, options=StepOptions.from_dict(opts))
else:
    m = _Member(name, MODELS[name].preset("seed"), "fp32", cuda_graph=True)
try:
    _load(m, dev, 0)
    if kind == "train":
        losses = [_step(m, dev) for _ in range(5)]
        torch.cuda.synchronize()
        print(sys.argv[1], "ok:", m.graph_note, "losses", [round(x, 4) for x in losses])
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
echo "=== wave 8.13 in graph mode, 3 steps, synchronous launches"
timeout 200 python3 -m foxlib measure --wave 8.13 --out "${OUT:-/tmp}/wave-8.13-diagnose.json" \
  -p "tft_config=$TFT" -p steps=3 -p inference_repeats=5 2>&1 | tr '\r' '\n' | grep -v 'it/s\|s/it' | tail -n 40
