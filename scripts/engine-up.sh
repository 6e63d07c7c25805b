#!/usr/bin/env bash
# engine-up.sh: a current Docker Engine (scripts/engine.sh builds it) as a
# single-node swarm beside the main daemon, in its own network namespace.
#
# Usage (as root):
#   engine-up.sh        idempotent: starts the engine if it does not answer,
#                       makes it a swarm manager if it is not one, loads the
#                       test images (flotilla-test/app:1 and :2, from the main
#                       daemon) if missing; prints for the caller to eval:
#                         DOCKER_HOST=unix:///run/flotilla-engine/docker.sock
#                         FLOTILLA_ENGINE_VERSION=<server version>/<API version>
#                         FLOTILLA_ENGINE_NETNS=/var/run/netns/flotilla-engine
#                       (tests serve what its host-network containers must
#                       reach, a git server, inside that namespace)
#   engine-up.sh down   stops it and removes everything up made
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ns=flotilla-engine
run=/run/flotilla-engine
data=/var/lib/flotilla-engine
sock="$run/docker.sock"
main=unix:///var/run/docker.sock
images=(flotilla-test/app:1 flotilla-test/app:2)

log() { printf 'engine-up: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
dk() { docker -H "unix://$sock" "$@"; }
answering() { dk version --format '{{.Server.Version}}' >/dev/null 2>&1; }
daemon_pid() {
  local p
  p=$(cat "$run/dockerd.pid" 2>/dev/null) || return 1
  [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null && echo "$p"
}

up() {
  eval "$(bash "$root/scripts/engine.sh")"
  local bin=$FLOTILLA_ENGINE_DIR t
  mkdir -p "$run/exec" "$data"
  exec 9>"$run/.lock"
  flock -w 120 9 || die "lock $run/.lock held for 120s"
  if ! answering; then
    daemon_pid >/dev/null && die "dockerd runs (pid $(daemon_pid)) but does not answer; engine-up.sh down first"
    [[ -e "/var/run/netns/$ns" ]] || ip netns add "$ns"
    ip -n "$ns" link set lo up
    [[ -s "$run/daemon.json" ]] || echo '{}' >"$run/daemon.json"
    rm -f "$sock"
    # nsenter --net keeps the host's /sys (the recipe in the design notes);
    # docker-proxy and runc come first on its PATH; its own containerd
    # namespaces keep it apart from the main daemon's.
    (PATH="$bin:$PATH" setsid nohup nsenter --net="/var/run/netns/$ns" \
      "$bin/dockerd" --config-file "$run/daemon.json" \
      --data-root "$data" --exec-root "$run/exec" -H "unix://$sock" --pidfile "$run/dockerd.pid" \
      --iptables=false --ip6tables=false --bridge=none \
      --add-runtime "newrunc=$bin/runc" --default-runtime newrunc --seccomp-profile unconfined \
      --containerd-namespace "$ns" --containerd-plugins-namespace "$ns-plugins" \
      >>"$run/dockerd.log" 2>&1 </dev/null 9>&- &)
    for t in $(seq 1 120); do answering && break; sleep 0.5; done
    answering || { tail -n 20 "$run/dockerd.log" >&2; die "dockerd did not answer within 60s"; }
  fi
  if [[ "$(dk info --format '{{.Swarm.LocalNodeState}}/{{.Swarm.ControlAvailable}}')" != active/true ]]; then
    dk swarm init --advertise-addr 127.0.0.1 >/dev/null
  fi
  local img want have missing=()
  for img in "${images[@]}"; do
    docker -H "$main" image inspect "$img" >/dev/null 2>&1 ||
      { DOCKER_HOST=$main bash "$root/scripts/build-test-image.sh"; break; }
  done
  # The router of the rollout tests (scripts/traefik.sh imports it into the
  # main daemon) goes along when the main daemon has it.
  local extra
  extra=$(docker -H "$main" image ls --format '{{.Repository}}:{{.Tag}}' flotilla-test/traefik 2>/dev/null || true)
  [[ -z "$extra" ]] || images+=($extra)
  for img in "${images[@]}"; do
    want=$(docker -H "$main" image inspect --format '{{.Id}}' "$img")
    have=$(dk image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)
    [[ "$want" == "$have" ]] || missing+=("$img")
  done
  [[ ${#missing[@]} -eq 0 ]] || docker -H "$main" save "${missing[@]}" | dk load -q >/dev/null
  echo "DOCKER_HOST=unix://$sock"
  echo "FLOTILLA_ENGINE_VERSION=$(dk version --format '{{.Server.Version}}/{{.Server.APIVersion}}')"
  echo "FLOTILLA_ENGINE_NETNS=/var/run/netns/$ns"
}

down() {
  [[ -d "$run" || -e "/var/run/netns/$ns" ]] || return 0
  mkdir -p "$run"
  exec 9>"$run/.lock"
  flock -w 120 9 || die "lock $run/.lock held for 120s"
  answering && timeout 15 dk swarm leave --force >/dev/null 2>&1 || true
  local pid t p rest=""
  if pid=$(daemon_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    for t in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Its containerd and shims, which can outlive a killed dockerd.
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$run/exec/" && rest+=" ${p#/proc/}"
  done
  [[ -z "$rest" ]] || kill -KILL $rest 2>/dev/null || true
  local mnt
  for mnt in $(awk -v a="$run" -v b="$data" '$2==a || $2==b || index($2,a"/")==1 || index($2,b"/")==1 {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$mnt" 2>/dev/null || true
  done
  [[ -e "/var/run/netns/$ns" ]] && ip netns del "$ns"
  rm -rf "${data:?}" "${run:?}"
  log "engine down"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) sed -n '5,12p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
