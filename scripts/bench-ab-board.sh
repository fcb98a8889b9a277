#!/usr/bin/env bash
# A/B of `whip bench board --prefetch 16` at 16 and 64 clients on a 3-voter `whip cell dev`,
# the two builds interleaved. Usage: scripts/bench-ab-board.sh BEFORE_WHIP AFTER_WHIP PAIRS
set -u
for pair in $(seq "$3"); do
  for label in before after; do
    bin=$1; [ "$label" = after ] && bin=$2
    d=$(mktemp -d)
    "$bin" cell dev --voters 3 --base-port 7660 --data "$d/cell" > "$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q ready "$d/log" && break; sleep 0.1; done
    for n in 16 64; do
      r=$("$bin" bench board --prefetch 16 --cell 127.0.0.1:7660,127.0.0.1:7661,127.0.0.1:7662 \
        --clients $n --duration 5s --json 2>/dev/null | tail -1 | python3 -c "import json,sys; r=json.load(sys.stdin); print(r['ops_per_sec'])")
      echo "pair $pair $label clients $n $r"
    done
    kill $pid; wait $pid 2>/dev/null; rm -rf "$d"
  done
done
