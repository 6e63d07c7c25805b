#!/usr/bin/env bash
# build-flotilla-image.sh builds the controller's own image, flotilla:TAG, from
# the repository's Dockerfile with `docker build`: a static flotilla binary for
# this machine's architecture, the host's CA bundle (for https git remotes and
# chart repositories), an empty /data and a 1777 /tmp. The binary reports TAG
# as its version. Nothing is pulled (the image is FROM scratch).
#
#   scripts/build-flotilla-image.sh [TAG]     # TAG defaults to dev
#
# scripts/release.sh builds the same image together with the release's
# binaries, checksums and SBOMs. On a multi-node swarm, load the image into
# every node's daemon (docker save flotilla:TAG | DOCKER_HOST=… docker load)
# or push it to a registry.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=image-context.sh
source "$root/scripts/image-context.sh"
tag=${1:-dev}
image=flotilla:$tag
arch=$(cd "$root" && go env GOARCH)

log() { printf 'build-flotilla-image: %s\n' "$*" >&2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

log "building flotilla ($tag, linux/$arch)"
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
  -ldflags="-s -w -X main.version=$tag" -o "$tmp/flotilla-$tag-linux-$arch" ./cmd/flotilla)
image_context "$tmp"
build_image "$tmp" "$tag" "$arch" "$image"
log "built $image"
