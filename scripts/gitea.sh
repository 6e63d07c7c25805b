#!/usr/bin/env bash
# gitea.sh: build the real forge the preview tests talk to, Gitea, from its
# Go module (no download outside the module registry), once; later runs reuse
# the cached binary. Prints two lines for the caller to eval:
#   FLOTILLA_GITEA=<binary>  FLOTILLA_GITEA_ROOT=<module source, for locales>
# The first build takes 12 to 15 minutes on two cores; a warm Go build cache
# makes it a minute or two. Safe to run concurrently (flock).
set -euo pipefail

version=${GITEA_VERSION:-v1.27.3}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/gitea-$version"
bin="$dir/gitea"
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

# The module's source holds the options (locales) Gitea reads at start.
src=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "code.gitea.io/gitea@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src" ]; then
  echo "gitea.sh: code.gitea.io/gitea@$version did not download" >&2
  exit 1
fi

if [ ! -x "$bin" ]; then
  command -v gcc >/dev/null || { apt-get update -qq && apt-get install -y -qq gcc >/dev/null; }
  echo "gitea.sh: building Gitea $version from its module (sqlite, cgo); cached in $dir" >&2
  start=$(date +%s)
  (cd "$src" && go mod download)
  # Build beside the target and move into place, so an interrupted build
  # never leaves a binary that the next run would take as done.
  (cd "$src" && nice -n 10 env CGO_ENABLED=1 go build \
    -tags 'sqlite sqlite_unlock_notify' -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
  echo "gitea.sh: built in $(( $(date +%s) - start ))s" >&2
fi

echo "FLOTILLA_GITEA=$bin"
echo "FLOTILLA_GITEA_ROOT=$src"
