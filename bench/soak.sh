#!/usr/bin/env bash
# soak.sh: the crash-safety suite of e2e/fault_test.go for many more kill
# points than CI runs. The built controller is SIGKILLed at the Nth Docker
# write of a first deploy and of an update (networks, configs, secrets,
# services, records, prunes) by a socket proxy in front of dockerd, then
# restarted until it converges; every point is checked for objects present
# exactly once, records 1..n without gap or duplicate, no orphan after the
# prune, no create sent twice and no service updated more than it changed.
#
#   bash bench/soak.sh [POINTS] [SEED]   (default 500 points per scenario,
#                                         seed from the clock)
#
# The figures (points converged, restarts needed) are printed at the end;
# with a failure, the seed in the output reproduces its order.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
points=${1:-500}
seed=${2:-$(date +%s%N)}
bash scripts/swarm-up.sh >/dev/null 2>&1
bash scripts/build-test-image.sh >/dev/null 2>&1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
status=0
FLOTILLA_REQUIRE_SWARM=1 FLOTILLA_FAULT_RUNS=$points FLOTILLA_FAULT_SEED=$seed \
  go test -count=1 -timeout 6h -run 'TestCrashSafety' -v ./e2e/ >"$log" 2>&1 || status=$?
end=$(date +%s)

grep -E -- '--- FAIL|fault_test.go:[0-9]+: ' "$log" | grep -v 'controller logs' | head -50 || true
passed=$(grep -cE -- '^\s+--- PASS: TestCrashSafety.*/points/' "$log" || true)
failed=$(grep -cE -- '^\s+--- FAIL: TestCrashSafety.*/points/' "$log" || true)
printf '\nsoak: seed %s, %s kill points passed, %s failed, %ss wall\n' "$seed" "$passed" "$failed" "$((end - start))"
if [ "$status" -ne 0 ]; then
  echo "full log kept at $log.kept"; cp "$log" "$log.kept"
fi
exit "$status"
