# common.sh: sourced by the comparison scripts in bench/, from the
# repository's root.
#
# ready brings the swarm and the test image up and sets flotilla to the
# binary to time: $FLOTILLA if set (to compare two builds), otherwise
# bin/flotilla built from this checkout.
#
# BENCH_ENGINE=current runs the comparison on the current Docker Engine that
# scripts/engine.sh builds and scripts/engine-up.sh starts (its DOCKER_HOST
# is exported, so docker stack deploy and flotilla both talk to it);
# otherwise on the machine's daemon. The engine is printed either way.
ready() {
  bash scripts/swarm-up.sh >/dev/null 2>&1
  bash scripts/build-test-image.sh >/dev/null 2>&1
  if [ "${BENCH_ENGINE:-}" = current ]; then
    bash scripts/engine.sh >/dev/null
    eval "$(bash scripts/engine-up.sh | sed 's/^/export /')"
  fi
  echo "engine: Docker $(docker version --format '{{.Server.Version}}, API {{.Server.APIVersion}}') at ${DOCKER_HOST:-unix:///var/run/docker.sock}; docker CLI $(docker version --format '{{.Client.Version}}')"
  flotilla=${FLOTILLA:-}
  if [ -z "$flotilla" ]; then
    go build -o bin/flotilla ./cmd/flotilla
    flotilla=bin/flotilla
  fi
}

# now and elapsed A B time a step in seconds.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
#
# stack_repo DIR N writes a git repository at DIR whose docker-compose.yml
# declares N services of the local test image at 0 replicas on one overlay
# network, committed on main: the control plane's work only, none of the
# scheduler's.
stack_repo() {
  local dir=$1 n=$2 i
  mkdir -p "$dir"
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
  } >"$dir/docker-compose.yml"
  git -C "$dir" init -q -b main
  git -C "$dir" add -A
  git -C "$dir" -c user.name=bench -c user.email=bench@example.invalid commit -q -m bench
}

# median prints the median of the numbers on standard input.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
