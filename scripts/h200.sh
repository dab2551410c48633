#!/usr/bin/env bash
# Every GPU measurement the H200 reports need, in one call of the device tool (see README).
# Run from the repository root on the GPU machine; results go under $OUT, then
#   python -m foxlib report --wave 8.10 -p measurements=<OUT>/wave-8.10.json
# renders them here, filed under reports/h200/.
set -uo pipefail
export PYTHONUNBUFFERED=1 FOXLIB_PROGRESS=1
if ls .whl/*.whl >/dev/null 2>&1; then  # packages the GPU image lacks (arch), carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/nvidia-smi.csv"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
waves=${WAVES:-8.10}
for w in $waves; do
  python3 -m foxlib measure --wave "$w" --out "$OUT/wave-$w.json" \
    $( [ "$w" = 8.10 ] && echo "-p snapshot_path=$OUT/wave-8.10-snapshot.pickle" ) 2>&1 | tail -n 20
done
python3 -m pytest -q -rs -s -p no:cacheprovider tests/test_gpu_profile.py 2>&1 | tee "$OUT/gpu-test.log" | tail -n 60
