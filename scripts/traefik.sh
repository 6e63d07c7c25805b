#!/usr/bin/env bash
# traefik.sh: build the real router progressive delivery splits traffic
# through, Traefik, from its Go module (no download outside the module proxy),
# static (CGO_ENABLED=0), once; later runs reuse the cached binary. Then
# imports it as the local image flotilla-test/traefik:<version> (skipped when
# the image already carries this binary's hash, or when there is no docker),
# so e2e tests can run it as a Swarm service. Prints one line for the caller
# to eval:
#   FLOTILLA_TRAEFIK=<binary>
#
# Why not `go install …@version`: Traefik's go.mod has replace directives,
# which go install refuses, so the module source is copied to a writable
# directory and built there. The module zip holds no web UI (its static files
# are built by node, not shipped), and dashboard.go parses static/index.html:
# the build writes a placeholder page there, so the dashboard serves that
# page; the API (/api/rawdata) is unaffected.
#
# The first build took 36 min (2136 s, downloads included) on two cores busy
# with the test suite and a stress load; a warm Go build cache should make it
# a few minutes (not measured). The binary is about 174 MB.
# Safe to run concurrently (flock).
set -euo pipefail

version=${TRAEFIK_VERSION:-v3.7.13}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/traefik-$version"
bin="$dir/traefik"
image=flotilla-test/traefik:$version
label=io.flotilla.test-source
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

log() { printf 'traefik.sh: %s\n' "$*" >&2; }

# available: whether the module proxy serves module@version. Asked from
# outside any module (the go client's ordinary download), since inside
# Traefik's module the refused modules break the loading of the graph itself.
available() { (cd "$dir" && GOFLAGS=-mod=mod go mod download "$1" >/dev/null 2>&1); }

# required: the version Traefik's go.mod requires of a module (read as text:
# `go list -m` cannot load the graph while a module of it is refused).
required() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$2/go.mod"; }

