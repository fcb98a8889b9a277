#!/usr/bin/env bash
# A/B of two whip builds on a 3-voter `whip cell dev` (fsync on), interleaved run by run so
# that the machine's noise falls on both: `whip bench cas --keys 0 --value-bytes 256` at 1
# and 16 clients for 5 s, then the leader's `whip cell status --json` hops and each
# follower's own answer to an append (`member_stages.follower_answered`, `log_flushed`).
# Usage: scripts/bench-ab-cas.sh BEFORE_WHIP AFTER_WHIP [PAIRS=5]
# Prints one line per run: label clients writes/s p50_us p99_us, then each build's last hops.
set -euo pipefail
before=$1 after=$2 pairs=${3:-5}
port=7311
one() { # whip label
  local whip=$1 label=$2 dir
  dir=$(mktemp -d)
  "$whip" cell dev --voters 3 --data "$dir/d" --base-port $port >"$dir/dev.log" 2>&1 &
  local pid=$!
  trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' RETURN
  for _ in $(seq 1 100); do
    "$whip" cell status --cell 127.0.0.1:$port --json >/dev/null 2>&1 && break
    sleep 0.2
  done
  for c in 1 16; do
    "$whip" bench cas --cell 127.0.0.1:$port --clients $c --keys 0 --value-bytes 256 \
      --duration 5s --json 2>/dev/null |
      python3 -c "import json,sys; r=json.load(sys.stdin)
print('$label', $c, round(r['ops_per_sec']), r['p50_us'], r['p99_us'])"
  done
  "$whip" cell status --cell 127.0.0.1:$port --json 2>/dev/null |
    python3 -c "
import json,sys
def find(o):
    if isinstance(o,dict):
        for k,v in o.items():
            if k=='hops': print('$label hops', {s: round(h['per_write'] or 0, 3) for s,h in v.items()})
            else: find(v)
    elif isinstance(o,list):
        for v in o: find(v)
find(json.load(sys.stdin))"
  for member in $((port + 1)) $((port + 2)); do # the followers' own answer to an append
    "$whip" cell status --cell 127.0.0.1:$member --json 2>/dev/null |
      python3 -c "
import json,sys
d=json.load(sys.stdin); s=d['member_stages']; h=d['member_hops']
a=s['follower_answered']; f=s['log_flushed']
print('$label member', d['id'], 'answered p50/p99', a['p50_us'], a['p99_us'],
      'flushed p50', f['p50_us'], 'answer hops', round(h['follower_answered']['per_write'] or 0, 3))"
  done
  kill $pid; wait $pid 2>/dev/null || true
}
trap 'exit 130' INT
for i in $(seq 1 "$pairs"); do one "$before" "before$i"; one "$after" "after$i"; done
