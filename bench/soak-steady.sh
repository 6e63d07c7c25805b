#!/usr/bin/env bash
# soak-steady.sh: an hour (or DURATION) of the built controller over APPS
# applications of 5 services at 0 replicas, every one on a 10s interval,
# sampled every 30s (goroutines, heap in use, RSS, passes, Docker requests)
# into OUT/steady.csv; the summary (first against last ten minutes) goes to
# OUT/results.txt and the plot to OUT/steady.png.
#
# DAEMON is the socket path of the swarm to run on (a path, not a unix://
# URL): a swarm of its own, such as the one `scripts/swarm-nodes.sh up soak 1`
# makes at /run/flotilla-nodes/soak/1/docker.sock, keeps other work on this
# machine's swarm out of the figures.
#
#   bash bench/soak-steady.sh [DURATION] [APPS] [OUT] [DAEMON]
#   (default 60m 100 bench/scale/out/soak /var/run/docker.sock)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
duration=${1:-60m}
apps=${2:-100}
out=${3:-bench/scale/out/soak}
daemon=${4:-/var/run/docker.sock}
exec go run ./bench/scale -services "" -apps "$apps" -docker=false -repeat 1 \
  -steady "$duration" -sample 30s -webhook 0 -out "$out" -daemon "$daemon"
