#!/usr/bin/env bash
# Task-board cycles in one run, at 1, 16 and 64 workers: `whip bench board` on a 3-voter
# `whip cell dev` (fsync on); then NATS JetStream R3 (three `nats-server` processes, a
# work-queue stream with 3 file-stored replicas; workers fetch 1 -> double-ack) and Redis 7
# Streams (AOF always), both driven by peer-bench.
# Usage: scripts/bench-board.sh DURATION PEER_BENCH   (prints JSON lines)
# Each line has system, workload, workers, clients, ops_per_sec, p50_us, p99_us (whip's
# lines also keep its whole answer under "result"). A peer whose server is not installed
# is skipped with a note on stderr. VOTERS=1 runs whip on a one-voter cell. WORKLOAD=mail
# measures `whip bench mail` against the same peers instead of the board's claim/complete
# cycle: by default send then one take that acknowledges the previous message
# (MAIL_CYCLE=take), or send, read, acknowledge (MAIL_CYCLE=read-ack). PREFETCH=N (board)
# makes each whip worker hold up to N claims, completing them all and claiming N more per
# write (`whip board claim --max`); the peers still fetch one. SEND_BATCH=N (mail, take
# cycle) sends N messages per write and takes them in one take.
set -euo pipefail
workload=${WORKLOAD:-board}
mail_cycle=${MAIL_CYCLE:-take}
extra=()
prefetch=${PREFETCH:-1}
case "$workload" in
  board) whip_workload=board-claim-complete; extra=(--prefetch "$prefetch")
    [ "$prefetch" = 1 ] || whip_workload=board-prefetch-$prefetch ;;
  mail) whip_workload=mail-send-$mail_cycle; send_batch=${SEND_BATCH:-1}
    extra=(--mail-cycle "$mail_cycle" --send-batch "$send_batch")
    [ "$send_batch" = 1 ] || whip_workload=mail-batch-$send_batch-$mail_cycle ;;
  *) echo "bench-board: WORKLOAD is board or mail" >&2; exit 2 ;;
esac
duration=${1:-5s}
peer=${2:?path to peer-bench}
whip=${WHIP:-target/release/whip}
voters=${VOTERS:-3}
work=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$work"' EXIT
# Every JSON line also goes here, for the ratios printed on stderr at the end.
lines=$work/lines.jsonl
touch "$lines"

"$whip" cell dev --voters "$voters" --base-port 7460 --data "$work/cell" > "$work/cell.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q ready "$work/cell.log" && break; sleep 0.1; done
cells=$(seq -s, 7460 $((7459 + voters)) | sed 's/\([0-9]*\)/127.0.0.1:\1/g')
for n in 1 16 64; do
  "$whip" bench "$workload" "${extra[@]}" --cell "$cells" --clients $n --duration "$duration" \
    --json 2>/dev/null |
    tail -1 |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
line = {'system': 'whip-$voters-voters', 'workload': '$whip_workload', 'workers': $n,
        'clients': $n, 'ops_per_sec': r.get('ops_per_sec'), 'p50_us': r.get('p50_us'),
        'p99_us': r.get('p99_us'), 'result': r}
print(json.dumps(line))" | tee -a "$lines"
done
stop

if command -v nats-server >/dev/null; then
  routes=nats://127.0.0.1:6231,nats://127.0.0.1:6232,nats://127.0.0.1:6233
  for i in 1 2 3; do
    nats-server -a 127.0.0.1 -p $((4230 + i)) -n "n$i" -js -sd "$work/nats$i" --cluster_name peer \
      --cluster "nats://127.0.0.1:$((6230 + i))" --routes "$routes" > "$work/nats$i.log" 2>&1 &
    pids+=($!)
  done
  for n in 1 16 64; do
    # JetStream answers once a meta leader is elected: retry the stream creation.
    for _ in $(seq 30); do
      if out=$("$peer" nats-board --url nats://127.0.0.1:4231 --workers $n --duration "$duration" \
        2>/dev/null); then
        echo "$out" | python3 -c "
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
r['workers'] = $n
print(json.dumps(r))" | tee -a "$lines"
        break
      fi
      sleep 0.5
    done
  done
  stop
else
  echo "bench-board: nats-server not installed, JetStream skipped" >&2
fi

if command -v redis-server >/dev/null; then
  redis-server --port 7470 --dir "$work" --appendonly yes --appendfsync always --save '' \
    --daemonize no > "$work/redis.log" 2>&1 &
  pids+=($!)
  sleep 1
  for n in 1 16 64; do
    "$peer" redis-board --url redis://127.0.0.1:7470 --workers $n --duration "$duration" 2>/dev/null |
      tail -1 | python3 -c "
import json, sys
r = json.load(sys.stdin)
r['workers'] = $n
print(json.dumps(r))" | tee -a "$lines"
  done
  stop
else
  echo "bench-board: redis-server not installed, Redis skipped" >&2
fi

# Issue 14's ratios in this run: whip's cycles/s against each peer's, per worker count.
python3 - "$lines" <<'PY' >&2
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
whip = {r["workers"]: r for r in rows if str(r.get("system", "")).startswith("whip")}
for peer in ("nats-jetstream", "redis"):
    for r in rows:
        w = whip.get(r.get("workers"))
        if r.get("system") == peer and w and r.get("ops_per_sec"):
            print(f"ratio {r['workers']} workers: whip {w['ops_per_sec']} / {peer} "
                  f"{r['ops_per_sec']} = {w['ops_per_sec'] / r['ops_per_sec']:.2f}x")
PY
