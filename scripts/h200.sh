#!/usr/bin/env bash
# Every GPU measurement the H200 reports need, in one call of the device tool (see README).
# Run from the repository root on the GPU machine; results go under $OUT (at most 8 files):
#   wave-<W>.json for each wave in $WAVES, wave-8.10-snapshot.pickle, peer-benchmark.json, run.log.
# Then, here:  python -m foxlib report --wave 8.10 -p measurements=<OUT>/wave-8.10.json
# renders them, filed under reports/h200/ (the same for each wave).
#
# Wave 8.13's "auto" TFT is wave 8.12's recommendation for this device: after measuring 8.12 this
# script files the recommendation where 8.13 (and the peer benchmark's "best") look for it, in a
# scratch reports folder ($FOXLIB_REPORTS), exactly as the 8.12 notebook would have.
# Knobs: WAVES (default "8.10 8.12 8.13 8.11"), RECOMMEND_FROM (an earlier wave-8.12.json: file its
# recommendation, then measure the waves in AFTER, default 8.13), PEER=0 / GPU_TESTS=0 to skip,
# PEER_ALSO='{"precision": ..., ...}' with PEER_ALSO_NAME to run the peer against a second configuration.
set -uo pipefail
export PYTHONUNBUFFERED=1 FOXLIB_PROGRESS=1
export FOXLIB_REPORTS=${FOXLIB_REPORTS:-/tmp/foxlib-reports}
LOG="$OUT/run.log"
if ls .whl/*.whl >/dev/null 2>&1; then  # packages the GPU image lacks (arch, pytorch-forecasting), carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
stamp() { echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee -a "$LOG"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$LOG"

file_recommendation() {  # wave 8.12's measurement -> $FOXLIB_REPORTS/<device>/wave-8.12/results.json
  python3 - "$OUT/wave-8.12.json" <<'EOF' 2>&1 | tee -a "$LOG"
import sys
from foxlib import results
from foxlib.budgets import load_budgets
from foxlib.waves import wave_8_12, wave_8_13
m = results.read_json(sys.argv[1])
b = load_budgets()
res = results.build("8.12", {}, m, wave_8_12.checks(m, b), recommended=wave_8_12.recommend(m, b))
path = wave_8_13.recommendation_file(m["device"]["short"])
path.parent.mkdir(parents=True, exist_ok=True)
results.write_json(path, res)
print("wave 8.12 recommends:", res["recommended"].get("strategy"), res["recommended"].get("reason"), "->", path)
EOF
}

for w in ${WAVES:-8.10 8.12 8.13 8.11}; do
  stamp "wave $w"
  python3 -m foxlib measure --wave "$w" --out "$OUT/wave-$w.json" \
    $( [ "$w" = 8.10 ] && echo "-p snapshot_path=$OUT/wave-8.10-snapshot.pickle" ) 2>&1 | tail -n 20 | tee -a "$LOG"
  [ "$w" = 8.12 ] && [ -f "$OUT/wave-8.12.json" ] && file_recommendation
done
if [ -n "${RECOMMEND_FROM:-}" ]; then  # 8.13 / the peer alone: wave 8.12's measurement from an earlier call
  cp "$RECOMMEND_FROM" "$OUT/wave-8.12.json" && file_recommendation && rm -f "$OUT/wave-8.12.json"
  for w in ${AFTER:-8.13}; do
    stamp "wave $w"
    python3 -m foxlib measure --wave "$w" --out "$OUT/wave-$w.json" 2>&1 | tail -n 20 | tee -a "$LOG"
  done
fi
if [ "${PEER:-1}" = 1 ]; then
  stamp "peer benchmark"
  python3 benchmarks/peer_tft.py --device cuda --preset seed --repeats 10 --reports-dir "$FOXLIB_REPORTS" \
    --out "$OUT/peer-benchmark.json" 2>&1 | tail -n 40 | tee -a "$LOG"
  if [ -n "${PEER_ALSO:-}" ]; then  # the peer against another foxlib configuration too (JSON for --best)
    stamp "peer benchmark, best = $PEER_ALSO"
    python3 benchmarks/peer_tft.py --device cuda --preset seed --repeats 10 --best "$PEER_ALSO" \
      --out "$OUT/peer-benchmark-${PEER_ALSO_NAME:-also}.json" 2>&1 | tail -n 40 | tee -a "$LOG"
  fi
fi
if [ "${GPU_TESTS:-1}" = 1 ]; then
  stamp "GPU tests"
  python3 -m pytest -q -rs -s -p no:cacheprovider -m cuda tests/test_gpu_profile.py tests/test_memory_cap.py tests/test_cuda_graph.py 2>&1 \
    | tail -n 80 | tee -a "$LOG"
fi
stamp done
