#!/usr/bin/env bash
# swarm-nodes.sh makes a real multi-node Docker swarm on this one machine: extra
# dockerd processes, each in its own network namespace (its own address) and UTS
# namespace (its own hostname, so Swarm sees distinct nodes), with its own data
# root, exec root and socket, joined into one swarm. Tests that need several
# nodes (node loss, global services, several swarms, a 3-manager raft) use it.
#
# Usage (as root):
#   swarm-nodes.sh up NAME N [--workers W] [--owner PID]
#       N nodes NAME-1..NAME-N; the last W are workers (default 0: N managers).
#       NAME-1 creates the swarm. Idempotent: a second up starts what is not
#       running (a killed daemon comes back with its swarm state) and changes
#       nothing else. --owner records a process; gc removes the cluster once
#       that process is gone (a test binary that died before its cleanup).
#   swarm-nodes.sh down NAME         everything up made; nothing to do is fine
#   swarm-nodes.sh status NAME       one line per node:
#       node NAME-I unix:///run/flotilla-nodes/NAME/I/docker.sock ROLE ADDR PID|down
#   swarm-nodes.sh list              the clusters this machine has
#   swarm-nodes.sh gc [PREFIX]       down every cluster (whose name starts with
#                                    PREFIX) whose --owner is gone
#
# NAME is 1-10 characters [a-z0-9] (it goes into interface names, which the
# kernel caps at 15). Each NAME gets its own bridge fb-NAME, its own free
# 10.213.X.0/24 (derived from NAME, the next free one on a clash), node I at
# .(10+I), namespaces fln-NAME-I, runtime files under /run/flotilla-nodes/NAME
# and data roots under /var/lib/flotilla-nodes/NAME, so clusters of different
# names coexist. Images flotilla-test/app:1 and :2 (scripts/build-test-image.sh)
# are copied into every node with docker save | docker load.
#
# With FLOTILLA_NODES_ENGINE_DIR set to the directory scripts/engine.sh
# prints (FLOTILLA_ENGINE_DIR), the nodes run that current Docker Engine, with
# its own runc, instead of the dockerd on PATH: scripts/test.sh runs the
# multi-node tests on both engines that way. The images are then copied from
# the daemon DOCKER_HOST names.
#
# The recipe (nsenter --net rather than ip netns exec, the FORWARD rule,
# --iptables=false --bridge=none) is the one verified in the design notes.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
run_base=/run/flotilla-nodes
data_base=/var/lib/flotilla-nodes
images=(flotilla-test/app:1 flotilla-test/app:2)

