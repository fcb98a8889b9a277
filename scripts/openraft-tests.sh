#!/usr/bin/env bash
# openraft's own unit tests (the engine, core, storage and replication tests under its
# src/) on the patched copy in vendor/openraft (PATCH.md), with the features the workspace
# builds it with. The crate is outside the workspace: it builds with its own lockfile (the
# registry's, for 0.9.25's dev-dependencies) in its own target directory.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}/openraft-tests"
CARGO_TARGET_DIR="$target" cargo test --manifest-path vendor/openraft/Cargo.toml --locked \
  --lib --features serde,storage-v2 -- --test-threads 2 "$@"
