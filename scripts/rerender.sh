#!/usr/bin/env bash
# Re-render every committed canonical report from its own measurement.json into OUT/reports (a copy
# of reports/ first), with this tree's code. Two such folders, from two revisions, compared with
# scripts/compare-renders.sh, show whether a change of code changed what a report says.
# Usage: bash scripts/rerender.sh OUT [device ...]   (default: every device under reports/)
set -uo pipefail
PY=${PYTHON:-python3}
out=${1:?usage: rerender.sh OUT [device ...]}; shift
rm -rf "$out"; mkdir -p "$out"; cp -r reports "$out/reports"
devices=${*:-$(cd reports && ls -d */ | tr -d / )}
status=0
for d in $devices; do
  # 8.13 first: it cites the published 8.12 results, whose stamp a re-render changes
  for w in 8.13 8.10 8.11 8.12; do
    m="$out/reports/$d/wave-$w/measurement.json"; [ -f "$m" ] || continue
    # the measurement with the files the report keeps beside it (8.10's allocator snapshot, 8.12's timeline
    # snapshots), which the render looks for beside the measurement
    mkdir -p "$out/measured-$d-$w" && cp "$m" "$out/measured-$d-$w/measurement.json"
    cp "$out/reports/$d/wave-$w"/timeline-*.pickle "$out/reports/$d/wave-$w"/timeline-*.json \
      "$out/reports/$d/wave-$w"/memory_snapshot.pickle "$out/measured-$d-$w/" 2>/dev/null
    if FOXLIB_REPORTS="$out/reports" $PY -m foxlib report --wave $w --allow-dirty \
        -p measurements="$out/measured-$d-$w/measurement.json" >"$out/log-$d-$w" 2>&1; then echo "rendered $d $w"
    else echo "FAILED $d $w:"; tail -5 "$out/log-$d-$w"; status=1; fi
  done
done
exit $status
