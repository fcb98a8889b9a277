#!/usr/bin/env bash
# The test command of the README: build the `whip` binary (process-level tests start it),
# run every test of the workspace with nextest, then the Python client's type check and
# tests (scripts/py-client-test.sh, against the same binary).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/clean-env.sh
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest" >&2
  cargo install cargo-nextest --locked
fi
cargo build --workspace --bins
cargo nextest run --workspace --no-fail-fast "$@"
./scripts/py-client-test.sh
