#!/usr/bin/env bash
# vault.sh: build the real secret store the secretstore tests read from,
# HashiCorp Vault, from its Go module (no download outside the module proxy),
# static (CGO_ENABLED=0), once; later runs reuse the cached binary. Prints one
# line for the caller to eval:
#   FLOTILLA_VAULT=<binary> FLOTILLA_VAULT_PLUGIN_DIR=<dir>
#
# Built with the release's "minimal" tag (Vault's BUILD_MINIMAL): the core
# with the built-in KV secrets engine and the AppRole, JWT/OIDC and userpass
# auth methods the tests use; the cloud auth methods, database and other
# secrets plugins (and their SDKs) are left out. No "ui" tag: the module has no
# built UI; the HTTP API is unaffected.
#
# The minimal build has no AWS auth method, so that one is built as well,
# alone, as the external plugin Vault's module ships for it
# (builtin/credential/aws/cmd/aws, unpatched), into
# <dir>/plugins/vault-plugin-auth-aws. A dev server started with
# -dev-plugin-dir=<dir>/plugins can register it in its catalog and mount it
# (secretstore/vaulttest does). It links only that method and its AWS SDK
# (aws-sdk-go v1), about 42 MB, where the full Vault build would link every
# cloud SDK; 3 s here with a warm Go build cache (not measured cold).
#
# The module zip leaves out Vault's nested modules (api/, sdk/, api/auth/...),
# which its go.mod replaces with local directories, so the build cannot run
# inside the extracted module. It runs from a throwaway module that requires
# github.com/hashicorp/vault at the exact version: the published vault/api and
# vault/sdk releases its go.mod requires stand in for the local copies, and
# Vault's two non-local replaces are repeated. Nothing is patched.
#
# Measured here, module downloads already cached: with an empty Go build
# cache 1450 s wall (24 min; 12m20s user, 3m34s sys) on two cores shared with
# other builds (load 11-14); with a build cache already holding most of its
# dependencies, 438 s. The binary is about 139 MB.
# Safe to run concurrently (flock).
set -euo pipefail

# v1.21.0, not a later v1.21.x: the sdk/ directory of the later patch
# releases matches no published vault/sdk release (v1.21.4's pki needs
# logical.PkiCertificateCounter, gone from sdk v0.24.0 on, and its transit
# needs the two-result keysutil.RestorePolicy that sdk v0.24.0 brought), so
# they cannot be built from the module proxy. v1.21.0 builds with the
# releases its own go.mod requires (api v1.22.0, sdk v0.20.0).
version=${VAULT_VERSION:-v1.21.0}
cache=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
dir="$cache/vault-$version"
bin="$dir/vault"
mkdir -p "$dir"

exec 9>"$dir/.lock"
flock 9

log() { printf 'vault.sh: %s\n' "$*" >&2; }

mod="$dir/build"

# module writes the throwaway module both builds run from.
module() {
  rm -rf "$mod"
  mkdir -p "$mod"
  cat >"$mod/go.mod" <<MOD
module flotilla.invalid/vaultbuild

go 1.25.3

require github.com/hashicorp/vault $version

// Repeated from Vault's own go.mod (a dependency's replaces do not apply).
replace github.com/99designs/keyring => github.com/Jeffail/keyring v1.2.3

replace github.com/ma314smith/signedxml v1.1.1 => github.com/moov-io/signedxml v1.1.1
MOD
  printf 'package vaultbuild\n\nimport _ "github.com/hashicorp/vault/api"\n' >"$mod/pin.go"
  (cd "$mod" && GOWORK=off GOFLAGS=-mod=mod go mod download github.com/hashicorp/vault)
}

if [ ! -x "$bin" ]; then
  module
  log "building Vault $version from its module (static, minimal); cached in $dir"
  start=$(date +%s)
  # Build beside the target and move into place, so an interrupted build
  # never leaves a binary that the next run would take as done.
  (cd "$mod" && nice -n 10 env GOWORK=off CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath \
    -tags 'minimal' -ldflags "-s -w" -o "$bin.tmp" github.com/hashicorp/vault)
  mv "$bin.tmp" "$bin"
  log "built in $(( $(date +%s) - start ))s"
fi

plugin="$dir/plugins/vault-plugin-auth-aws"
if [ ! -x "$plugin" ]; then
  [ -f "$mod/go.mod" ] || module
  mkdir -p "$dir/plugins"
  log "building Vault's aws auth plugin $version from its module; cached in $dir/plugins"
  start=$(date +%s)
  (cd "$mod" && nice -n 10 env GOWORK=off CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath \
    -ldflags "-s -w" -o "$plugin.tmp" github.com/hashicorp/vault/builtin/credential/aws/cmd/aws)
  mv "$plugin.tmp" "$plugin"
  log "built in $(( $(date +%s) - start ))s"
fi

echo "FLOTILLA_VAULT=$bin"
echo "FLOTILLA_VAULT_PLUGIN_DIR=$dir/plugins"
