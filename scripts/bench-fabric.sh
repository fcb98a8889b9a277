#!/usr/bin/env bash
# CAS through a 3-node x 4-cell fabric (the routing client), then through one 3-voter
# cell, one after the other: `whip bench cas` with 128 clients on 1024 keys, 5 s each.
# Usage: scripts/bench-fabric.sh   (WHIP=path to the binary, default target/release/whip)
# Prints the two JSON lines, then the fabric-to-cell ratio on stderr.
set -u
W=${WHIP:-target/release/whip}
d=$(mktemp -d)
pids=()
for i in 1 2 3; do
  $W node serve --id $i --listen 127.0.0.1:$((7700+i)) --data $d/n$i > $d/n$i.log 2>&1 &
  pids+=($!)
done
sleep 2
$W fabric init --cell 127.0.0.1:7701 --node 1=127.0.0.1:7701 --node 2=127.0.0.1:7702 --node 3=127.0.0.1:7703 --cells 4 > $d/init.log 2>&1
sleep 3
uptime
$W bench cas --cell 127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703 --clients 128 --keys 1024 --duration 5s --json 2>/dev/null | tail -1 | tee $d/fabric.json
kill "${pids[@]}"; wait 2>/dev/null
$W cell dev --voters 3 --base-port 7760 --data $d/cell > $d/cell.log 2>&1 &
p=$!
for _ in $(seq 100); do grep -q ready $d/cell.log && break; sleep 0.1; done
uptime
$W bench cas --cell 127.0.0.1:7760,127.0.0.1:7761,127.0.0.1:7762 --clients 128 --keys 1024 --duration 5s --json 2>/dev/null | tail -1 | tee $d/cell.json
kill $p; wait 2>/dev/null
# Issue 14's ratio: the fabric's requests/s against the one cell's, on stderr.
python3 - $d/fabric.json $d/cell.json >&2 <<'PY' || true
import json, sys
f, c = (json.load(open(p))["requests_per_sec"] for p in sys.argv[1:3])
print(f"ratio fabric/cell requests/s: {f} / {c} = {f / c:.2f}x (target >= 1x)")
PY
rm -rf $d
