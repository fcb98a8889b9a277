#!/usr/bin/env bash
# Benchmarks of BENCHMARKS.md: a 3-voter cell of `whip cell serve` processes on loopback
# (fsync on), `whip bench` at 1, 16 and 128 clients; then the same matrix on sled; then,
# when etcd and peer-bench are available, etcd 3.4 in the same run.
# Usage: scripts/bench-cell.sh [DURATION=5s] [PEER_BENCH=path/to/peer-bench]
# Prints one JSON line per configuration, then the issue-14 ratios against etcd on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-5s}
peer=${2:-}
# WHIP=path runs that binary instead of building this checkout (an A/B of two builds).
if [ -z "${WHIP:-}" ]; then cargo build --release -p whip >&2; fi
whip=${WHIP:-$PWD/target/release/whip}
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
# Every JSON line also goes to a file, for the ratios printed on stderr at the end.
lines=$dir/lines.jsonl
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
        python3 -c "import json,sys; r=json.load(sys.stdin); r['system']='whip-$storage'; print(json.dumps(r))" | tee -a "$lines"
    done
  done
  "$whip" bench cas --cell $cell --clients 128 --keys 16 --value-bytes 256 --duration "$duration" --json 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin); r['system']='whip-$storage'; print(json.dumps(r))" |
    tee -a "$lines"
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
  for clients in 1 16 128; do
    "$peer" etcd-cas --endpoints "$leader" --clients $clients --keys 0 --duration "$duration" \
      2>/dev/null | tee -a "$lines"
  done
  "$peer" etcd-cas --endpoints "$leader" --clients 128 --keys 16 --duration "$duration" \
    2>/dev/null | tee -a "$lines"
  # etcd's best on hot keys: it learns the version from the failed txn, as whip's CAS does.
  "$peer" etcd-cas --endpoints "$leader" --clients 128 --keys 16 --else-get \
    --duration "$duration" 2>/dev/null | tee -a "$lines"
  "$etcd3" stop "$dir/etcd" >&2
fi
# The issue's ratios, whip (redb) against etcd in this run: p50 time at 1 client, CAS/s at
# 16 and 128 own keys and on 16 hot keys (against etcd's better hot-key loop).
python3 - "$lines" <<'PY' >&2
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def pick(system, clients, keys, extra=None):
    for r in rows:
        if (r.get("system") == system and r.get("workload") == "cas"
                and r.get("clients") == clients and str(r.get("keys")) in keys
                and (extra is None or r.get("mismatch") == extra)):
            return r
whip = lambda c, k: pick("whip-redb", c, k)
etcd = lambda c, k, m=None: pick("etcd", c, k, m)
if etcd(1, ("own", "0")) is None:
    print("bench-cell: no etcd lines, no ratios"); sys.exit(0)
w1, e1 = whip(1, ("0",)), etcd(1, ("own", "0"))
print(f"ratio cas p50 1 client: whip {w1['p50_us']} us / etcd {e1['p50_us']} us = "
      f"{w1['p50_us'] / e1['p50_us']:.2f} (target <= 1)")
for c, target in ((16, 1.5), (128, 2.5)):
    w, e = whip(c, ("0",)), etcd(c, ("own", "0"))
    print(f"ratio cas/s {c} clients: {w['ops_per_sec'] / e['ops_per_sec']:.2f}x (target >= {target}x)")
wh = whip(128, ("16",))
for m in ("get", "else-get"):
    e = etcd(128, ("16",), m)
    if e:
        print(f"ratio cas/s 128 clients 16 hot keys vs etcd ({m}): "
              f"{wh['ops_per_sec'] / e['ops_per_sec']:.2f}x (target >= 1.5x)")
PY
