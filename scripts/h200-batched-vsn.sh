#!/usr/bin/env bash
# Issue 27 on the GPU machine, from the repository root: the per-chunk VSNs (today's memory-efficient path)
# against the batched ones (vsn_batched), each pair counted (aten ops per block), profiled (model peaks) and timed eager and as one CUDA graph in alternating rounds
# (in a fresh process, foxlib.harness.fresh_process: 180 rounds of one step each; medians, ratios with 95 % intervals). bf16, fused Adam.
#   1. the shipped step: per-chunk vs all variables at once (vsn_chunk 0), and that one with torch.compile
#      (step_options.compile; minutes of compiling)                         -> $OUT/ops-shipped.json
#   2. the same with the batched VSNs in two chunks (vsn_chunk 19)        -> $OUT/ops-chunk19.json
#   3. the lightest: checkpoint VSN variables (chunks of 4), Adam in backward -> $OUT/ops-light.json
# Each but the first under a minute on an H200. Alone, the first is:  python -m foxlib.harness.op_count --device cuda --time
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-.}
echo "=== $(date -u +%T) shipped pair, and the batched step compiled (torch.compile: inductor's fused kernels)"
timeout 300 python3 -m foxlib.harness.op_count --device cuda --time --compile --out "$OUT/ops-shipped.json"
echo "=== $(date -u +%T) batched in two chunks"
timeout 150 python3 -m foxlib.harness.op_count --device cuda --time --chunk 19 --out "$OUT/ops-chunk19.json"
echo "=== $(date -u +%T) lightest pair"
timeout 150 python3 -m foxlib.harness.op_count --device cuda --time --checkpointing vsn_variables --chunk 4 \
  --optimizer-in-backward --out "$OUT/ops-light.json"
echo "=== $(date -u +%T) done"
