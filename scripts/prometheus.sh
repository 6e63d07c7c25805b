#!/usr/bin/env bash
# prometheus.sh: build the real metrics server rollout analysis queries,
# Prometheus, from its Go module (no download outside the module proxy),
# static (CGO_ENABLED=0), once; later runs reuse the cached binary. Prints one
# line for the caller to eval:
#   FLOTILLA_PROMETHEUS=<binary>
#
# Module versions v0.3xx.y are Prometheus 3.xx.y. Built with the tags of the
# release (netgo) plus remove_all_sd: the tests scrape static targets only, so
# the cloud service discoveries (AWS, Azure, GCE, Kubernetes, …) and their
# SDKs are left out. Without the builtinassets tag the web UI is not embedded
# (the module has no built UI); the HTTP API is unaffected.
#
# The module zip carries Prometheus's go.work, which names modules the zip
# leaves out, so the build runs with GOWORK=off. Every module of its build
# list was served by the module proxy here; nothing is patched.
#
# The first build took 11 min (684 s, downloads included) on two cores busy
# with other builds and tests; a warm Go build cache should make it a minute
# or two (not measured). The binary is about 52 MB.
# Safe to run concurrently (flock).
set -euo pipefail

version=${PROMETHEUS_VERSION:-v0.316.0}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/prometheus-$version"
bin="$dir/prometheus"
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

log() { printf 'prometheus.sh: %s\n' "$*" >&2; }

if [ ! -x "$bin" ]; then
  src=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus/prometheus@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -d "$src" ]; then
    log "github.com/prometheus/prometheus@$version did not download"
    exit 1
  fi
  log "building Prometheus $version from its module (static); cached in $dir"
  start=$(date +%s)
  (cd "$src" && GOWORK=off GOFLAGS=-mod=mod go mod download)
  # Build beside the target and move into place, so an interrupted build
  # never leaves a binary that the next run would take as done.
  (cd "$src" && nice -n 10 env GOWORK=off CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath \
    -tags 'netgo remove_all_sd' -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" \
    -o "$bin.tmp" ./cmd/prometheus)
  mv "$bin.tmp" "$bin"
  log "built in $(( $(date +%s) - start ))s"
fi

echo "FLOTILLA_PROMETHEUS=$bin"
