#!/usr/bin/env bash
# ab-controller.sh: two flotilla binaries as long-running controllers over the
# same APPS applications of 5 services at 0 replicas, one after the other: the
# applications are deployed once by NEW (`controller --once`), then each binary
# runs for SECONDS, sampled every 10s (VmRSS, goroutines, heap in use from
# /metrics) into OUT/old.csv and OUT/new.csv, with its peak (VmHWM) in
# OUT/old.hwm and OUT/new.hwm. Every stack and release record it made is
# removed at the end.
#
#   bash bench/ab-controller.sh OLD NEW [APPS] [SECONDS] [OUT]   (default 100 150 bench/scale/out/ab)
set -u
old=$1 new=$2 apps=${3:-100} secs=${4:-150}
out=$(realpath -m "${5:-bench/scale/out/ab}")
mkdir -p "$out"
w=$(mktemp -d /tmp/flotilla-ab-XXXX)
id=ab$$
trap 'rm -rf "$w"' EXIT
cd "$w"
mkdir repo && cd repo && git init -q -b main
for i in $(seq 1 "$apps"); do
  mkdir -p "$id-$i"
  { echo 'version: "3.8"'; echo services:
    for s in 1 2 3 4 5; do
      printf '  svc%03d:\n    image: flotilla-test/app:1\n    environment: {INDEX: "%d"}\n    networks: [back]\n    stop_grace_period: 1s\n    deploy: {replicas: 0}\n' "$s" "$s"
    done
    echo 'networks:'; echo '  back: {driver: overlay}'; } > "$id-$i/docker-compose.yml"
done
git add -A && git -c user.name=bench -c user.email=bench@example.invalid commit -qm initial && cd ..
{ echo 'apiVersion: flotilla/v1'; echo 'applications:'
  for i in $(seq 1 "$apps"); do
    printf '  - name: %s\n    source: {repoURL: %s, revision: main, path: %s}\n    syncPolicy: {automated: {}, interval: 10s}\n' "$id-$i" "$w/repo" "$id-$i"
  done; } > apps.yaml
"$new" controller --once --controller-id "$id" --config apps.yaml --data cache --log-level error > deploy.log 2>&1 \
  || echo "deploy by $new failed; see $w/deploy.log" >&2
for v in old new; do
  bin=$old; [ "$v" = new ] && bin=$new
  port=$((39000 + RANDOM % 1000))
  "$bin" controller --controller-id "$id" --config apps.yaml --data cache --listen "127.0.0.1:$port" \
    --insecure-no-auth --log-level error > "$v.log" 2>&1 &
  pid=$!
  echo "seconds,vmrss_kb,goroutines,heap_inuse_bytes" > "$out/$v.csv"
  for t in $(seq 10 10 "$secs"); do
    sleep 10
    m=$(curl -s -m 5 "127.0.0.1:$port/metrics")
    g=$(echo "$m" | awk '$1=="go_goroutines"{print $2}')
    h=$(echo "$m" | awk '$1=="go_memstats_heap_inuse_bytes"{print $2}')
    echo "$t,$(awk '/^VmRSS/{print $2}' /proc/$pid/status),$g,$h" >> "$out/$v.csv"
  done
  grep VmHWM "/proc/$pid/status" > "$out/$v.hwm"
  kill -TERM "$pid"; wait "$pid"
done
for i in $(seq 1 "$apps"); do docker stack rm "$id-$i" >/dev/null 2>&1; done
docker config ls --filter label=io.flotilla.record=release --format '{{.ID}} {{.Name}}' \
  | awk -v p="flotilla-release.$id-" 'index($2, p) == 1 {print $1}' | xargs -r docker config rm >/dev/null
