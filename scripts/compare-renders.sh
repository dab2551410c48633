#!/usr/bin/env bash
# Compare two folders written by scripts/rerender.sh: report.md, results.json and deployment.md of
# every wave, stamps (rendered-at revision and time, the generated line) left out. Exit 1 on a difference.
set -uo pipefail
a=${1:?usage: compare-renders.sh A B}; b=${2:?}
stamp='rendered_at|generated_at|rendered at|Generated 20|"measurements"|dirty'
status=0
for f in $(cd "$a" && find reports -name report.md -o -name results.json -o -name deployment.md | grep -v variants | sort); do
  if diff -q <(grep -vE "$stamp" "$a/$f") <(grep -vE "$stamp" "$b/$f") >/dev/null; then echo "same     $f"
  else echo "DIFFERS  $f"; diff <(grep -vE "$stamp" "$a/$f") <(grep -vE "$stamp" "$b/$f") | head -${LINES_SHOWN:-12}; status=1; fi
done
exit $status
