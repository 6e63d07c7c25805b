#!/usr/bin/env bash
# kumo.sh: build the AWS emulator the AWS Secrets Manager store is tested
# against, kumo (github.com/sivchari/kumo, an AWS service emulator written in
# Go), from its Go module (no download outside the module proxy), static
# (CGO_ENABLED=0), once; later runs reuse the cached binary. Prints one line
# for the caller to eval:
#   FLOTILLA_KUMO=<binary>
#
# AWS itself cannot be reached from the test machines; kumo serves the
# Secrets Manager JSON API (CreateSecret, GetSecretValue, PutSecretValue,
# DescribeSecret with VersionIdsToStages, ...) on loopback, in memory. It
# does not check signatures or IAM policies, and has no
# ListSecretVersionIds; the tests say so where it matters.
#
# The binary is ./cmd/kumo of the module, which registers every service
# kumo emulates (its build list is the AWS SDK's service clients); nothing is
# patched. The tests run it as `kumo --host 127.0.0.1 --port <free port>`
# with no KUMO_DATA_DIR (nothing persisted).
#
# Measured here, module downloads included, on two cores shared with other
# builds and tests (load 6-16): 1189 s wall (20 min) with an empty Go build
# cache for its packages (most of it compiling the AWS SDK's service
# clients); 5 s once the Go build cache holds them. The binary is about
# 49 MB.
# Safe to run concurrently (flock).
set -euo pipefail

version=${KUMO_VERSION:-v0.33.1}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/kumo-$version"
bin="$dir/kumo"
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

log() { printf 'kumo.sh: %s\n' "$*" >&2; }

if [ ! -x "$bin" ]; then
  src=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "github.com/sivchari/kumo@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -d "$src" ]; then
    log "github.com/sivchari/kumo@$version did not download"
    exit 1
  fi
  log "building kumo $version from its module (static); cached in $dir"
  start=$(date +%s)
  # Build beside the target and move into place, so an interrupted build
  # never leaves a binary that the next run would take as done.
  (cd "$src" && nice -n 10 env GOWORK=off CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath \
    -ldflags "-s -w" -o "$bin.tmp" ./cmd/kumo)
  mv "$bin.tmp" "$bin"
  log "built in $(( $(date +%s) - start ))s"
fi

echo "FLOTILLA_KUMO=$bin"
