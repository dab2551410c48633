#!/usr/bin/env bash
# Every GPU measurement the H200 reports need, run on the GPU machine from the repository root
# (the device tool's copy of a clean, committed tree). Results go under $OUT (at most 8 files):
#   wave-<W>.json for each wave in $WAVES, wave-8.10-snapshot.pickle, wave-8.12-timelines.tgz, peer-benchmark.json,
#   throughput.json (THROUGHPUT=1), run.log.
# Render them here with `make render MEASURED=<folder>` (README: "On a GPU machine").
#
# Waves run in dependency order. Wave 8.13 and the peer benchmark take wave 8.12's recommendation
# from the PUBLISHED reports/<gpu>/wave-8.12/results.json of this tree and cite it by path, revision
# and sha256; so measure 8.12 first, render and commit it here, then run 8.13 and the peer:
#   call 1: FOXLIB_GIT_REVISION=<commit> WAVES="8.10 8.11 8.12" PEER=0 bash scripts/h200.sh
#   call 2: FOXLIB_GIT_REVISION=<commit> WAVES="8.13" GPU_TESTS=0 CPU_TESTS=0 bash scripts/h200.sh
# Wave 8.12 keeps each finished part in $OUT/wave-8.12.parts.json: a call that the time limit stops (STOP_AFTER=540
# stops the measurement itself before the device tool's limit) leaves it, and a later call at the same revision on
# the same GPU with PARTS=<that file, carried> measures only the rest:
#   call 1: FOXLIB_GIT_REVISION=<commit> WAVES=8.12 STOP_AFTER=540 PEER=0 GPU_TESTS=0 CPU_TESTS=0 bash scripts/h200.sh
#   call 2: FOXLIB_GIT_REVISION=<commit> WAVES=8.12 PARTS=device-out/parts/wave-8.12.parts.json ... bash scripts/h200.sh
# Knobs: WAVES (default "8.10 8.11 8.12 8.13"; WAVES=none runs none), PARAMETERS (a variant run of the waves in
# WAVES: overrides as make's P takes them, e.g. PARAMETERS="strategies='bf16;fp16'"), CLASSES="fp16" (8.13 for other card classes,
# emulated: variant reports the index reads per class), CLAIMS=1 (8.12's claim runs alone), PEER=0, PEER_COMPILE=off (the peer
# benchmark's torch.compile rows, on by default on CUDA: about 4-8 minutes of compiling; a run with them that
# leaves no file is run again without them, its page saying why), THROUGHPUT=1,
# DIAG_EAGER=1 (scripts/diagnose_eager_step.py: eager-step.json and .txt), GPU_TESTS=0, CPU_TESTS=0 (the prediction and
# profiler tests on this machine's CPU with CUDA hidden, under two ISA caps and the default).
set -uo pipefail
export PYTHONUNBUFFERED=1 FOXLIB_PROGRESS=1
LOG="$OUT/run.log"
failed=""
if ! [[ "${FOXLIB_GIT_REVISION:-}" =~ ^[0-9a-f]{40}$ ]]; then  # the full hash: a short or mistyped one cannot be checked
  echo "set FOXLIB_GIT_REVISION=<the clean commit this tree is, all 40 hex digits: git rev-parse HEAD>" >&2; exit 2; fi
