#!/usr/bin/env bash
# The Python client's checks: make the venv (scripts/py-client-venv.sh: pinned, idempotent,
# locked), type-check the package with mypy --strict, then run its pytest suite against real
# servers started by the tests from the `whip` binary ($WHIP, else target/debug/whip of
# $CARGO_TARGET_DIR). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python="$(./scripts/py-client-venv.sh)"
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
export WHIP="${WHIP:-$target_dir/debug/whip}"
[ -x "$WHIP" ] || { echo "no whip binary at $WHIP: run cargo build --bins first" >&2; exit 1; }
cd clients/python
echo "== mypy --strict whip_fabric" >&2
"$python" -m mypy --strict --cache-dir "${TMPDIR:-/tmp}/whip-py-mypy" whip_fabric
echo "== pytest clients/python/tests" >&2
"$python" -m pytest -p no:cacheprovider -q "$@"
