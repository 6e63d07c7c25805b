#!/usr/bin/env bash
# build-test-image.sh builds the images integration tests run, without a registry:
# the static testimage program imported as flotilla-test/app:1 and :2.
#
# :2 is the same program with one more label, so its image id differs: tests that
# change a service's image need two local images that both run. A rebuild is
# skipped when both tags exist and carry the hash of the current source.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repo=flotilla-test/app
label=io.flotilla.test-source

log() { printf 'build-test-image: %s\n' "$*" >&2; }

# Test packages run in parallel and each may call this; one builds, the rest wait.
exec 9>"${TMPDIR:-/tmp}/flotilla-build-test-image.lock"
flock 9

# The hash covers the program and the toolchain that builds it.
src_hash=$( { cat "$root"/testimage/*.go; go env GOVERSION; } | sha256sum | cut -c1-16)

current() {
  docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$1" 2>/dev/null || true
}

if [[ "$(current "$repo:1")" == "$src_hash" && "$(current "$repo:2")" == "$src_hash" ]]; then
  log "$repo:1 and :2 are current ($src_hash)"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

log "building testimage ($src_hash)"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/app" ./testimage)

for variant in 1 2; do
  tar -C "$tmp" -cf - app | docker import \
    -c 'ENTRYPOINT ["/app"]' \
    -c "LABEL $label=$src_hash" \
    -c "LABEL io.flotilla.test-variant=$variant" \
    - "$repo:$variant" >/dev/null
  log "imported $repo:$variant"
done
