#!/usr/bin/env bash
# Measure what idle cells cost: NODES `whip node serve` processes on loopback, a fabric of
# CELLS data cells (replicas = min(NODES, 3)), then RSS and CPU of each node while nothing
# happens for SECONDS. Prints one line per node and the per-cell figures.
#
# usage: scripts/idle-cells.sh [CELLS=100] [NODES=1] [SECONDS=30] [extra node serve args…]
set -euo pipefail
CELLS=${1:-100}
NODES=${2:-1}
SECONDS_IDLE=${3:-30}
shift $(( $# < 3 ? $# : 3 ))
WHIP=${WHIP:-target/release/whip}
DIR=$(mktemp -d)
BASE=$(( 20000 + RANDOM % 20000 ))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
node_args=()
for i in $(seq 1 "$NODES"); do
  "$WHIP" node serve --id "$i" --listen "127.0.0.1:$((BASE + i))" --data "$DIR/n$i" "$@" \
    >"$DIR/n$i.log" 2>&1 &
  pids+=($!)
  node_args+=(--node "$i=127.0.0.1:$((BASE + i))")
done
sleep 1
start=$(date +%s.%N)
"$WHIP" fabric init "${node_args[@]}" --cells "$CELLS" --cell "127.0.0.1:$((BASE + 1))" >/dev/null
echo "fabric init of $CELLS data cells on $NODES node(s): $(echo "$(date +%s.%N) - $start" | bc) s"
sleep 5  # let elections and the first snapshots settle
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A before
for p in "${pids[@]}"; do before[$p]=$(cpu "$p"); done
sleep "$SECONDS_IDLE"
hosted=$(( CELLS * (NODES < 3 ? NODES : 3) / NODES + 1 ))
for p in "${pids[@]}"; do
  used=$(( $(cpu "$p") - before[$p] ))
  rss_kib=$(awk '/VmRSS/ {print $2}' "/proc/$p/status")
  awk -v pid="$p" -v used="$used" -v tick="$tick" -v secs="$SECONDS_IDLE" -v rss="$rss_kib" \
    -v cells="$hosted" 'BEGIN {
    cpu = 100 * used / tick / secs
    printf "node pid %d: %d cells, RSS %.1f MiB (%.2f MiB/cell), CPU %.2f%% (%.4f%%/cell)\n",
      pid, cells, rss / 1024, rss / 1024 / cells, cpu, cpu / cells
  }'
done
