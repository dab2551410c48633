#!/usr/bin/env bash
# The prediction and profiler tests under capped CPU instruction sets: the kernels a user's CPU
# takes (oneDNN's and ATen's paths for bf16/fp16 matmuls, LSTMs, convolutions) differ with its
# ISA, and the predictions must hold on each within foxlib/memory/tolerances.py's tolerances.
#
#   AVX2              DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2: no 16-bit oneDNN matmul
#   AVX512_CORE_BF16  DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 ATEN_CPU_CAPABILITY=avx512: avx512_bf16
#                     without AMX (as on an AMD EPYC)
#
# A cap runs only at or below what this CPU has (its flags in /proc/cpuinfo) and below a cap already set
# in the environment: a cap above the CPU is no cap (ATen's AVX-512 kernels stop an AVX2-only CPU with
# "Illegal instruction"). foxlib.memory.cpu_support decides (tests/test_cpu_support.py); each skipped cap
# is printed with its reason. (The uncapped path is what `make test` runs.)
# One pytest run per cap; exits non-zero if any run fails. CUDA is hidden: these are CPU paths.
#
#   scripts/test-isa.sh                 # with .venv/bin/python (the Makefile's), else python3
#   PYTHON=/path/to/python scripts/test-isa.sh [extra pytest arguments]
#   ISA_TESTS=tests/x.py::y scripts/test-isa.sh   # other tests than the prediction and profiler files
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export CUDA_VISIBLE_DEVICES=
FILES="${ISA_TESTS:-tests/test_predict.py tests/test_profiler.py tests/test_prediction_table.py tests/test_precision.py}"
if ! plan=$("$PYTHON" -m foxlib.memory.cpu_support caps); then
  echo "test-isa: could not read this CPU's instruction sets"; exit 1
fi
failed="" ran="" skipped=""
while read -r verdict dnnl aten reason; do
  if [ "$verdict" != RUN ]; then
    echo "=== ISA cap DNNL_MAX_CPU_ISA=$dnnl ATEN_CPU_CAPABILITY=$aten: SKIPPED, $reason"
    skipped="$skipped $dnnl"
    continue
  fi
  echo "=== ISA cap: DNNL_MAX_CPU_ISA=$dnnl ATEN_CPU_CAPABILITY=$aten"
  DNNL_MAX_CPU_ISA="$dnnl" ATEN_CPU_CAPABILITY="$aten" "$PYTHON" -c \
    "import torch; print('torch', torch.__version__, '| ATen CPU capability:', torch.backends.cpu.get_cpu_capability())"
  start=$(date +%s)
  if DNNL_MAX_CPU_ISA="$dnnl" ATEN_CPU_CAPABILITY="$aten" "$PYTHON" -m pytest -q -p no:cacheprovider $FILES "$@" </dev/null; then
    echo "=== ISA cap $dnnl: passed in $(( $(date +%s) - start )) s"
  else
    echo "=== ISA cap $dnnl: FAILED (after $(( $(date +%s) - start )) s)"
    failed="$failed $dnnl"
  fi
  ran="$ran $dnnl"
done <<< "$plan"
if [ -n "$failed" ]; then
  echo "test-isa: failed under:$failed"
  exit 1
fi
echo "test-isa: passed under:${ran:- no cap (none at or below this CPU)}${skipped:+; skipped:$skipped (reasons above)}"