# patch_unavailable works around modules of Traefik's build list that the
# module proxy here refuses (403 "not available"), each only when refused,
# and says so:
# - the containous fork of go-http-auth pinned by Traefik: the fork's 2020
#   commit (used by Traefik before) replaces it; only the basicAuth and
#   digestAuth middlewares use it.
# - SDKs of six of lego's ~190 ACME DNS providers: lego is built from a
#   writable copy without those providers (edgedns/fastdns, huaweicloud,
#   oraclecloud, sakuracloud, ucloud, yandexcloud), so Traefik answers
#   "unrecognized DNS provider" for them; nothing else in Traefik uses them.
patch_unavailable() {
  local src=$1 lego=github.com/go-acme/lego/v5 legov legodir m p v
  local auth_pin auth_old=v0.4.1-0.20200324110947-a37a7636d23e
  auth_pin=$(awk '$1 == "github.com/abbot/go-http-auth" && $2 == "=>" { print $4; exit }' "$src/go.mod")
  if [ -n "$auth_pin" ] && ! available "github.com/containous/go-http-auth@$auth_pin"; then
    log "patch: github.com/containous/go-http-auth@$auth_pin is refused by the proxy; using @$auth_old"
    (cd "$src" && go mod edit -replace "github.com/abbot/go-http-auth=github.com/containous/go-http-auth@$auth_old")
  fi
  local -A provider=(
    [github.com/akamai/AkamaiOPEN-edgegrid-golang/v13]=edgedns
    [github.com/huaweicloud/huaweicloud-sdk-go-v3]=huaweicloud
    [github.com/nrdcg/oci-go-sdk/common/v1065]=oraclecloud
    [github.com/nrdcg/oci-go-sdk/dns/v1065]=oraclecloud
    [github.com/sacloud/sacloud-sdk-go]=sakuracloud
    [github.com/ucloud/ucloud-sdk-go]=ucloud
    [github.com/yandex-cloud/go-sdk/services/dns]=yandexcloud
  )
  local refused=() drop=()
  for m in "${!provider[@]}"; do
    v=$(required "$m" "$src")
    [ -n "$v" ] || continue
    if ! available "$m@$v"; then
      refused+=("$m"); drop+=("${provider[$m]}")
    fi
  done
  [ ${#refused[@]} -gt 0 ] || return 0
  legov=$(required "$lego" "$src")
  legodir=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "$lego@$legov" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  log "patch: the proxy refuses ${refused[*]}; building $lego@$legov without the DNS providers $(printf '%s\n' "${drop[@]}" | sort -u | tr '\n' ' ')"
  cp -r "$legodir" "$src/_lego"
  chmod -R u+w "$src/_lego"
  for p in $(printf '%s\n' "${drop[@]}" | sort -u); do
    rm -rf "$src/_lego/providers/dns/$p"
    sed -i -e "\|^\t\"$lego/providers/dns/$p\"\$|d" \
      -e "/^\tcase \"$p\"[,:]/,+1d" "$src/_lego/providers/dns/zz_gen_dns_providers.go"
  done
  rm -f "$src/_lego/providers/dns/dns_providers_test.go"
  for m in "${refused[@]}"; do
    (cd "$src/_lego" && go mod edit -droprequire "$m")
    (cd "$src" && go mod edit -droprequire "$m")
  done
  (cd "$src" && go mod edit -replace "$lego=./_lego")
}

if [ ! -x "$bin" ]; then
  src=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "github.com/traefik/traefik/v3@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -d "$src" ]; then
    log "github.com/traefik/traefik/v3@$version did not download"
    exit 1
  fi
  log "building Traefik $version from its module (static); cached in $dir"
  start=$(date +%s)
  # The module cache is read-only; build in a fresh writable copy, and move
  # the binary into place at the end, so an interrupted build never looks done.
  rm -rf "$dir/src"
  cp -r "$src" "$dir/src"
  chmod -R u+w "$dir/src"
  # The placeholder the go:embed of webui/static needs (see the header).
  if [ ! -e "$dir/src/webui/static/index.html" ]; then
    cat >"$dir/src/webui/static/index.html" <<'EOF'
<!doctype html>
<html><head><meta charset="utf-8"><title>Traefik</title></head>
<body><p>Traefik built by Flotilla's scripts/traefik.sh from its Go module: the web UI is not part of the module, so this page stands in for it. The API is at /api/.</p></body></html>
EOF
  fi
  # Traefik's go.mod replaces github.com/traefik/traefik/dynamic/ext by its
  # nested module pkg/config/dynamic/ext, which the module zip leaves out (a
  # zip never holds a nested module). Traefik uses two types of it, ext.HTTP
  # and ext.Router, embedded in its dynamic configuration as extension points
  # that are empty structs in the open-source build (their deepcopy copies
  # them by value); this writes that module.
  ext="$dir/src/pkg/config/dynamic/ext"
  if [ ! -e "$ext/go.mod" ]; then
    mkdir -p "$ext"
    printf 'module github.com/traefik/traefik/dynamic/ext\n\ngo 1.24.0\n' >"$ext/go.mod"
    cat >"$ext/ext.go" <<'EOF'
// Package ext: extension points of Traefik's dynamic configuration, empty in
// the open-source build. Written by Flotilla's scripts/traefik.sh, because the
// module zip leaves out this nested module.
package ext

// HTTP extends dynamic.HTTPConfiguration.
type HTTP struct{}

// Router extends dynamic.Router.
type Router struct{}
EOF
    log "patch: wrote the nested module github.com/traefik/traefik/dynamic/ext (two empty structs) the module zip leaves out"
  fi
  patch_unavailable "$dir/src"
  (cd "$dir/src" && go mod download)
  (cd "$dir/src" && nice -n 10 env CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath \
    -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$version" \
    -o "$bin.tmp" ./cmd/traefik)
  mv "$bin.tmp" "$bin"
  rm -rf "$dir/src"
  log "built in $(( $(date +%s) - start ))s"
fi

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  hash=$(sha256sum "$bin" | cut -c1-16)
  current=$(docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$image is current ($hash)"
  else
    tar -C "$dir" -cf - traefik | docker import \
      -c 'ENTRYPOINT ["/traefik"]' \
      -c "LABEL $label=$hash" \
      - "$image" >/dev/null
    log "imported $image ($hash)"
  fi
else
  log "no docker engine reachable: $image not imported"
fi

echo "FLOTILLA_TRAEFIK=$bin"
