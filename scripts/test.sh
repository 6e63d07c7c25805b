#!/usr/bin/env bash
# test.sh: the whole test suite, integration tests included, on a fresh Debian
# machine as root. It sets up the swarm and the test images itself; without a
# swarm the integration tests fail rather than skip (FLOTILLA_REQUIRE_SWARM).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export FLOTILLA_REQUIRE_SWARM=1

step() { printf '\n==> %s\n' "$*"; }

if ! command -v git >/dev/null 2>&1; then
  step "installing git (go-git serves local repositories through git-upload-pack)"
  apt-get update -qq && apt-get install -y -qq git >/dev/null
fi
command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
# The multi-node tests (e2e/multinode) start extra dockerds in namespaces
# through scripts/swarm-nodes.sh: ip, iptables, nsenter, unshare, flock.
nodes_pkgs=()
command -v ip >/dev/null || nodes_pkgs+=(iproute2)
command -v iptables >/dev/null || nodes_pkgs+=(iptables)
{ command -v nsenter && command -v unshare && command -v flock; } >/dev/null || nodes_pkgs+=(util-linux)
# The SSH destination test runs an sshd of its own on loopback and reaches
# it through docker's SSH connection helper, which runs the ssh client.
[ -x /usr/sbin/sshd ] || nodes_pkgs+=(openssh-server)
command -v ssh >/dev/null || nodes_pkgs+=(openssh-client)
if [ ${#nodes_pkgs[@]} -gt 0 ]; then
  step "installing ${nodes_pkgs[*]} (multi-node, many-swarm and SSH tests)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${nodes_pkgs[@]}" >/dev/null
fi

step "swarm"
bash scripts/swarm-up.sh
step "test images"
bash scripts/build-test-image.sh

# What is on Debian's daemon before any suite runs (a developer's stacks, the
# quickstart's example), so that only what the suites leave is reported.
daemon_objects() {
  { docker service ls --format 'service {{.Name}}'; docker config ls --format 'config {{.Name}}'
    docker secret ls --format 'secret {{.Name}}'; } 2>&1 | sort || true
}
objects_before=$(daemon_objects)

# The real servers of the tests and the current Docker Engine are built once
# from their Go modules and cached; on a cold machine the builds run side by
# side (scripts/prebuild.sh), and each step below then finds its build done.
step "servers and the current engine (built once from Go modules, cached; side by side)"
time bash scripts/prebuild.sh gitea traefik prometheus registry vault kumo engine

# The preview, feedback and image pull request tests talk to a real forge: Gitea, built once from its Go
# module and cached (scripts/gitea.sh); without it they would fail, not skip.
step "gitea (the real forge of the preview tests; cached after the first build)"
eval "$(bash scripts/gitea.sh | sed 's/^/export /')"
export FLOTILLA_REQUIRE_GITEA=1
echo "gitea: $FLOTILLA_GITEA ($("$FLOTILLA_GITEA" --version 2>/dev/null | head -1))"

# The router tests run a real Traefik, built once from its Go module and
# cached (scripts/traefik.sh, which also imports it as the image
# flotilla-test/traefik:<version>); without it they would fail, not skip.
step "traefik (the real router of the rollout tests; cached after the first build)"
eval "$(bash scripts/traefik.sh | sed 's/^/export /')"
export FLOTILLA_REQUIRE_TRAEFIK=1
echo "traefik: $FLOTILLA_TRAEFIK ($("$FLOTILLA_TRAEFIK" version 2>/dev/null | head -1 | tr -s ' '))"

# The analysis's Prometheus check is tested against a real Prometheus, built
# once from its Go module and cached (scripts/prometheus.sh); without it the
# test would fail, not skip.
step "prometheus (the real server of the analysis's query test; cached after the first build)"
eval "$(bash scripts/prometheus.sh | sed 's/^/export /')"
export FLOTILLA_REQUIRE_PROMETHEUS=1
echo "prometheus: $FLOTILLA_PROMETHEUS ($("$FLOTILLA_PROMETHEUS" --version 2>/dev/null | head -1))"

# Image automation is tested against a real registry (CNCF Distribution),
# built once from its Go module and cached (scripts/registry.sh); without it
# the registry tests would fail, not skip.
step "registry (the real registry of the image automation tests; cached after the first build)"
eval "$(bash scripts/registry.sh | sed 's/^/export /')"
export FLOTILLA_REQUIRE_REGISTRY=1
echo "registry: $FLOTILLA_REGISTRY ($("$FLOTILLA_REGISTRY" --version 2>/dev/null | head -1))"

# The secret store tests read from a real Vault in dev mode, built once from
# its Go module and cached (scripts/vault.sh); without it they would fail,
# not skip.
step "vault (the real secret store of the secretstore and rotation tests; cached after the first build)"
eval "$(bash scripts/vault.sh | sed 's/^/export /')"
export FLOTILLA_REQUIRE_VAULT=1
echo "vault: $FLOTILLA_VAULT ($("$FLOTILLA_VAULT" version 2>/dev/null | head -1)); aws auth plugin in $FLOTILLA_VAULT_PLUGIN_DIR"

# The AWS Secrets Manager store is tested against kumo, an AWS emulator
# built once from its Go module and cached (scripts/kumo.sh): AWS itself is
# out of reach here. Without it those tests would fail, not skip.
step "kumo (the AWS emulator of the AWS Secrets Manager store tests; cached after the first build)"
eval "$(bash scripts/kumo.sh | sed 's/^/export /')"
export FLOTILLA_REQUIRE_AWSEMU=1
echo "kumo: $FLOTILLA_KUMO"

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:" >&2; echo "$unformatted" >&2; exit 1
fi

step "go vet"
go vet ./...

step "the kms build (SOPS with every cloud key service: docs/secrets.md)"
go build -tags kms ./...
go vet -tags kms ./...

# Every go test stage writes its output to a log of its own; whatever way the
# script ends, the failed tests are listed by name and engine at the end, so
# a flake is named in CI's output (nothing is ever retried).
logs=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-test.XXXXXX")
main_engine=$(docker version --format '{{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null || echo unknown)
failed_tests() {
  local log failed=0
  for log in "$logs"/*.log; do
    [ -e "$log" ] || continue
    if grep -qE '^(--- FAIL|FAIL|panic:)' "$log"; then
      failed=1
      printf '\n==> FAILED in %s:\n' "$(basename "$log" .log)"
      grep -E '^\s*--- FAIL|^FAIL\s|^panic:' "$log" | sed 's/^/    /'
    fi
  done
  [ "$failed" -eq 1 ] || printf '\n==> no test failed (logs in %s)\n' "$logs"
}
trap failed_tests EXIT

# The e2e package alone takes 15-18 minutes with -race on an idle machine;
# the timeout leaves room for a busy one (CI runs on shared cores).
step "go test -race on Docker $main_engine (every package; fuzz targets run their seed corpus)"
go test -race -count=1 -timeout 45m ./... 2>&1 | tee "$logs/engine $main_engine, go test -race.log"

# The swarm suites again on a current Docker Engine (moby v2, API 1.56),
# beside Debian's 20.10 (API 1.41): the compatibility and drift corpora, the
# e2e suite (crash, shutdown and fault tests included), the multi-node tests
# and the backend's own. The engine is built once from Go modules and cached
# (scripts/engine.sh) and runs as a single-node swarm in its own network
# namespace (scripts/engine-up.sh); the docker CLI and the tests' client both
# follow DOCKER_HOST, and the extra nodes of the multi-node and many-swarm
# tests run the same engine (FLOTILLA_NODES_ENGINE_DIR, scripts/swarm-nodes.sh).
step "compat, drift, e2e, multi-node and backend suites on a current Docker Engine (built once, cached)"
engine_dir=$(bash scripts/engine.sh)
engine_env=$(bash scripts/engine-up.sh)
engine_rc=0
(
  eval "$(printf '%s\n' "$engine_env" "$engine_dir" | sed 's/^/export /')"
  export FLOTILLA_NODES_ENGINE_DIR=$FLOTILLA_ENGINE_DIR
  echo "engine: $FLOTILLA_ENGINE_VERSION (server version/API) at $DOCKER_HOST"
  # A log's name is a file name: no slash from "version/API".
  log="$logs/engine ${FLOTILLA_ENGINE_VERSION//\//, API }, swarm suites.log"
  # set -e does not hold left of ||: chain, so no failure is masked.
  go test -count=1 -timeout 15m -run 'TestCorpus' ./compose/compattest/ 2>&1 | tee "$log" &&
    go test -count=1 -timeout 15m -run 'TestUntouchedCorpusStacksReportNoDrift|TestLiveChangeReportsExactlyThatField' ./drift/ 2>&1 | tee -a "$log" &&
    go test -count=1 -timeout 40m ./e2e/ ./e2e/multinode/ ./backend/ 2>&1 | tee -a "$log"
) || engine_rc=$?
bash scripts/engine-up.sh down
[ "$engine_rc" -eq 0 ] || exit "$engine_rc"

# Every test removes what it made; what is on Debian's daemon after both
# stages and was not before them is a cleanup that missed (the ssh swarm test
# and the not-kept memory did once). Reported by name, not yet failed on: a
# developer working beside the suite may add objects of their own.
step "objects left on Debian's daemon by the suites"
left=$(comm -13 <(printf '%s\n' "$objects_before") <(daemon_objects) | sed '/^$/d')
kept=$(printf '%s\n' "$objects_before" | sed '/^$/d' | wc -l)
if [ -n "$left" ]; then printf '%s\n' "$left" | sed 's/^/    left: /'; else echo "none ($kept were there before the suites and are not counted)"; fi

# Under -race the render child's address-space limit fails inside the race
# detector's allocator, so its memory test is skipped there; run it here.
step "renderbox without the race detector (the child's memory limit)"
go test -count=1 ./renderbox/ 2>&1 | tee "$logs/renderbox without -race.log"

step "fuzz smoke (3s a target; FUZZTIME=1h bash scripts/fuzz.sh for a real run)"
FUZZTIME=${FUZZTIME:-3s} bash scripts/fuzz.sh
