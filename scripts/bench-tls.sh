#!/usr/bin/env bash
# TLS against plaintext with one build in one run: a 3-process cell of `whip cell serve`
# (fsync on), `whip bench cas` at 1 and 128 clients, once with TLS (the default) and once
# with --insecure. Prints one JSON line per configuration.
# Usage: scripts/bench-tls.sh [DURATION=5s] [WHIP=target/release/whip]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-5s}
whip=${2:-}
if [ -z "$whip" ]; then
  cargo build --release -p whip >&2
  whip=$PWD/target/release/whip
fi
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
run() { # mode base_port
  local mode=$1 base=$2 flag=()
  [ "$mode" = insecure ] && flag=(--insecure)
  for i in 1 2 3; do
    "$whip" "${flag[@]}" cell serve --id $i --listen 127.0.0.1:$((base + i - 1)) \
      --data "$dir/$mode-$i" 2>>"$dir/serve.log" &
    pids+=($!)
  done
  sleep 1
  "$whip" "${flag[@]}" cell init --member 1=127.0.0.1:$base \
    --member 2=127.0.0.1:$((base + 1)) --member 3=127.0.0.1:$((base + 2)) >&2
  sleep 1
  for clients in 1 128; do
    "$whip" "${flag[@]}" bench cas --cell 127.0.0.1:$base --clients $clients --keys 0 \
      --value-bytes 256 --duration "$duration" --json 2>/dev/null |
      python3 -c "import json,sys; r=json.load(sys.stdin); r['system']='whip-$mode'; print(json.dumps(r))"
  done
  for p in "${pids[@]}"; do kill "$p"; done; wait 2>/dev/null || true; pids=()
}
run tls 27001
run insecure 27101
