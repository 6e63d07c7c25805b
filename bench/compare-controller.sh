#!/usr/bin/env bash
# compare-controller.sh: the first deploy of a SERVICES-service stack by a
# running controller, side by side with `docker stack deploy --resolve-image
# never` of the same stack on this swarm, in ROUNDS alternating rounds.
#
# compare.sh times `controller --once`, a process started for each deploy:
# its figure carries process start, a first clone and cold caches, which a
# controller pays once. Here one controller (the built binary) runs for the
# whole comparison; each round adds an application for a fresh stack to its
# applications file and sends SIGHUP. Two Flotilla figures are printed:
#
#   pass     the controller's time for that application's first pass (git
#            remote check, render, plan, the writes, the record,
#            read-back, sweep, confirmation), from its own
#            flotilla_reconcile_duration_seconds histogram;
#   reload   from SIGHUP until the event stream announces the
#            application's sync.succeeded (a subscription opened before the
#            signal, so nothing polls the API while the pass runs and takes
#            the cores from it): the pass plus the reload of the file and the
#            start of its batch. The API is then asked once that the
#            application is Synced at revision 1.
#
# docker's figure is the wall time of its process, as in compare.sh.
#
# Every application reads the same repository, so the controller has it
# cached and a pass's git work is the remote check. With NEW_REPO=1 each
# round's application reads a repository of its own, which its first pass
# clones.
#
#   bash bench/compare-controller.sh [SERVICES] [ROUNDS]   (default 20 12; FLOTILLA=BINARY times that build; NEW_REPO=1)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh
n=${1:-20}
rounds=${2:-12}
ready