log() { printf 'swarm-nodes: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() { sed -n '8,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

check_name() {
  [[ "$1" =~ ^[a-z0-9]{1,10}$ ]] || die "cluster name \"$1\" must be 1-10 characters of [a-z0-9]"
}

# Per-cluster and per-node names, all derived from NAME so down finds them.
bridge() { echo "fb-$1"; }
netns() { echo "fln-$1-$2"; }
veth_host() { echo "fh-$1-$2"; }
veth_ns() { echo "fn-$1-$2"; }
node_run() { echo "$run_base/$1/$2"; }
sock() { echo "$(node_run "$1" "$2")/docker.sock"; }
pidfile() { echo "$(node_run "$1" "$2")/dockerd.pid"; }
dk() { local n=$1 i=$2; shift 2; docker -H "unix://$(sock "$n" "$i")" "$@"; }

# subnet prints the cluster's third octet: the recorded one, or a free one
# derived from NAME. Callers hold the machine-wide lock.
subnet() {
  local n=$1 f="$run_base/$1/subnet" x tries
  if [[ -s "$f" ]]; then cat "$f"; return; fi
  x=$(( $(printf '%s' "$n" | cksum | cut -d' ' -f1) % 250 + 1 ))
  for tries in $(seq 1 250); do
    if [[ -z "$(ip -4 route show "10.213.$x.0/24")" ]] && ! grep -qsx "$x" "$run_base"/*/subnet; then
      mkdir -p "$run_base/$n"
      echo "$x" >"$f"
      echo "$x"
      return
    fi
    x=$(( x % 250 + 1 ))
  done
  die "no free 10.213.X.0/24 subnet"
}

addr() { echo "10.213.$(cat "$run_base/$1/subnet").$((10 + $2))"; }

daemon_pid() {
  local p
  p=$(cat "$(pidfile "$1" "$2")" 2>/dev/null) || return 1
  [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null && echo "$p"
}

answering() { dk "$1" "$2" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

net_up() {
  local n=$1 count=$2 x br
  x=$(subnet "$n")
  br=$(bridge "$n")
  if ! ip link show "$br" >/dev/null 2>&1; then
    ip link add "$br" type bridge
    ip addr add "10.213.$x.1/24" dev "$br"
  fi
  ip link set "$br" up
  # The main dockerd sets FORWARD to DROP and bridged frames pass iptables.
  iptables -C FORWARD -i "$br" -o "$br" -j ACCEPT 2>/dev/null ||
    iptables -I FORWARD -i "$br" -o "$br" -j ACCEPT
  local i ns
  for i in $(seq 1 "$count"); do
    ns=$(netns "$n" "$i")
    [[ -e "/var/run/netns/$ns" ]] || ip netns add "$ns"
    if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
      ip link del "$(veth_host "$n" "$i")" 2>/dev/null || true
      ip link add "$(veth_host "$n" "$i")" type veth peer name "$(veth_ns "$n" "$i")"
      ip link set "$(veth_ns "$n" "$i")" netns "$ns"
      ip -n "$ns" link set "$(veth_ns "$n" "$i")" name eth0
      ip -n "$ns" addr add "$(addr "$n" "$i")/24" dev eth0
      ip link set "$(veth_host "$n" "$i")" master "$br" up
    fi
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    # No default route: a registry lookup then fails at once instead of
    # waiting for a DNS timeout (nothing can be pulled here anyway).
  done
}

start_daemon() {
  local n=$1 i=$2 d ns
  d=$(node_run "$n" "$i")
  ns=$(netns "$n" "$i")
  mkdir -p "$d/exec" "$data_base/$n/$i"
  [[ -s "$d/daemon.json" ]] || echo '{}' >"$d/daemon.json"
  rm -f "$d/docker.sock"
  # nsenter --net keeps the host's /sys (ip netns exec remounts it and dockerd
  # then finds no devices cgroup); unshare --uts gives the node its own
  # hostname, which Swarm takes as the node's name. Its own daemon.json keeps
  # the host's settings out; its own containerd namespaces keep it apart even
  # when a system containerd is shared.
  # The subshell detaches it from this script's jobs (a plain wait must not
  # wait for daemons), and the lock descriptors are closed so a daemon never
  # holds a cluster's lock after this script ends.
  # The current engine (see the header) comes with its own runc: Debian's
  # cannot start its containers, and without seccomp support it refuses a
  # seccomp profile.
  local daemon=(dockerd) path=$PATH
  if [[ -n "${FLOTILLA_NODES_ENGINE_DIR:-}" ]]; then
    daemon=("$FLOTILLA_NODES_ENGINE_DIR/dockerd" --add-runtime "newrunc=$FLOTILLA_NODES_ENGINE_DIR/runc"
      --default-runtime newrunc --seccomp-profile unconfined)
    path="$FLOTILLA_NODES_ENGINE_DIR:$PATH"
  fi
  (PATH=$path setsid nohup nsenter --net="/var/run/netns/$ns" unshare --uts -- sh -c '
    hostname "$1"; shift; exec "$@"' sh "$n-$i" \
    "${daemon[@]}" --config-file "$d/daemon.json" \
    --data-root "$data_base/$n/$i" --exec-root "$d/exec" \
    -H "unix://$d/docker.sock" --pidfile "$d/dockerd.pid" \
    --iptables=false --bridge=none \
    --containerd-namespace "fln-$n-$i" --containerd-plugins-namespace "fln-$n-$i-plugins" \
    >>"$d/dockerd.log" 2>&1 </dev/null 8>&- 9>&- &)
}

wait_daemon() {
  local n=$1 i=$2 t
  for t in $(seq 1 120); do
    answering "$n" "$i" && return 0
    sleep 0.5
  done
  log "node $n-$i did not answer within 60s; last log lines:"
  tail -n 20 "$(node_run "$n" "$i")/dockerd.log" >&2 || true
  return 1
}

load_images() {
  local n=$1 i=$2 img want have missing=()
  for img in "${images[@]}"; do
    want=$(docker image inspect --format '{{.Id}}' "$img" 2>/dev/null) || continue
    have=$(dk "$n" "$i" image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)
    [[ "$want" == "$have" ]] || missing+=("$img")
  done
  [[ ${#missing[@]} -eq 0 ]] || docker save "${missing[@]}" | dk "$n" "$i" load -q >/dev/null
}

swarm_state() { dk "$1" "$2" info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null || echo unknown; }

# a_manager prints the index of a node that is an active manager, or fails.
a_manager() {
  local n=$1 count=$2 i
  for i in $(seq 1 "$count"); do
    [[ "$(dk "$n" "$i" info --format '{{.Swarm.LocalNodeState}}/{{.Swarm.ControlAvailable}}' 2>/dev/null)" == active/true ]] &&
      { echo "$i"; return 0; }
  done
  return 1
}

swarm_up() {
  local n=$1 count=$2 workers=$3 managers i m role token
  managers=$((count - workers))
  if ! m=$(a_manager "$n" "$count"); then
    [[ "$(swarm_state "$n" 1)" == inactive ]] || die "node $n-1 is in no usable swarm (state $(swarm_state "$n" 1)); run down first"
    dk "$n" 1 swarm init --advertise-addr "$(addr "$n" 1)" --listen-addr "$(addr "$n" 1):2377" \
      --default-addr-pool 10.214.0.0/16 >/dev/null
    m=1
  fi
  # Managers join one after another: each join changes the raft membership.
  for i in $(seq 1 "$count"); do
    [[ "$(swarm_state "$n" "$i")" == inactive ]] || continue
    role=manager
    (( i > managers )) && role=worker
    token=$(dk "$n" "$m" swarm join-token -q "$role")
    dk "$n" "$i" swarm join --token "$token" --advertise-addr "$(addr "$n" "$i")" \
      --listen-addr "$(addr "$n" "$i"):2377" "$(addr "$n" "$m"):2377" >/dev/null
  done
}

# wait_ready waits until the manager sees every node Ready, so a test that
# starts right after up sees the whole cluster.
wait_ready() {
  local n=$1 count=$2 m t ready
  for t in $(seq 1 120); do
    if m=$(a_manager "$n" "$count"); then
      ready=$(dk "$n" "$m" node ls --format '{{.Status}}' 2>/dev/null | grep -c '^Ready$' || true)
      (( ready >= count )) && return 0
    fi
    sleep 0.5
  done
  die "cluster $n: not every node Ready within 60s"
}

cmd_up() {
  local n=$1 count=$2 workers=0 owner=""
  shift 2
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --workers) workers=$2; shift 2 ;;
      --owner) owner=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  [[ "$count" =~ ^[1-9]$ ]] || die "N must be 1-9"
  [[ "$workers" =~ ^[0-9]$ ]] && (( workers < count )) || die "--workers must be below N"
  command -v ip >/dev/null && command -v iptables >/dev/null && command -v nsenter >/dev/null ||
    die "needs ip (iproute2), iptables and nsenter/unshare (util-linux)"
  if [[ -n "${FLOTILLA_NODES_ENGINE_DIR:-}" ]]; then
    [[ -x "$FLOTILLA_NODES_ENGINE_DIR/dockerd" && -x "$FLOTILLA_NODES_ENGINE_DIR/runc" ]] ||
      die "FLOTILLA_NODES_ENGINE_DIR=$FLOTILLA_NODES_ENGINE_DIR holds no dockerd and runc (scripts/engine.sh builds them)"
  else
    command -v dockerd >/dev/null || die "needs dockerd (scripts/swarm-up.sh installs it)"
  fi

  mkdir -p "$run_base"
  exec 8>"$run_base/.lock"
  flock -w 120 8 || die "lock $run_base/.lock held for 120s"
  local f="$run_base/$n/shape"
  if [[ -s "$f" && "$(cat "$f")" != "$count $workers" ]]; then
    die "cluster $n is up as $(cat "$f") (nodes workers); run down first"
  fi
  subnet "$n" >/dev/null
  echo "$count $workers" >"$f"
  [[ -z "$owner" ]] || echo "$owner" >"$run_base/$n/owner"
  net_up "$n" "$count"
  flock -u 8
  # From here on only this cluster's own files: a per-cluster lock is enough.
  exec 9>"$run_base/$n/.lock"
  flock -w 120 9 || die "cluster $n: lock held for 120s (another up or down of it?)"

  local i started=()
  local t
  for i in $(seq 1 "$count"); do
    # A daemon just killed or just started may still be between states.
    for t in $(seq 1 40); do
      answering "$n" "$i" || ! daemon_pid "$n" "$i" >/dev/null && break
      sleep 0.25
    done
    answering "$n" "$i" && continue
    daemon_pid "$n" "$i" >/dev/null && die "node $n-$i runs (pid $(daemon_pid "$n" "$i")) but does not answer"
    start_daemon "$n" "$i"
    started+=("$i")
  done
  for i in "${started[@]}"; do wait_daemon "$n" "$i"; done
  for img in "${images[@]}"; do
    docker image inspect "$img" >/dev/null 2>&1 || { bash "$root/scripts/build-test-image.sh"; break; }
  done
  local loads=()
  for i in $(seq 1 "$count"); do load_images "$n" "$i" & loads+=($!); done
  for i in "${loads[@]}"; do wait "$i"; done
  swarm_up "$n" "$count" "$workers"
  wait_ready "$n" "$count"
  cmd_status "$n"
}

cmd_status() {
  local n=$1 count i role pid m
  [[ -s "$run_base/$n/shape" ]] || return 0
  read -r count _ <"$run_base/$n/shape"
  m=$(a_manager "$n" "$count") || m=""
  for i in $(seq 1 "$count"); do
    role=$(dk "$n" "$i" info --format '{{if .Swarm.ControlAvailable}}manager{{else}}worker{{end}}' 2>/dev/null) ||
      role=$( (( i > count - $(cut -d' ' -f2 "$run_base/$n/shape") )) && echo worker || echo manager)
    pid=$(daemon_pid "$n" "$i") || pid=down
    echo "node $n-$i unix://$(sock "$n" "$i") $role $(addr "$n" "$i") $pid"
  done
}

# pids_under prints the processes whose command line names dir: the daemon's
# own containerd and shims, which can outlive a killed dockerd.
pids_under() {
  local dir=$1 p
  for p in /proc/[0-9]*; do
    { tr "\0" " " <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/" && echo "${p#/proc/}"
  done
  return 0
}

# descendants prints every descendant of the given pids.
descendants() {
  ps -e -o pid=,ppid= | awk -v roots=" $* " '
    { parent[$1] = $2 }
    END {
      split(roots, r, " "); for (i in r) inset[r[i]] = 1
      do { grew = 0
        for (p in parent) if (!(p in inset) && (parent[p] in inset)) { inset[p] = 1; grew = 1; out = out " " p }
      } while (grew)
      print out
    }'
}

stop_node() {
  local n=$1 i=$2 d pid t
  d=$(node_run "$n" "$i")
  if pid=$(daemon_pid "$n" "$i"); then
    kill -TERM "$pid" 2>/dev/null || true
    for t in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # What is left (containerd, shims) goes with its whole process tree: a
  # shim's children are the node's container processes, which a killed
  # daemon never stopped.
  local rest
  rest=$(pids_under "$d/exec")
  [[ -z "$rest" ]] || kill -KILL $rest $(descendants $rest) 2>/dev/null || true
  # Mounts the daemon left (container roots, netns files), deepest first.
  local mnt
  for mnt in $(awk -v a="$d" -v b="$data_base/$n/$i" '$2==a || $2==b || index($2,a"/")==1 || index($2,b"/")==1 {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$mnt" 2>/dev/null || true
  done
}

cmd_down() {
  local n=$1 count=9 i
  [[ -d "$run_base/$n" || -n "$(ip link show "$(bridge "$n")" 2>/dev/null)" ]] || return 0
  mkdir -p "$run_base/$n"
  exec 9>"$run_base/$n/.lock"
  flock -w 120 9 || die "cluster $n: lock held for 120s (another up or down of it?)"
  [[ -s "$run_base/$n/shape" ]] && read -r count _ <"$run_base/$n/shape"
  # Leaving first keeps no half-member behind on a daemon that survives.
  for i in $(seq "$count" -1 1); do
    answering "$n" "$i" && timeout 15 docker -H "unix://$(sock "$n" "$i")" swarm leave --force >/dev/null 2>&1 || true
  done
  local stops=()
  for i in $(seq 1 "$count"); do stop_node "$n" "$i" & stops+=($!); done
  for i in "${stops[@]}"; do wait "$i"; done
  for i in $(seq 1 "$count"); do
    ip link del "$(veth_host "$n" "$i")" 2>/dev/null || true
    [[ -e "/var/run/netns/$(netns "$n" "$i")" ]] && ip netns del "$(netns "$n" "$i")"
  done
  while iptables -C FORWARD -i "$(bridge "$n")" -o "$(bridge "$n")" -j ACCEPT 2>/dev/null; do
    iptables -D FORWARD -i "$(bridge "$n")" -o "$(bridge "$n")" -j ACCEPT
  done
  ip link del "$(bridge "$n")" 2>/dev/null || true
  rm -rf "${data_base:?}/$n" "${run_base:?}/$n"
  log "cluster $n down"
}

cmd_list() {
  local d
  for d in "$run_base"/*/; do
    [[ -d "$d" ]] || continue
    echo "$(basename "$d") $(cat "$d/shape" 2>/dev/null || echo '? ?') owner=$(cat "$d/owner" 2>/dev/null || echo -)"
  done
}

cmd_gc() {
  local prefix=${1:-} d n o
  for d in "$run_base"/"$prefix"*/; do
    [[ -s "$d/owner" ]] || continue
    n=$(basename "$d")
    o=$(cat "$d/owner")
    kill -0 "$o" 2>/dev/null && continue
    log "cluster $n: owner $o is gone"
    # One cluster that cannot be taken down does not keep the rest.
    ( cmd_down "$n" ) || log "cluster $n: down failed; left as it is"
  done
}

[[ $# -ge 1 ]] || usage
case "$1" in
  up) [[ $# -ge 3 ]] || usage; check_name "$2"; cmd_up "${@:2}" ;;
  down) [[ $# -eq 2 ]] || usage; check_name "$2"; cmd_down "$2" ;;
  status) [[ $# -eq 2 ]] || usage; check_name "$2"; cmd_status "$2" ;;
  list) cmd_list ;;
  gc) [[ $# -le 2 ]] || usage; [[ $# -eq 1 ]] || check_name "$2"; cmd_gc "${2:-}" ;;
  *) usage ;;
esac
