#!/usr/bin/env bash
# fuzz.sh: run every fuzz target of the project with Go's fuzzing engine.
# `go test` alone runs only each target's seed corpus; this mutates inputs.
#
#   bash scripts/fuzz.sh                 # smoke: 5s a target (scripts/test.sh runs 3s)
#   FUZZTIME=1h bash scripts/fuzz.sh     # longer: an hour a target
#   FUZZTIME=10m bash scripts/fuzz.sh ./chartengine   # the targets of some packages only
#
# A failing input is written under the package's testdata/fuzz/FuzzX/, where
# plain `go test` then replays it: commit it with the fix. The summary line
# counts targets run and failed and the time taken, and the script exits 1
# on any failure. FUZZPARALLEL=N caps the fuzzing workers (default: one a
# core).
#
# The engine runs on Go 1.27 (FUZZGOTOOLCHAIN, default go1.27.3, taken from
# the Go module proxy on first use) while the project builds on its go.mod
# Go: Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when -fuzztime ends on a busy machine, with no input
# found (go.dev/issue/75804, fixed in 1.27). It failed CI on 65cfef2.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
fuzztime=${FUZZTIME:-5s}
fuzzgo=${FUZZGOTOOLCHAIN:-go1.27.3}
if ! v=$(GOTOOLCHAIN=$fuzzgo go version 2>&1); then
  echo "fuzz: cannot get the Go toolchain $fuzzgo from the module proxy (FUZZGOTOOLCHAIN): $v" >&2
  exit 1
fi
echo "fuzz: engine on $v"
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

mapfile -t targets < <(
  for p in "${pkgs[@]}"; do
    dir=${p%/...}
    grep -rl --include='*_test.go' '^func Fuzz' "$dir" 2>/dev/null
  done | sort -u | while read -r f; do
    d=$(dirname "$f")
    grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |./$d |"
  done | sed 's|\./\./|./|' | sort -u
)

passed=0 failed=0 failures=() total_start=$SECONDS
parallel=()
[ -z "${FUZZPARALLEL:-}" ] || parallel=(-parallel "$FUZZPARALLEL")
log=${TMPDIR:-/tmp}/flotilla-fuzz
mkdir -p "$log"
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  printf '==> %s %s (%s)\n' "$pkg" "$name" "$fuzztime"
  start=$SECONDS
  if GOTOOLCHAIN=$fuzzgo go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "${parallel[@]}" "$pkg" >"$log/$name.log" 2>&1; then
    passed=$((passed + 1))
    execs=$(grep -oE 'execs: [0-9]+' "$log/$name.log" | tail -n 1)
    printf '    ok %s in %ds (%s)\n' "$name" $((SECONDS - start)) "${execs:-execs: ?}"
  else
    failed=$((failed + 1))
    failures+=("$pkg $name")
    cat "$log/$name.log"
    printf '    FAIL %s in %ds\n' "$name" $((SECONDS - start))
    # The engine writes the failing input where plain go test replays it.
    git status --porcelain --untracked-files=all -- "$pkg/testdata/fuzz/$name" | sed 's|^?? |    finding recorded: |'
  fi
done
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "fuzz: ${#targets[@]} targets, $passed passed, $failed failed, ${fuzztime} each, $((SECONDS - total_start))s in all"
[ "$failed" -eq 0 ]
