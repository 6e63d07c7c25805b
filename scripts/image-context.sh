# image-context.sh is sourced by release.sh and build-flotilla-image.sh: it lays
# out what the Dockerfile copies, beside the binaries already in a directory.
#
#   image_context DIR   # DIR holds flotilla-<version>-linux-<arch>
image_context() {
  local dir=$1
  mkdir -p "$dir/rootfs/data" "$dir/rootfs/tmp"
  chmod 0755 "$dir/rootfs" "$dir/rootfs/data"
  chmod 1777 "$dir/rootfs/tmp"
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    cp /etc/ssl/certs/ca-certificates.crt "$dir/ca-certificates.crt"
  else
    # The image still builds; https remotes will not verify in it.
    printf 'image-context: no CA bundle at /etc/ssl/certs/ca-certificates.crt; the image has an empty one\n' >&2
    : >"$dir/ca-certificates.crt"
  fi
  # Only the image's own files go to the daemon.
  printf '%s\n' '*' '!rootfs' '!ca-certificates.crt' '!flotilla-*-linux-*' '*.cdx.json' >"$dir/.dockerignore"
}

# build_image DIR VERSION ARCH TAG builds TAG from the repository's Dockerfile
# with DIR as the context. The classic builder (Debian's docker 20.10) does
# the work: nothing is pulled, FROM scratch needs no base.
build_image() {
  local dir=$1 version=$2 arch=$3 tag=$4 root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  DOCKER_BUILDKIT=0 docker build --quiet \
    -f "$root/Dockerfile" \
    --build-arg "VERSION=$version" --build-arg "TARGETARCH=$arch" \
    -t "$tag" "$dir" >/dev/null
}
