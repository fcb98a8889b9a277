#!/usr/bin/env bash
# A same-sitting A/B of two builds on the CAS figure issue 28 promised to keep: 128 clients,
# one key each, a fresh 3-voter redb cell of `whip cell serve` processes per run, the two
# builds alternating so load on the machine falls on both alike.
# Usage: scripts/ab-cas.sh BEFORE_BINARY AFTER_BINARY [ROUNDS=3] [DURATION=10s]
# Prints one line per run: build, CAS/s, p50 µs, p99 µs; then each build's mean.
set -euo pipefail
before=$1 after=$2 rounds=${3:-3} duration=${4:-10s}
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
run() { # binary base_port
  local whip=$1 base=$2 dir pids=()
  dir=$(mktemp -d)
  for i in 1 2 3; do
    "$whip" cell serve --id $i --listen 127.0.0.1:$((base + i - 1)) --data "$dir/d$i" \
      --storage redb 2>>"$dir/serve.log" &
    pids+=($!)
  done
  sleep 1
  "$whip" cell init --member 1=127.0.0.1:$base --member 2=127.0.0.1:$((base + 1)) \
    --member 3=127.0.0.1:$((base + 2)) >/dev/null
  sleep 1
  "$whip" bench cas --cell 127.0.0.1:$base --clients 128 --keys 0 --value-bytes 256 \
    --duration "$duration" --json 2>/dev/null
  kill "${pids[@]}"
  wait 2>/dev/null || true
  rm -rf "$dir"
}
for r in $(seq 1 "$rounds"); do
  for build in before after; do
    binary=$before
    [ "$build" = after ] && binary=$after
    run "$binary" $((28000 + r * 10)) | python3 -c "
import json, sys
r = json.load(sys.stdin)
print('$build', r['ops_per_sec'], r['p50_us'], r['p99_us'])" | tee -a "$lines"
  done
done
python3 - "$lines" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
for build in ("before", "after"):
    ops = [float(r[1]) for r in runs if r[0] == build]
    print(f"{build}: mean {statistics.mean(ops):,.0f} CAS/s, median {statistics.median(ops):,.0f}")
PY
