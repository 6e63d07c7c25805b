#!/usr/bin/env bash
# release.sh builds a release of Flotilla into dist/ (gitignored):
#
#   flotilla-VERSION-linux-amd64, flotilla-VERSION-linux-arm64
#       static binaries (CGO_ENABLED=0, -trimpath, no VCS stamp), reporting
#       VERSION in `flotilla version` and /metrics' flotilla_build_info
#   flotilla-VERSION-linux-ARCH.cdx.json
#       a CycloneDX SBOM per binary, read from the binary's own module list
#       by cyclonedx-gomod (bin mode)
#   SHA256SUMS
#       checksums of the binaries and SBOMs (sha256sum -c SHA256SUMS)
#   and the image flotilla:VERSION, from the repository's Dockerfile with
#   dist/ as the build context, for this machine's architecture.
#
#   scripts/release.sh VERSION        # e.g. 1.4.0
#
# It starts from an empty dist/ each time, so running it twice for one
# VERSION and one source tree gives the same files (the builds are
# reproducible: same bytes, same checksums).
#
# cyclonedx-gomod is built once from the Go module proxy and kept in
# ${FLOTILLA_TOOLS:-~/.cache/flotilla/tools}; set FLOTILLA_RELEASE_NO_IMAGE=1
# to skip the image (on a machine without docker).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=image-context.sh
source "$root/scripts/image-context.sh"

log() { printf 'release: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ $# -eq 1 ]] || die "usage: scripts/release.sh VERSION"
version=$1
# The version becomes a file name, an image tag and a metric label.
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$ ]] ||
  die "VERSION $version: want letters, digits, '.', '_' or '-' (an image tag)"

cdx_version=v1.10.0
tools=${FLOTILLA_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/tools}
cdx=$tools/cyclonedx-gomod-$cdx_version/cyclonedx-gomod
if [[ ! -x $cdx ]]; then
  log "building cyclonedx-gomod $cdx_version into $(dirname "$cdx")"
  mkdir -p "$(dirname "$cdx")"
  (cd "$(dirname "$cdx")" && GOFLAGS= GOBIN=$(dirname "$cdx") \
    go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$cdx_version")
fi

dist=$root/dist
rm -rf "$dist"
mkdir -p "$dist"

for arch in amd64 arm64; do
  bin=flotilla-$version-linux-$arch
  log "building $bin"
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
    -ldflags="-s -w -X main.version=$version" -o "$dist/$bin" ./cmd/flotilla)
  log "SBOM of $bin"
  # No random serial number and no timestamp: the SBOM is reproducible too.
  "$cdx" bin -json -noserial -notimestamp -version "$version" -output "$dist/$bin.cdx.json" "$dist/$bin"
done

(cd "$dist" && sha256sum flotilla-"$version"-linux-* >SHA256SUMS)
log "checksums in dist/SHA256SUMS"

if [[ ${FLOTILLA_RELEASE_NO_IMAGE:-} == 1 ]]; then
  log "image skipped (FLOTILLA_RELEASE_NO_IMAGE=1)"
  exit 0
fi
arch=$(cd "$root" && go env GOARCH)
image_context "$dist"
build_image "$dist" "$version" "$arch" "flotilla:$version"
log "built image flotilla:$version (linux/$arch)"
