#!/usr/bin/env bash
# compare-engines.sh: bench/compare.sh on both engines the suite runs on,
# Debian's 20.10 and the current engine (scripts/engine.sh), one after the
# other in one run, then the two median rows side by side. Each engine's
# ratios compare Flotilla with `docker stack deploy` on that same engine.
#
#   bash bench/compare-engines.sh [SERVICES] [ROUNDS]   (default 20 5)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
n=${1:-20}
rounds=${2:-5}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for engine in debian current; do
  printf '\n==> %s engine\n' "$engine"
  BENCH_ENGINE=$([ "$engine" = current ] && echo current || true) \
    bash bench/compare.sh "$n" "$rounds" | tee "$out/$engine"
done

printf '\n%-44s %12s %12s %8s   %12s %12s %8s\n' "" "docker (s)" "flotilla (s)" ratio "docker (s)" "flotilla (s)" ratio
printf '%-44s %34s   %34s\n' "medians of $rounds rounds, $n services" "------------ first deploy ------------" "--------- unchanged redeploy ---------"
for engine in debian current; do
  label=$(sed -n 's/^engine: Docker \([^,]*\), API \([0-9.]*\).*/\1 (API \2)/p' "$out/$engine")
  grep '^median' "$out/$engine" | sed "s/^median       /$(printf '%-45s' "$label")/"
done
