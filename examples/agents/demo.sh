#!/usr/bin/env bash
# The review team (examples/agents/review_team.whip) end to end, on the embedded store in a
# throw-away directory:
# - a stub model on loopback (stub_model.py) stands in for the model service;
# - `whip broker` keeps the model key (`secret set`, from stdin) and issues the worker's
#   token; the engine's coercion reaches the model only through it;
# - `whip run review_team.whip` (as the operator, whose rows the built-in tracker is): two
#   tasks filed on the tracker, each claimed, written by the `writer` agent and reviewed by
#   the `reviewer` agent (fixture provider, 300 ms a turn), finished; the `judge`
#   coercion asks the model for a verdict;
# - the team `council`: lead supervises and coordinates, ann and bo coordinate;
#   `whip run release_vote.whip` as lead opens the release vote with the verdict; ann and
#   bo cast, lead closes it;
# - then the key is looked for in the store: it is not there.
#
# WHIP_BIN=PATH runs that binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")"
here=$PWD
whip=${WHIP_BIN:-}
# Forget the whip settings a quickstart may have left exported (`WHIP_CELL`, …): the demo
# runs on its own store.
source ../../scripts/clean-env.sh
if [ -z "$whip" ]; then
  (cd ../.. && cargo build --release -p whip >&2)
  whip=$here/../../target/release/whip
fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
export WHIPPLESCRIPT_STORE=$work/store
export WHIP_CONFIG_DIR=$work/config
export WHIP_CREDENTIALS=$WHIP_CONFIG_DIR/credentials.json
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
model_port=$(free_port)
broker_port=$(free_port)
key="demo-key-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"

python3 "$here/stub_model.py" "$model_port" "$work/model.log" &
pids+=($!)
printf '%s\n' "$key" |
  "$whip" broker secret set model-key --provider gpt --origin "http://127.0.0.1:$model_port" --data "$work/broker"
token=$("$whip" broker token issue --worker demo --data "$work/broker")
"$whip" broker --bind "127.0.0.1:$broker_port" --data "$work/broker" &
pids+=($!)
cat > "$work/providers.json" <<JSON
{"bindings": [{"provider_id": "gpt", "provider_kind": "openai-generic", "model": "demo-model",
  "base_url": "http://127.0.0.1:$model_port/v1", "credentials_ref": "secret:model-key"}]}
JSON
export WHIP_MODEL_BROKER_URL=http://127.0.0.1:$broker_port
export WHIP_MODEL_BROKER_TOKEN=$token

set -x
"$whip" run review_team.whip --wait --provider-config "$work/providers.json" --fixture-turn-ms 300 \
  | tee "$work/review.out"
verdict=$(sed -n 's/^result //p' "$work/review.out" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])')
"$whip" agent register --agent lead
"$whip" team create council --agent lead
for member in ann bo; do
  "$whip" agent register --agent "$member"
  "$whip" team join council --member "$member" --agent lead
  "$whip" team role council --member "$member" --role coordinator --agent lead
done
"$whip" team role council --member lead --role coordinator --agent lead
"$whip" run release_vote.whip --wait --agent lead \
  --input "{\"verdict\": {\"verdict\": \"$verdict\"}}" > "$work/vote.out" &
run=$!
set +x
proposal=""
for _ in $(seq 200); do
  proposal=$("$whip" vote list council --json --agent ann 2>/dev/null |
    python3 -c 'import json,sys; p=json.load(sys.stdin)["proposals"]; print(p[0]["proposal"] if p else "")' || true)
  [ -n "$proposal" ] && break
  sleep 0.1
done
[ -n "$proposal" ] || { echo "the council's vote never opened" >&2; cat "$work/vote.out" >&2; exit 1; }
set -x
"$whip" vote cast "$proposal" --choice ship --agent ann
"$whip" vote cast "$proposal" --choice ship --agent bo
"$whip" vote close "$proposal" --agent lead
wait "$run"
cat "$work/vote.out"
# Both lifecycles conform to the engine's rules.
"$whip" trace "$(sed -n 's/^run //p' "$work/review.out")" --check
"$whip" trace "$(sed -n 's/^run //p' "$work/vote.out")" --check --agent lead
set +x
echo "== what reached the model:"
cat "$work/model.log"
grep -q "Bearer $key" "$work/model.log" && echo "the key reached the model (through the broker)"
if grep -rqF "$key" "$WHIPPLESCRIPT_STORE"; then
  echo "the key is in the engine's store" >&2
  exit 1
fi
echo "the key is nowhere in the engine's store"
