#!/usr/bin/env bash
# quickstart.sh: from a fresh Debian machine (as root) to the example stack
# running on a local single-node swarm, reconciled by Flotilla from git.
#
# It builds flotilla, brings up the swarm, builds the example image locally,
# turns examples/quickstart/repo into a local git repository (once; later runs
# keep your commits), runs one controller pass and waits until every task of
# the example stack runs. Re-running it is safe.
#
#   FOLLOW=1 scripts/quickstart.sh   keeps the controller running afterwards
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
work="$root/.data/quickstart"
log() { printf '\n==> %s\n' "$*"; }

log "building flotilla"
mkdir -p bin
go build -o bin/flotilla ./cmd/flotilla

log "bringing up the swarm"
bash scripts/swarm-up.sh

log "building the example image locally (nothing is pulled)"
bash scripts/build-test-image.sh
docker tag flotilla-test/app:1 flotilla-example/app:1

if ! command -v git >/dev/null 2>&1; then
  log "installing git"
  apt-get update -qq && apt-get install -y -qq git >/dev/null
fi

repo="$work/repo"
if [ ! -d "$repo/.git" ]; then
  log "creating the example git repository at $repo"
  mkdir -p "$repo"
  cp -R examples/quickstart/repo/. "$repo/"
  git -C "$repo" init -q -b main
  git -C "$repo" add -A
  git -C "$repo" -c user.name=quickstart -c user.email=quickstart@example.invalid commit -q -m "quickstart: initial stack"
else
  log "reusing the example git repository at $repo"
fi

sed "s#REPO_URL#$repo#" examples/quickstart/applications.yaml > "$work/applications.yaml"
bin/flotilla validate -f "$work/applications.yaml"

log "one controller pass"
bin/flotilla controller --config "$work/applications.yaml" --data "$work/cache" --once

log "waiting for the example stack's tasks to run"
deadline=$((SECONDS + 120))
while :; do
  want=0; have=0
  while read -r replicas; do
    have=$((have + ${replicas%%/*})); want=$((want + ${replicas##*/}))
  done < <(docker service ls --filter label=com.docker.stack.namespace=quickstart --format '{{.Replicas}}' | awk '{print $1}')
  if [ "$want" -gt 0 ] && [ "$have" -eq "$want" ]; then break; fi
  if [ $SECONDS -ge $deadline ]; then
    echo "quickstart: tasks did not all start within 120s ($have/$want running)" >&2
    docker stack ps quickstart --no-trunc >&2 || true
    exit 1
  fi
  sleep 1
done
docker stack services quickstart

if command -v curl >/dev/null 2>&1; then
  for _ in $(seq 1 20); do
    if out=$(curl -fsS http://127.0.0.1:18080/ 2>/dev/null); then
      log "the web service answers on 127.0.0.1:18080"; echo "$out"; break
    fi
    sleep 0.5
  done
fi

cat <<EON

Flotilla deployed the example stack from $repo.
Commit a change there (e.g. edit GREETING in .env) and run the controller:

  bin/flotilla controller --config $work/applications.yaml --data $work/cache --listen 127.0.0.1:8080 --insecure-no-auth
  bin/flotilla app list --server http://127.0.0.1:8080     # in another terminal

EON
if [ "${FOLLOW:-0}" = 1 ]; then
  exec bin/flotilla controller --config "$work/applications.yaml" --data "$work/cache" --listen 127.0.0.1:8080 --insecure-no-auth
fi
