#!/usr/bin/env bash
# The fast path's GPU measurements in one call, as variants (the canonical 8.12 and 8.13 come from
# scripts/h200.sh): run on the GPU machine from the repository root of a clean, committed tree.
#   1. wave 8.12 over the fast-path strategies (eager references, bf16 / TF32 / fused Adam / Adam in
#      backward inside the graph), one accuracy seed, no timelines -> $OUT/wave-8.12-fastpath.json
#   2. wave 8.13 training and serving the lightest graphed configuration under the 4 GB cap
#      -> $OUT/wave-8.13-graphed.json
#   3. the throughput benchmark at NVIDIA's published TFT configuration -> $OUT/throughput.json
#   4. the CUDA-graph tests (the fast options inside a captured step, the cuBLAS workspace knob)
# Render here: python -m foxlib report --wave 8.12 -p measurements=<json> (a variant: its parameters
# differ from the defaults), the same for 8.13, python -m foxlib.report.throughput_page for 3.
set -uo pipefail
export PYTHONUNBUFFERED=1
if [ -z "${FOXLIB_GIT_REVISION:-}" ]; then echo "set FOXLIB_GIT_REVISION=<the clean commit this tree is>" >&2; exit 2; fi
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
quiet() { tr '\r' '\n' | grep -v 'it/s\|s/it' | tail -n "$1"; }
STRATEGIES="fp32 (baseline);bf16;memory-efficient path;efficient + checkpoint VSN variables;efficient + bf16"
STRATEGIES="$STRATEGIES;memory-efficient path + CUDA graph;efficient + checkpoint VSN variables + CUDA graph"
STRATEGIES="$STRATEGIES;efficient + bf16 + CUDA graph;efficient + checkpoint VSN variables + bf16 + CUDA graph"
STRATEGIES="$STRATEGIES;efficient + TF32 + CUDA graph;efficient + bf16 + CUDA graph + fused Adam"
STRATEGIES="$STRATEGIES;efficient + bf16 + CUDA graph + Adam in backward"
STRATEGIES="$STRATEGIES;efficient + checkpoint VSN variables + bf16 + CUDA graph + Adam in backward"
echo "=== $(date -u +%T) 8.12 fast-path strategies"
timeout "${T812:-260}" python3 -m foxlib measure --wave 8.12 --out "$OUT/wave-8.12-fastpath.json" \
  -p "strategies=$STRATEGIES" -p accuracy_seeds=1 -p timelines=False 2>&1 | quiet 8
TFT='{"precision": "bf16", "memory_efficient": true, "checkpointing": "vsn_variables", "cuda_graph": true, "options": {"adam": "fused", "optimizer_in_backward": true}}'
echo "=== $(date -u +%T) 8.13 graphed"
timeout "${T813:-150}" python3 -m foxlib measure --wave 8.13 --out "$OUT/wave-8.13-graphed.json" -p "tft_config=$TFT" 2>&1 | quiet 8
echo "=== $(date -u +%T) throughput"
timeout "${TTHR:-80}" python3 benchmarks/throughput_tft.py --device cuda --repeats 5 --out "$OUT/throughput.json" 2>&1 | quiet 12
echo "=== $(date -u +%T) CUDA-graph tests"
timeout "${TTEST:-60}" python3 -m pytest -q -rs -p no:cacheprovider -m cuda tests/test_cuda_graph.py 2>&1 | tail -n 15
echo "=== $(date -u +%T) done"