work=$(mktemp -d)
tag=cc$$
addr=127.0.0.1:$((20000 + $$ % 20000))
ctl=
cleanup() {
  [ -n "$ctl" ] && kill "$ctl" 2>/dev/null && wait "$ctl" 2>/dev/null || true
  for st in $(docker stack ls --format '{{.Name}}' | grep "^$tag" || true); do
    docker stack rm "$st" >/dev/null 2>&1 || true
  done
  docker config ls -q --filter label=io.flotilla.record=release | while read -r id; do
    docker config inspect --format '{{index .Spec.Labels "io.flotilla.release"}} {{.ID}}' "$id"
  done | awk -v t="$tag" 'index($1, t) == 1 { print $2 }' | xargs -r docker config rm >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

repo=$work/repo
stack_repo "$repo" "$n"

apps=$work/apps.yaml
# add_app NAME [REPO] adds an application of REPO (default: the shared one).
add_app() {
  cat >>"$apps" <<EOA
  - name: $1
    source: {repoURL: ${2:-$repo}, revision: main}
    syncPolicy: {automated: {}, interval: 10m}
EOA
}
printf 'apiVersion: flotilla/v1\napplications:\n' >"$apps"
add_app "${tag}warm"

"$flotilla" controller --controller-id "$tag" --config "$apps" --data "$work/data" \
  --listen "$addr" --insecure-no-auth --log-level warn >"$work/controller.log" 2>&1 &
ctl=$!

# synced NAME: the application is Synced at revision 1.
synced() {
  curl -fsS "http://$addr/api/v1/applications/$1" 2>/dev/null |
    grep -q '"sync":"Synced".*"lastAppliedRevision":1\|"lastAppliedRevision":1.*"sync":"Synced"'
}
wait_synced() {
  local i
  for i in $(seq 1 2000); do
    synced "$1" && return 0
    sleep 0.005
  done
  echo "application $1 never synced; the controller said:" >&2
  tail -20 "$work/controller.log" >&2
  exit 1
}
wait_synced "${tag}warm"

# pass_seconds NAME: the duration of the application's first pass.
pass_seconds() {
  curl -fsS "http://$addr/metrics" | awk -v app="$1" '
    index($0, "flotilla_reconcile_duration_seconds_sum{") == 1 && index($0, "app=\"" app "\"") { s += $NF }
    END { printf "%.3f", s }'
}

docker_round() {
  local t0 t1
  t0=$(now); docker stack deploy --resolve-image never -c "$repo/docker-compose.yml" "${tag}ds$1" >/dev/null 2>&1; t1=$(now)
  elapsed "$t0" "$t1"
}
# succeeded NAME FIFO follows the event stream of application NAME and
# writes "done" to FIFO at its first sync.succeeded, or "lost" if the
# stream ended first. The stream is read through a process substitution,
# not a pipe: bash waits for every command of a pipe, and curl would only
# notice grep is gone at its next write, the stream's heartbeat 15 s later.
succeeded() {
  local stream
  exec 3< <(exec timeout 30 curl -sN "http://$addr/api/v1/events?app=$1" 2>/dev/null)
  stream=$!
  if grep -m1 -q '^event: sync.succeeded' <&3; then echo done >"$2"; else echo lost >"$2"; fi
  kill "$stream" 2>/dev/null || true
  exec 3<&-
}
flotilla_round() {
  local name=${tag}fl$1 t0 t1 got fifo=$work/fifo$1 watcher src=$repo
  if [ "${NEW_REPO:-}" = 1 ]; then
    src=$work/repo$1
    stack_repo "$src" "$n"
  fi
  mkfifo "$fifo"
  succeeded "$name" "$fifo" &
  watcher=$!
  sleep 0.2 # the subscription is open before the signal
  # The application is added just before the signal: the controller also
  # looks at its file every 5 s, and must not find it earlier.
  add_app "$name" "$src"
  t0=$(now); kill -HUP "$ctl"; read -r got <"$fifo"
  # A stream that ended early leaves the round to polling.
  [ "$got" = done ] || wait_synced "$name"
  t1=$(now)
  wait "$watcher" 2>/dev/null || true
  synced "$name" || wait_synced "$name"
  echo "$(pass_seconds "$name") $(elapsed "$t0" "$t1")"
}

printf '\n%-6s %-9s %12s %12s %8s %12s %8s\n' round first "docker (s)" "pass (s)" ratio "reload (s)" ratio
rows=$work/rows
for i in $(seq 1 "$rounds"); do
  if ((i % 2)); then
    d=$(docker_round "$i"); f=$(flotilla_round "$i"); order=docker
  else
    f=$(flotilla_round "$i"); d=$(docker_round "$i"); order=flotilla
  fi
  read -r pass reload <<<"$f"
  echo "$d $pass $reload" >>"$rows"
  awk -v i="$i" -v o="$order" '{ printf "%-6s %-9s %12.3f %12.3f %7.2fx %12.3f %7.2fx\n", i, o, $1, $2, $2/$1, $3, $3/$1 }' <<<"$d $pass $reload"
done
col() { awk "{ print $1 }" "$rows" | median; }
printf '%-16s %12s %12s %7sx %12s %7sx\n' median "$(col '$1')" "$(col '$2')" "$(col '$2/$1')" "$(col '$3')" "$(col '$3/$1')"
echo "(pass: the controller's first pass of the new application; reload: SIGHUP to Synced; ratio = that / docker stack deploy's time, the median ratio is the median of the rounds' ratios)"

# Where the passes went, from flotilla_reconcile_step_duration_seconds: the
# mean of each step over every pass of the run (the warm-up application's
# and each round's first pass; the applications' interval keeps any other
# pass out).
echo
echo "mean step time over the run's $((rounds + 1)) first passes (ms):"
curl -fsS "http://$addr/metrics" | awk '
  match($0, /^flotilla_reconcile_step_duration_seconds_(sum|count)\{step="[^"]+"\}/) {
    split($0, a, "\""); kind = ($0 ~ /_sum\{/) ? "sum" : "count"
    v[a[2], kind] = $NF; steps[a[2]] = 1
  }
  END {
    for (s in steps) if (v[s, "count"] > 0 && v[s, "sum"] / v[s, "count"] >= 0.0001)
      printf "  %-9s %7.1f\n", s, 1000 * v[s, "sum"] / v[s, "count"]
  }' | sort -k2 -g -r
