#!/usr/bin/env bash
# A fabric of small simulated machines (issue 34, item 4): each `whip node serve` runs in its
# own network namespace behind a `tc netem` delay (DELAY each way on each link) and with its
# own CPU quota (CPU_PCT % of one core, a cgroup-v1 `cpu` group), so that adding nodes adds
# CPU the way adding machines would, until this machine's own cores run out. For every
# node count in NODES and cell count in CELLS: a fresh fabric, then `whip bench cas` from
# the root namespace through every node (CLIENTS clients, KEYS keys, DURATION measured).
# Prints one JSON line per configuration (nodes, cells, clients, ops_per_sec, p50_us, and
# the CPU the nodes used) and, on stderr, each line's ratio to the first. A kernel without
# `sch_netem` (some containers) gets no delay: the run says so (`"delay": "none"`) and the
# CPU quotas still hold.
#
# usage (as root): scripts/sim-fabric.sh [DURATION=10s]
#   NODES="3 6" CELLS="1 4 16" CPU_PCT=25 DELAY=2ms CLIENTS=128 KEYS=1024 WHIP=target/release/whip
set -euo pipefail
duration=${1:-10s}
whip=$(realpath "${WHIP:-target/release/whip}")
node_counts=${NODES:-3 6}
cell_counts=${CELLS:-1 4 16}
cpu_pct=${CPU_PCT:-25}
delay=${DELAY:-2ms}
clients=${CLIENTS:-128}
keys=${KEYS:-1024}
bridge=wsimbr
net=198.19.77
port=7500
cg=/sys/fs/cgroup/cpu
work=$(mktemp -d)
pids=()
made=()

teardown() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  for i in "${made[@]}"; do
    ip netns del "wsim$i" 2>/dev/null || true
    ip link del "wsv$i" 2>/dev/null || true
    rmdir "$cg/wsim$i" 2>/dev/null || true
  done
  made=()
  ip link del "$bridge" 2>/dev/null || true
}
trap 'teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# Node i: namespace wsim$i, address $net.$i, netem on both ends of its link, CPU group.
make_node() {
  local i=$1
  ip netns add "wsim$i"
  ip link add "wsv$i" type veth peer name "wsp$i"
  ip link set "wsp$i" netns "wsim$i"
  ip link set "wsv$i" master "$bridge" up
  ip netns exec "wsim$i" ip addr add "$net.$i/24" dev "wsp$i"
  ip netns exec "wsim$i" ip link set "wsp$i" up
  ip netns exec "wsim$i" ip link set lo up
  made+=("$i")
  if [ "$delay" != none ]; then
    ip netns exec "wsim$i" tc qdisc add dev "wsp$i" root netem delay "$delay"
    tc qdisc add dev "wsv$i" root netem delay "$delay"
  fi
  mkdir -p "$cg/wsim$i"
  echo 100000 > "$cg/wsim$i/cpu.cfs_period_us"
  echo $((cpu_pct * 1000)) > "$cg/wsim$i/cpu.cfs_quota_us"
}

# Whether this kernel has netem: try it on a throwaway dummy link.
netem_works() {
  ip link add wsimprobe type dummy 2>/dev/null || return 1
  local ok=1
  tc qdisc add dev wsimprobe root netem delay 1ms 2>/dev/null && ok=0
  ip link del wsimprobe
  return $ok
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run_one() {
  local nodes=$1 cells=$2
  ip link add "$bridge" type bridge
  ip addr add "$net.254/24" dev "$bridge"
  ip link set "$bridge" up
  local node_args=() addrs=()
  made=()
  for i in $(seq 1 "$nodes"); do
    make_node "$i"
    ip netns exec "wsim$i" "$whip" node serve --id "$i" --listen "$net.$i:$port" \
      --data "$work/n$nodes-c$cells/node$i" > "$work/node$i.log" 2>&1 &
    pids+=($!)
    echo "$!" > "$cg/wsim$i/cgroup.procs"
    node_args+=(--node "$i=$net.$i:$port")
    addrs+=("$net.$i:$port")
  done
  for a in "${addrs[@]}"; do
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/${a%:*}/${a#*:}") 2>/dev/null && break; sleep 0.1; done
  done
  "$whip" fabric init "${node_args[@]}" --cells "$cells" --cell "${addrs[0]}" > /dev/null
  sleep 3
  local before=0 after=0
  for p in "${pids[@]}"; do before=$((before + $(cpu_ticks "$p"))); done
  local started; started=$(date +%s.%N)
  local result
  result=$("$whip" bench cas --cell "$(IFS=,; echo "${addrs[*]}")" --clients "$clients" \
    --keys "$keys" --duration "$duration" --json 2>/dev/null | tail -1)
  local seconds; seconds=$(echo "$(date +%s.%N) - $started" | bc)
  for p in "${pids[@]}"; do after=$((after + $(cpu_ticks "$p"))); done
  local tick; tick=$(getconf CLK_TCK)
  echo "$result" | python3 -c "
import json, sys
r = json.load(sys.stdin)
cpu = 100 * ($after - $before) / $tick / $seconds
print(json.dumps({'nodes': $nodes, 'cells': $cells, 'clients': $clients, 'keys': $keys,
  'cpu_pct_per_node_quota': $cpu_pct, 'delay': '$delay', 'ops_per_sec': r.get('ops_per_sec'),
  'p50_us': r.get('p50_us'), 'p99_us': r.get('p99_us'),
  'nodes_cpu_pct': round(cpu, 1)}))" | tee -a "$work/lines.jsonl"
  teardown
}

if [ "$delay" != none ] && ! netem_works; then
  echo "sim-fabric: this kernel has no netem (sch_netem): running without delay" >&2
  delay=none
fi
for nodes in $node_counts; do
  for cells in $cell_counts; do
    echo "sim-fabric: $nodes nodes, $cells cells, $cpu_pct % of a core each, $delay per hop" >&2
    run_one "$nodes" "$cells"
  done
done
python3 - "$work/lines.jsonl" >&2 <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
base = lines[0]['ops_per_sec'] if lines and lines[0]['ops_per_sec'] else None
for l in lines:
    ratio = f"{l['ops_per_sec'] / base:.2f}x" if base and l['ops_per_sec'] else '-'
    print(f"{l['nodes']} nodes, {l['cells']:>2} cells: {l['ops_per_sec']} ops/s "
          f"({ratio} of the first), nodes used {l['nodes_cpu_pct']} % of a core")
EOF
