#!/usr/bin/env bash
# compare.sh: Flotilla against `docker stack deploy` on the same 20-service
# stack, side by side on this swarm. Each round times a first deploy and an
# unchanged redeploy of each onto stacks of their own made for that round,
# and counts the service writes each redeploy made (service versions that
# moved); the rounds alternate which of the two goes first, so a machine that
# speeds up or slows down during the run weighs on both alike. It prints
# every round, then the median of each figure and the median of the
# round-by-round ratios.
#
# Flotilla runs as the built binary, one `controller --once` process per
# deploy with a fresh data directory for the first, so its figures include
# process start, the clone, the git remote check and the reads of the
# swarm's release records. docker stack deploy runs with --resolve-image
# never, its fastest setting here (the registry is unreachable, and the
# default `always` spends seconds failing to reach it).
#
#   bash bench/compare.sh [SERVICES] [ROUNDS]   (default 20 1; FLOTILLA=BINARY times that build)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh
n=${1:-20}
rounds=${2:-1}
ready

work=$(mktemp -d)
tag=bench$$
cleanup() {
  for i in $(seq 1 "$rounds"); do
    docker stack rm "${tag}ds$i" "${tag}fl$i" >/dev/null 2>&1 || true
    docker config ls -q --filter label=io.flotilla.release="${tag}fl$i" | xargs -r docker config rm >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

repo=$work/repo
stack_repo "$repo" "$n"
versions() { docker service ls -q --filter label=com.docker.stack.namespace="$1" | xargs -r docker service inspect --format '{{.ID}} {{.Version.Index}}' | sort; }
moved() { join <(echo "$1") <(echo "$2") | awk '$2 != $3' | wc -l; }

# apps NAME writes the applications file of a Flotilla deploy to stack NAME.
apps() {
  cat >"$work/$1.yaml" <<EOA
apiVersion: flotilla/v1
applications:
  - name: $1
    source: {repoURL: $repo, revision: main}
    syncPolicy: {automated: {}}
EOA
}

# docker_round I and flotilla_round I each print: first-deploy seconds,
# redeploy seconds, service writes of the redeploy.
docker_round() {
  local st=${tag}ds$1 t0 t1 first v0
  t0=$(now); docker stack deploy --resolve-image never -c "$repo/docker-compose.yml" "$st" >/dev/null 2>&1; t1=$(now)
  first=$(elapsed "$t0" "$t1")
  v0=$(versions "$st")
  t0=$(now); docker stack deploy --resolve-image never -c "$repo/docker-compose.yml" "$st" >/dev/null 2>&1; t1=$(now)
  echo "$first $(elapsed "$t0" "$t1") $(moved "$v0" "$(versions "$st")")"
}
flotilla_round() {
  local st=${tag}fl$1 t0 t1 first v0
  apps "$st"
  run() { "$flotilla" controller --controller-id "$st" --config "$work/$st.yaml" --data "$work/cache-$st" --once --log-level warn >/dev/null; }
  t0=$(now); run; t1=$(now)
  first=$(elapsed "$t0" "$t1")
  v0=$(versions "$st")
  t0=$(now); run; t1=$(now)
  echo "$first $(elapsed "$t0" "$t1") $(moved "$v0" "$(versions "$st")")"
}

printf '\n%-6s %-6s %12s %12s %8s   %12s %12s %8s   %s\n' round first "docker (s)" "flotilla (s)" ratio "docker (s)" "flotilla (s)" ratio "writes docker/flotilla"
printf '%-13s %34s   %34s\n' "" "------------ first deploy ------------" "--------- unchanged redeploy ---------"
rows=$work/rows
for i in $(seq 1 "$rounds"); do
  if ((i % 2)); then
    d=$(docker_round "$i"); f=$(flotilla_round "$i"); order=docker
  else
    f=$(flotilla_round "$i"); d=$(docker_round "$i"); order=flotilla
  fi
  read -r dfirst dagain dwr <<<"$d"
  read -r ffirst fagain fwr <<<"$f"
  echo "$dfirst $ffirst $dagain $fagain $dwr $fwr" >>"$rows"
  awk -v i="$i" -v o="$order" '{ printf "%-6s %-6s %12.3f %12.3f %7.2fx   %12.3f %12.3f %7.2fx   %s/%s\n", i, o, $1, $2, $2/$1, $3, $4, $4/$3, $5, $6 }' <<<"$dfirst $ffirst $dagain $fagain $dwr $fwr"
done

# col EXPR: the median of an awk expression over the rows
col() { awk "{ print $1 }" "$rows" | median; }
printf '%-13s %12s %12s %7sx   %12s %12s %7sx\n' "median" "$(col '$1')" "$(col '$2')" "$(col '$2/$1')" "$(col '$3')" "$(col '$4')" "$(col '$4/$3')"
echo "(ratio = flotilla time / docker stack deploy time, the median ratio is the median of the rounds' ratios; below 1 means flotilla is faster)"
