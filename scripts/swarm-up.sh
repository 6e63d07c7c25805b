#!/usr/bin/env bash
# swarm-up.sh brings this machine to a single-node Docker swarm, idempotently.
#
# On a fresh Debian machine as root it installs Debian's docker.io when dockerd is
# missing, starts dockerd when the daemon does not answer, and initialises a swarm
# when this node is not a manager. Running it again on a ready machine changes nothing.
set -euo pipefail

log() { printf 'swarm-up: %s\n' "$*" >&2; }

if ! command -v dockerd >/dev/null 2>&1; then
  log "dockerd missing: installing Debian's docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi

answering() { docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

if ! answering; then
  log "dockerd not answering: starting it"
  mkdir -p /var/log
  # Started detached from this shell so it outlives the script; its log is kept for failures.
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    answering && break
    sleep 1
  done
  if ! answering; then
    log "dockerd did not answer within 60s; last log lines:"
    tail -n 30 /var/log/dockerd.log >&2 || true
    exit 1
  fi
fi

state=$(docker info --format '{{.Swarm.LocalNodeState}}/{{.Swarm.ControlAvailable}}')
case "$state" in
  active/true) ;;
  active/false)
    log "node is a swarm worker, not a manager; refusing to change it"
    exit 1 ;;
  *)
    log "initialising single-node swarm"
    docker swarm init --advertise-addr 127.0.0.1 >/dev/null ;;
esac

log "swarm ready: $(docker info --format 'engine {{.ServerVersion}}, node {{.Swarm.NodeID}}')"
