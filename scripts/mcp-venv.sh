#!/usr/bin/env bash
# The Python environment of the MCP process tests: a venv at tests/.venv-mcp (or the path
# given as $1) with the official MCP client (PyPI `mcp`), pinned. Idempotent and safe to run
# from several tests at once (a lock file serialises them); prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
# The official Python SDK; tests/mcp/client.py speaks through it.
MCP_VERSION=2.3.0
venv="${1:-$PWD/tests/.venv-mcp}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c "import mcp, importlib.metadata as m; \
assert m.version('mcp') == '$MCP_VERSION'" >/dev/null 2>&1; then
  echo "installing mcp==$MCP_VERSION into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" >&2
fi
echo "$venv/bin/python"
