#!/usr/bin/env bash
# Regenerate the committed protobuf stubs (whip_fabric/_proto/whip_pb2.py and its .pyi) from
# proto/proto/whip.proto with grpcio-tools. One command after the proto changes:
#   clients/python/scripts/gen-stubs.sh            # into whip_fabric/_proto
#   clients/python/scripts/gen-stubs.sh OUT_DIR    # elsewhere (the drift test compares)
# PYTHON names an interpreter with grpcio-tools; default: the venv of
# scripts/py-client-venv.sh, made if missing.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$here/whip_fabric/_proto}"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  python="$("$repo/scripts/py-client-venv.sh")"
fi
mkdir -p "$out"
"$python" -m grpc_tools.protoc --proto_path="$repo/proto/proto" \
  --python_out="$out" --pyi_out="$out" "$repo/proto/proto/whip.proto"
