#!/usr/bin/env bash
# The main job of the README on a fresh machine: the embedded single-voter cell (same Raft
# and state-machine path as a cluster) under a throw-away store, driving each primitive.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p whip
whip=$PWD/target/release/whip
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
export WHIPPLESCRIPT_STORE=$store
set -x
"$whip" lease acquire deploy_slot prod --holder ins_a --ttl 10m --owner local/Ship
"$whip" lease acquire deploy_slot prod --holder ins_b --ttl 10m --owner local/Ship
"$whip" lease list
"$whip" lease release deploy_slot prod --holder ins_a --owner local/Ship
"$whip" counter consume tokens core --amount 60 --cap 100 --reset daily --timezone America/New_York --owner local/Budget
"$whip" counter consume tokens core --amount 60 --cap 100 --reset daily --timezone America/New_York --owner local/Budget
"$whip" counter list
"$whip" ledger append decisions deploys --entry '{"area":"deploys","choice":"ship api first"}' --owner local/Decisions --json
"$whip" ledger list decisions --owner local/Decisions
"$whip" kv put config/feature on
"$whip" kv cas config/feature off --expect 1
"$whip" cell status --json
