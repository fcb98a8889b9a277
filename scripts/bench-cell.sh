#!/usr/bin/env bash
# Benchmarks of BENCHMARKS.md: a 3-voter cell of `whip cell serve` processes on loopback
# (fsync on), `whip bench` at 1, 16 and 128 clients; then the same matrix on sled; then,
# when etcd and peer-bench are available, etcd 3.4 in the same run.
# Usage: scripts/bench-cell.sh [DURATION=5s] [PEER_BENCH=path/to/peer-bench]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-5s}
peer=${2:-}
cargo build --release -p whip >&2
whip=$PWD/target/release/whip
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
start_cell() { # storage base_port
  local storage=$1 base=$2
  for i in 1 2 3; do
    "$whip" cell serve --id $i --listen 127.0.0.1:$((base + i - 1)) --data "$dir/$storage-$i" --storage "$storage" 2>>"$dir/serve.log" &
    pids+=($!)
  done
  sleep 1
  "$whip" cell init --member 1=127.0.0.1:$base --member 2=127.0.0.1:$((base + 1)) --member 3=127.0.0.1:$((base + 2)) >&2
  sleep 1
}
run_matrix() { # storage base_port
  local storage=$1 cell=127.0.0.1:$2
  for workload in cas lease ledger; do
    for clients in 1 16 128; do
      "$whip" bench $workload --cell $cell --clients $clients --keys 0 --value-bytes 256 --duration "$duration" --json 2>/dev/null |
        python3 -c "import json,sys; r=json.load(sys.stdin); r['system']='whip-$storage'; print(json.dumps(r))"
    done
  done
  "$whip" bench cas --cell $cell --clients 128 --keys 16 --value-bytes 256 --duration "$duration" --json 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin); r['system']='whip-$storage'; print(json.dumps(r))"
}
start_cell redb 27001
run_matrix redb 27001
for p in "${pids[@]}"; do kill "$p"; done; wait 2>/dev/null || true; pids=()
start_cell sled 27101
run_matrix sled 27101
for p in "${pids[@]}"; do kill "$p"; done; wait 2>/dev/null || true; pids=()
if [ -n "$peer" ] && command -v etcd >/dev/null; then
  etcd3=../shared/tools/peer-bench/scripts/etcd3.sh
  "$etcd3" start "$dir/etcd" >&2
  leader=$("$etcd3" leader "$dir/etcd")
  for clients in 1 16 128; do "$peer" etcd-cas --endpoints "$leader" --clients $clients --keys 0 --duration "$duration" 2>/dev/null; done
  "$peer" etcd-cas --endpoints "$leader" --clients 128 --keys 16 --duration "$duration" 2>/dev/null
  "$etcd3" stop "$dir/etcd" >&2
fi
