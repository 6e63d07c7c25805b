#!/usr/bin/env bash
# build-flotilla-image.sh builds the controller's own image without a registry or a
# Dockerfile: a static flotilla binary, the host's CA bundle (for https git remotes
# and chart repositories) and an empty /data, imported with `docker import` as
# flotilla:TAG. The binary reports TAG as its version.
#
#   scripts/build-flotilla-image.sh [TAG]     # TAG defaults to dev
#
# On a multi-node swarm, load the image into every node's daemon
# (docker save flotilla:TAG | DOCKER_HOST=… docker load) or push it to a registry.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=${1:-dev}
image=flotilla:$tag

log() { printf 'build-flotilla-image: %s\n' "$*" >&2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/rootfs/data" "$tmp/rootfs/tmp" "$tmp/rootfs/etc/ssl/certs"
chmod 1777 "$tmp/rootfs/tmp"

log "building flotilla ($tag)"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=$tag" -o "$tmp/rootfs/flotilla" ./cmd/flotilla)
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "$tmp/rootfs/etc/ssl/certs/"
else
  log "no CA bundle at /etc/ssl/certs/ca-certificates.crt; https remotes will not verify"
fi

tar -C "$tmp/rootfs" -cf - . | docker import \
  -c 'ENTRYPOINT ["/flotilla"]' \
  -c 'CMD ["controller", "--help"]' \
  -c 'ENV FLOTILLA_DATA=/data' \
  -c "LABEL io.flotilla.image-tag=$tag" \
  - "$image" >/dev/null
log "imported $image"
