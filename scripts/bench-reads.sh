#!/usr/bin/env bash
# Linearizable reads with and without the leader lease (BENCHMARKS.md, "Reads under the
# leader lease"): a 3-voter cell of `whip cell serve` processes on loopback, started with
# `--lease-reads on`, then `off`, each `ROUNDS` times alternately; `whip bench get` on 16
# shared keys at 1, 16 and 128 clients. One JSON line per run, with `lease_reads` added.
# Usage: scripts/bench-reads.sh [DURATION=5s] [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-5s}
rounds=${2:-2}
# WHIP=path runs that binary instead of building this checkout (an A/B of two builds).
if [ -z "${WHIP:-}" ]; then cargo build --release -p whip >&2; fi
whip=${WHIP:-$PWD/target/release/whip}
dir=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$dir"' EXIT
trap 'exit 130' INT
base=27201
for round in $(seq "$rounds"); do
  for mode in on off; do
    data=$dir/$mode-$round
    for i in 1 2 3; do
      "$whip" cell serve --id $i --listen 127.0.0.1:$((base + i - 1)) --data "$data-$i" \
        --lease-reads $mode 2>>"$dir/serve.log" &
      pids+=($!)
    done
    sleep 1
    "$whip" cell init --member 1=127.0.0.1:$base --member 2=127.0.0.1:$((base + 1)) \
      --member 3=127.0.0.1:$((base + 2)) >&2
    sleep 1
    for clients in 1 16 128; do
      "$whip" bench get --cell 127.0.0.1:$base --clients $clients --keys 16 --duration "$duration" \
        --json 2>/dev/null |
        python3 -c "import json,sys; r=json.load(sys.stdin); r['lease_reads']='$mode'; r['round']=$round; print(json.dumps(r))"
    done
    stop
  done
done
