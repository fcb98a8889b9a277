#!/usr/bin/env bash
# Task-board cycles: `whip bench board` on a 3-voter `whip cell dev` (fsync on), then Redis
# Streams (AOF always) driven by peer-bench in the same run, at 1, 16 and 64 workers.
# Usage: scripts/bench-board.sh DURATION PEER_BENCH   (prints JSON lines)
# VOTERS=1 runs whip on a one-voter cell instead (same code, no replication).
set -euo pipefail
duration=${1:-5s}
peer=${2:?path to peer-bench}
whip=${WHIP:-target/release/whip}
voters=${VOTERS:-3}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
"$whip" cell dev --voters "$voters" --base-port 7460 --data "$work/cell" > "$work/cell.log" 2>&1 &
for _ in $(seq 100); do grep -q ready "$work/cell.log" && break; sleep 0.1; done
cells=$(seq -s, 7460 $((7459 + voters)) | sed 's/\([0-9]*\)/127.0.0.1:\1/g')
for n in 1 16 64; do
  echo "{\"system\":\"whip-$voters-voters\",\"workers\":$n,\"result\":$("$whip" bench board --cell $cells --clients $n --duration "$duration" --json 2>/dev/null | tail -1)}"
done
kill %1
redis-server --port 7470 --dir "$work" --appendonly yes --appendfsync always --save '' \
  --daemonize no > "$work/redis.log" 2>&1 &
sleep 1
for n in 1 16 64; do
  echo "{\"system\":\"redis\",\"workers\":$n,\"result\":$("$peer" redis-board --url redis://127.0.0.1:7470 --workers $n --duration "$duration" 2>/dev/null | tail -1)}"
done
