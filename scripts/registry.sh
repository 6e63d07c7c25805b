#!/usr/bin/env bash
# registry.sh: build the real container registry that image automation talks
# to, CNCF Distribution (the reference implementation of the Docker Registry
# HTTP API v2 and of the OCI distribution spec), from its Go module (no
# download outside the module proxy), static (CGO_ENABLED=0), once; later runs
# reuse the cached binary. Prints one line for the caller to eval:
#   FLOTILLA_REGISTRY=<binary>
#
# Tests start it as a process on loopback with a temporary config
# (filesystem storage) and push images to it over the HTTP API themselves.
#
# Built without the release's optional tags (include_oss, include_gcs: cloud
# storage drivers; the tests use the filesystem driver). Every module of its
# build list was served by the module proxy here; nothing is patched.
#
# The first build took 10 min (600 s wall, 3m10s user, downloads included)
# on two cores busy with three other helpers' builds (Vault, SOPS); the
# binary is about 56 MB. v3.1.2 is the newest version the proxy listed
# (v3.0.0, v3.1.1, v3.1.2).
#
# Safe to run concurrently (flock).
set -euo pipefail

version=${REGISTRY_VERSION:-v3.1.2}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/registry-$version"
bin="$dir/registry"
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

log() { printf 'registry.sh: %s\n' "$*" >&2; }

if [ ! -x "$bin" ]; then
  src=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "github.com/distribution/distribution/v3@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -d "$src" ]; then
    log "github.com/distribution/distribution/v3@$version did not download"
    exit 1
  fi
  log "building the registry $version from its module (static); cached in $dir"
  start=$(date +%s)
  (cd "$src" && GOWORK=off GOFLAGS=-mod=mod go mod download)
  # Build beside the target and move into place, so an interrupted build
  # never leaves a binary that the next run would take as done.
  (cd "$src" && nice -n 10 env GOWORK=off CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath \
    -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$version" \
    -o "$bin.tmp" ./cmd/registry)
  mv "$bin.tmp" "$bin"
  log "built in $(( $(date +%s) - start ))s"
fi

echo "FLOTILLA_REGISTRY=$bin"
