#!/usr/bin/env bash
# compare.sh: Flotilla against `docker stack deploy` on the same 20-service
# stack, in one run on this swarm. It times the first deploy and an unchanged
# redeploy of each and counts the service writes each made (service versions
# that moved), then prints the ratios.
#
# Flotilla runs as the built binary, one `controller --once` process per
# deploy, so its figures include process start, the git remote check and the
# reads of the swarm's release records. docker stack deploy runs with
# --resolve-image never, its fastest setting here (the registry is
# unreachable, and the default `always` spends seconds failing to reach it).
#
#   bash bench/compare.sh [SERVICES]   (default 20)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
n=${1:-20}
bash scripts/swarm-up.sh >/dev/null 2>&1
bash scripts/build-test-image.sh >/dev/null 2>&1
go build -o bin/flotilla ./cmd/flotilla

work=$(mktemp -d)
ds=benchds$$
fl=benchfl$$
cleanup() {
  docker stack rm "$ds" "$fl" >/dev/null 2>&1 || true
  docker config ls -q --filter label=io.flotilla.release="$fl" | xargs -r docker config rm >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

repo=$work/repo
mkdir -p "$repo"
{
  echo 'version: "3.8"'
  echo 'services:'
  for i in $(seq -w 1 "$n"); do
    cat <<EOS
  svc$i:
    image: flotilla-test/app:1
    environment: {INDEX: "$i"}
    networks: [back]
    deploy: {replicas: 0}
EOS
  done
  echo 'networks:'
  echo '  back: {driver: overlay}'
} >"$repo/docker-compose.yml"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m bench
cat >"$work/apps.yaml" <<EOA
apiVersion: flotilla/v1
applications:
  - name: $fl
    source: {repoURL: $repo, revision: main}
    syncPolicy: {automated: {}}
EOA

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
versions() { docker service ls -q --filter label=com.docker.stack.namespace="$1" | xargs -r docker service inspect --format '{{.ID}} {{.Version.Index}}' | sort; }
moved() { join <(echo "$1") <(echo "$2") | awk '$2 != $3' | wc -l; }

t0=$(now); docker stack deploy --resolve-image never -c "$repo/docker-compose.yml" "$ds" >/dev/null; t1=$(now)
ds_first=$(elapsed "$t0" "$t1")
v0=$(versions "$ds")
t0=$(now); docker stack deploy --resolve-image never -c "$repo/docker-compose.yml" "$ds" >/dev/null; t1=$(now)
ds_again=$(elapsed "$t0" "$t1")
ds_writes=$(moved "$v0" "$(versions "$ds")")

t0=$(now); bin/flotilla controller --controller-id "$fl" --config "$work/apps.yaml" --data "$work/cache" --once --log-level warn >/dev/null; t1=$(now)
fl_first=$(elapsed "$t0" "$t1")
v0=$(versions "$fl")
t0=$(now); bin/flotilla controller --controller-id "$fl" --config "$work/apps.yaml" --data "$work/cache" --once --log-level warn >/dev/null; t1=$(now)
fl_again=$(elapsed "$t0" "$t1")
fl_writes=$(moved "$v0" "$(versions "$fl")")

printf '\n%-34s %12s %12s %10s\n' "$n services, replicas 0" "docker (s)" "flotilla (s)" "ratio"
printf '%-34s %12s %12s %10s\n' "first deploy" "$ds_first" "$fl_first" "$(awk -v a="$fl_first" -v b="$ds_first" 'BEGIN{printf "%.2fx", a/b}')"
printf '%-34s %12s %12s %10s\n' "unchanged redeploy" "$ds_again" "$fl_again" "$(awk -v a="$fl_again" -v b="$ds_again" 'BEGIN{printf "%.2fx", a/b}')"
printf '%-34s %12s %12s\n' "service writes on unchanged redeploy" "$ds_writes" "$fl_writes"
echo "(ratio = flotilla time / docker stack deploy time; below 1 means flotilla is faster)"
