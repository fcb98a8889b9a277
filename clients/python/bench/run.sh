#!/usr/bin/env bash
# Board cycles per second from Python, whip fabric beside NATS JetStream R3, in one run:
# a 3-voter whip cell (whip cell serve x3 on 127.0.0.1) and a 3-node JetStream cluster
# (Debian nats-server, as tools/peer-bench/scripts/run-nats.sh starts it), then
# board_cycles.py against each at 1, 16 and 64 asyncio workers.
# Usage: clients/python/bench/run.sh [DURATION_S=5]   (WHIP: the binary, default debug)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
python="$("$repo/scripts/py-client-venv.sh")"
W="${WHIP:-${CARGO_TARGET_DIR:-$repo/target}/debug/whip}"
duration="${1:-5}"
dir="$(mktemp -d)"; pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap 'stop; rm -rf "$dir"' EXIT
export WHIP_CONFIG_DIR="$dir/config" WHIP_CREDENTIALS="$dir/credentials.json"
cells=127.0.0.1:7311,127.0.0.1:7312,127.0.0.1:7313
for i in 1 2 3; do
  "$W" cell serve --id $i --listen 127.0.0.1:731$i --data "$dir/w$i" >"$dir/w$i.log" 2>&1 &
  pids+=($!)
  [ $i = 1 ] && until "$W" cell status --cell 127.0.0.1:7311 >/dev/null 2>&1 \
    || [ -f "$WHIP_CONFIG_DIR/ca.pem" ] && sleep 0.5; do sleep 0.1; done
done
sleep 1
"$W" cell init --member 1=127.0.0.1:7311 --member 2=127.0.0.1:7312 --member 3=127.0.0.1:7313 \
  --cell 127.0.0.1:7311 >/dev/null
"$W" agent register --agent bench --cell "$cells" >/dev/null
"$W" team create bench --agent bench --cell "$cells" >/dev/null
routes=nats://127.0.0.1:6231,nats://127.0.0.1:6232,nats://127.0.0.1:6233
for i in 1 2 3; do
  nats-server -a 127.0.0.1 -p $((4230 + i)) -n "n$i" -js -sd "$dir/n$i" --cluster_name peer \
    --cluster "nats://127.0.0.1:$((6230 + i))" --routes "$routes" >"$dir/n$i.log" 2>&1 &
  pids+=($!)
done
"$python" "$here/board_cycles.py" whip --cells "$cells" --agent bench --duration "$duration"
# JetStream is ready once a meta leader is elected: retry the first run briefly.
for try in $(seq 30); do
  "$python" "$here/board_cycles.py" nats --workers 1 --duration 1 >/dev/null 2>&1 && break
  sleep 0.5
done
"$python" "$here/board_cycles.py" nats --duration "$duration"
