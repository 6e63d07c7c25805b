#!/usr/bin/env bash
# engine.sh: build a current Docker Engine (dockerd and docker-proxy from the
# moby v2 module, runc from its module) once, from Go modules only (no download
# outside the module proxy and Debian packages); later runs reuse the cached
# binaries. Debian's containerd runs it; Debian's runc 1.1.5 cannot start its
# containers, hence our own runc. Prints one line for the caller to eval:
#   FLOTILLA_ENGINE_DIR=<dir holding dockerd, docker-proxy, runc>
# The first build took 12 min on two cores (idle) and 29 min (busy); a warm Go
# build cache makes it a minute or two. Safe to run concurrently (flock).
set -euo pipefail

version=${ENGINE_VERSION:-v2.0.0-beta.24}
runc_version=${ENGINE_RUNC_VERSION:-v1.5.3}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/engine-$version"
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

if [ ! -x "$dir/dockerd" ] || [ ! -x "$dir/docker-proxy" ] || [ ! -x "$dir/runc" ]; then
  pkgs=()
  command -v containerd >/dev/null || pkgs+=(containerd)
  command -v gcc >/dev/null || pkgs+=(gcc)
  if [ ${#pkgs[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  fi
  echo "engine.sh: building dockerd, docker-proxy $version and runc $runc_version; cached in $dir" >&2
  start=$(date +%s)
  # Build into a temporary directory beside the target and move each binary
  # into place, so an interrupted build never looks done.
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && nice -n 10 env GOBIN="$tmp" GOFLAGS=-buildvcs=false go install \
    "github.com/moby/moby/v2/cmd/dockerd@$version" \
    "github.com/moby/moby/v2/cmd/docker-proxy@$version")
  # runc needs cgo; without the seccomp tag it refuses a seccomp profile, so
  # engine-up.sh starts the daemon with --seccomp-profile unconfined.
  (cd "$tmp" && nice -n 10 env GOBIN="$tmp" CGO_ENABLED=1 GOFLAGS=-buildvcs=false go install \
    "github.com/opencontainers/runc@$runc_version")
  for b in docker-proxy runc dockerd; do mv "$tmp/$b" "$dir/$b"; done
  echo "engine.sh: built in $(( $(date +%s) - start ))s" >&2
fi

echo "FLOTILLA_ENGINE_DIR=$dir"