if [ "${WHEELS:-1}" = 1 ] && ls .whl/*.whl >/dev/null 2>&1; then  # WHEELS=0: not installed; packages the GPU image lacks (arch, pytorch-forecasting, darts: benchmarks/README.md), carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
stamp() { echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee -a "$LOG"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$LOG"

for w in ${WAVES:-8.10 8.11 8.12 8.13}; do
  [ "$w" = none ] && continue
  stamp "wave $w"
  if [ "$w" = 8.12 ] && [ -n "${PARTS:-}" ]; then cp "$PARTS" "$OUT/wave-8.12.parts.json"; fi  # an earlier call's parts
  timeout "${STOP_AFTER:-0}" python3 -m foxlib measure --wave "$w" --out "$OUT/wave-$w.json" --parameters "${PARAMETERS:-}" \
    $( [ "$w" = 8.10 ] && echo "-p snapshot_path=$OUT/wave-8.10-snapshot.pickle" ) \
    $( [ "$w" = 8.12 ] && echo "-p timeline_dir=/tmp/foxlib-out/timelines -p checkpoint_path=$OUT/wave-8.12.parts.json" ) \
    2>&1 | tail -n 20 | tee -a "$LOG"
  # the timelines' snapshots in one file (the device tool returns at most 8): make render unpacks them
  [ "$w" = 8.12 ] && [ -d /tmp/foxlib-out/timelines ] && tar -C /tmp/foxlib-out -czf "$OUT/wave-8.12-timelines.tgz" timelines
done
for c in ${CLASSES:-}; do  # wave 8.13 again for another card class (foxlib.core.card_classes), emulated here
  stamp "wave 8.13, card class $c"
  python3 -m foxlib measure --wave 8.13 -p card_class="$c" --out "$OUT/wave-8.13-card_class-$c.json" 2>&1 | tail -n 20 | tee -a "$LOG"
done
if [ "${PEER:-1}" = 1 ]; then
  stamp "peer benchmark"
  python3 benchmarks/peer_tft.py --device cuda --preset seed --repeats 10 --compile "${PEER_COMPILE:-auto}" \
    --out "$OUT/peer-benchmark.json" 2>&1 | tail -n 40 | tee -a "$LOG"
  if [ ! -s "$OUT/peer-benchmark.json" ] && [ "${PEER_COMPILE:-auto}" != off ]; then
    # a crash in a torch.compile row (an illegal memory access at 7440e90) loses the whole run: the rows again without it
    stamp "peer benchmark failed with torch.compile; again without it (its page says the compiled rows were not run)"
    err=$(grep -E '^[A-Za-z_.]*(Error|Exception): ' "$LOG" | tail -n 1 | cut -c1-300)
    python3 benchmarks/peer_tft.py --device cuda --preset seed --repeats 10 --compile off \
      --compile-off-reason "because a run with torch.compile at this revision failed (${err:-no error line in run.log})" \
      --out "$OUT/peer-benchmark.json" 2>&1 | tail -n 40 | tee -a "$LOG"
  fi
fi
if [ "${CLAIMS:-0}" = 1 ]; then  # the seed's speed claims again, alone (fresh processes): verdicts from run to run
  stamp "seed claims, independent runs (foxlib.waves.wave_8_12.claim_runs)"
  python3 -m foxlib.waves.wave_8_12.claim_runs --device cuda --out "$OUT/claim-runs.json" 2>&1 | tail -n 20 | tee -a "$LOG"
fi
if [ "${DIAG_EAGER:-0}" = 1 ]; then  # where an eager step's host time goes (reports/h200/batched-vsn/README.md)
  stamp "eager-step diagnosis (plain and compiled: Python or C++ wrapper, combo kernels, compiled autograd)"
  python3 scripts/diagnose_eager_step.py --rounds 60 --out "$OUT/eager-step.json" > "$OUT/eager-step.txt" 2>&1
  grep -E '^batched|^== ' "$OUT/eager-step.txt" | cut -c1-400 | tee -a "$LOG"
fi
if [ "${THROUGHPUT:-0}" = 1 ]; then
  stamp "throughput benchmark (NVIDIA's published TFT configuration)"
  python3 benchmarks/throughput_tft.py --device cuda --repeats 10 --out "$OUT/throughput.json" 2>&1 | tail -n 20 | tee -a "$LOG"
fi
if [ "${GPU_TESTS:-1}" = 1 ]; then
  stamp "GPU tests"
  g=/tmp/gpu-tests.log
  # -v: each test's outcome as it ends; run.log keeps them all and the failures' tracebacks (the whole output
  # stays on the machine: $OUT returns at most 8 files)
  python3 -m pytest -v -rfEs --tb=short -p no:cacheprovider -m cuda tests/test_gpu_profile.py tests/test_memory_cap.py \
    tests/test_cuda_graph.py tests/test_memory_timelines.py tests/test_parallel_training.py tests/test_cublas_workspace.py \
    tests/test_peer_best.py tests/test_peer_benchmark.py tests/test_equivalence.py > "$g" 2>&1 \
    || failed="$failed GPU-tests"
  { grep -E '^tests/.*(PASSED|FAILED|ERROR|SKIPPED)' "$g"; sed -n '/= FAILURES =/,$p' "$g" | tail -n 80
    grep -q '= FAILURES =' "$g" || grep -v '^[[:space:]]*$' "$g" | tail -n 3; } | tee -a "$LOG"
fi
if [ "${CPU_TESTS:-1}" = 1 ]; then
  stamp "CPU prediction and profiler tests, CUDA hidden ($(grep -o -m1 -E 'amx_bf16|avx512_bf16' /proc/cpuinfo | head -1))"
  CUDA_VISIBLE_DEVICES= bash scripts/test-isa.sh 2>&1 | tail -n 30 | tee -a "$LOG" || failed="$failed CPU-tests"
fi
stamp done
# a failed test stage fails the script (pipefail carries pytest's status through tail and tee)
if [ -n "$failed" ]; then echo "FAILED:$failed" | tee -a "$LOG"; exit 1; fi
