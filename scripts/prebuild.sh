#!/usr/bin/env bash
# prebuild.sh: run the cached builders named (gitea traefik prometheus
# engine ..., each scripts/<name>.sh) at the same time, so that a cold CI
# machine overlaps their module downloads and single-threaded link steps
# instead of paying for them one after another. Each builder is idempotent
# and flock-guarded, so the callers that eval its output afterwards find it
# built and return at once. A warm cache makes this a few seconds.
#
# Usage: bash scripts/prebuild.sh gitea traefik prometheus vault kumo engine
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
logs=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-prebuild.XXXXXX")
for name in "$@"; do
  [ -f "$here/$name.sh" ] || { echo "prebuild.sh: no scripts/$name.sh" >&2; exit 2; }
done
declare -A pids
for name in "$@"; do
  bash "$here/$name.sh" >"$logs/$name.out" 2>"$logs/$name.log" &
  pids[$name]=$!
done
failed=()
for name in "$@"; do
  if wait "${pids[$name]}"; then
    # Builders log to stderr only when they build.
    [ -s "$logs/$name.log" ] && sed "s/^/  /" "$logs/$name.log" >&2
  else
    failed+=("$name")
    echo "prebuild.sh: scripts/$name.sh failed:" >&2
    sed "s/^/  /" "$logs/$name.log" >&2
  fi
done
rm -rf "$logs"
if [ ${#failed[@]} -gt 0 ]; then
  echo "prebuild.sh: failed: ${failed[*]}" >&2
  exit 1
fi
