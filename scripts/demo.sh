#!/usr/bin/env bash
# The main job of the README on a fresh machine: WhippleScript seed programs run with
# `whip run` on the embedded single-voter cell (the same Raft and state-machine path as a
# cluster) in a throw-away store, then each coordination primitive from the command line.
#
# WHIP_BIN=PATH runs that binary instead of building the release one (the tests do).
set -euo pipefail
cd "$(dirname "$0")/.."
whip_bin=${WHIP_BIN:-}
source scripts/clean-env.sh
if [ -z "$whip_bin" ]; then
  cargo build --release -p whip
  whip_bin=$PWD/target/release/whip
fi
whip=$whip_bin
programs=$PWD/engine/tests/check/valid
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
export WHIPPLESCRIPT_STORE=$store/store
# The CLI's whip config (agent tokens; a CA if anything asked for one) is a throw-away
# directory too: the demo leaves the user's ~/.config/whip alone.
export WHIP_CONFIG_DIR=$store/config
export WHIP_CREDENTIALS=$WHIP_CONFIG_DIR/credentials.json
set -x
# Ledger: two runs append #1 and #2 in partition `deploys`.
"$whip" run "$programs/seed_ledger_decisions.whip"
"$whip" run "$programs/seed_ledger_decisions.whip"
"$whip" ledger decisions
# Counter: the first run admits j1 (60 of 100), defers j2; the second finds nothing fits.
"$whip" run "$programs/seed_counter_budget.whip"
"$whip" run "$programs/seed_counter_budget.whip"
"$whip" counters
# Lease: the first instance holds the deploy slot through its 5 s timer; the second is
# contended and skips; a worker pass then fires the timer, the first deploys and releases.
"$whip" run "$programs/seed_lease_ship.whip"
"$whip" leases
"$whip" run "$programs/seed_lease_ship.whip"
"$whip" worker --all --duration 7s
"$whip" leases
"$whip" instances
# The primitives directly.
"$whip" lease acquire deploy prod --holder alice --ttl 10m
"$whip" lease acquire deploy prod --holder bob --ttl 10m
"$whip" counter consume tokens core --amount 60 --cap 100 --reset daily --timezone America/New_York --json
"$whip" ledger append audit deploys --entry '{"choice":"ship"}' --json
# A ledger named like a subcommand (`whip ledger audit` is the work registry's) is read
# with `whip ledger list`.
"$whip" ledger list audit
"$whip" kv cas config/owner alice --expect 0
"$whip" kv cas config/owner bob --expect 0
"$whip" cell status --json
# A team's task board: post two tasks, claim and complete one, a stale fence is refused.
"$whip" team create demo-team --reclaim 30s --delivery-limit 3
"$whip" board post demo-team --task '{"build":"api"}' --json
"$whip" board post demo-team --task '{"build":"web"}' --json
claim=$("$whip" board claim demo-team --worker w1 --json)
echo "$claim"
fence=$(echo "$claim" | sed -E 's/.*"fence":([0-9]+).*/\1/')
"$whip" board complete demo-team demo-team-1 --fence 1 || echo "(refused as expected: stale fence)"
"$whip" board complete demo-team demo-team-1 --fence "$fence" --json
"$whip" board stats demo-team --json
# A tracker is a task board: a rule files an issue and works it through a claim (exactly
# one claimant, fenced finish); the issue shows on the tracker's board.
"$whip" run "$programs/tracker_backlog.whip"
"$whip" issue list
"$whip" board stats '~tracker/local/Triage/backlog' --json
