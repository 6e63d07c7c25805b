#!/usr/bin/env bash
# stress-suite.sh: the whole suite (scripts/test.sh) RUNS times in a row on a
# machine whose cores are kept busy by stress-ng, to show that the tests wait
# on conditions and not on luck. Nothing is retried: every run's failed tests
# are listed by name, and the script fails if any run failed.
#
#   bash scripts/stress-suite.sh [RUNS]     RUNS defaults to 3
#   STRESS_LOAD=100 bash scripts/stress-suite.sh   per-core load in percent (default 60)
#
# The logs stay in the directory printed at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
runs=${1:-3}
load=${STRESS_LOAD:-60}

command -v stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng >/dev/null; }

logs=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-stress.XXXXXX")
stress-ng --cpu "$(nproc)" --cpu-load "$load" --timeout 0 --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
echo "stress-suite: stress-ng --cpu $(nproc) --cpu-load $load (pid $stress); $runs runs of scripts/test.sh at $(git rev-parse --short HEAD)"

failed=0
for i in $(seq 1 "$runs"); do
  start=$SECONDS
  if bash scripts/test.sh >"$logs/run$i.log" 2>&1; then
    echo "stress-suite: run $i passed in $((SECONDS - start))s"
  else
    failed=$((failed + 1))
    echo "stress-suite: run $i FAILED in $((SECONDS - start))s; failed tests:"
    if grep -q '^==> FAILED in' "$logs/run$i.log"; then
      sed -n '/^==> FAILED in/,$p' "$logs/run$i.log" | sed 's/^/    /'
    else
      tail -n 20 "$logs/run$i.log" | sed 's/^/    /' # failed outside go test
    fi
  fi
done
echo "stress-suite: $((runs - failed)) of $runs runs passed; logs in $logs"
[ "$failed" -eq 0 ]
