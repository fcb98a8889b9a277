"""The committed protobuf stubs match proto/proto/whip.proto: regenerate them into a
temporary directory with the pinned grpcio-tools and compare byte for byte. When this
fails, run clients/python/scripts/gen-stubs.sh and commit the result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COMMITTED = HERE / "whip_fabric" / "_proto"


def test_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run([str(HERE / "scripts" / "gen-stubs.sh"), str(tmp_path)], env=env, check=True)
    for name in ("whip_pb2.py", "whip_pb2.pyi"):
        fresh = (tmp_path / name).read_bytes()
        assert fresh == (COMMITTED / name).read_bytes(), (
            f"{name} drifted from whip.proto: run clients/python/scripts/gen-stubs.sh"
        )


def test_the_package_says_its_version() -> None:
    import whip_fabric

    assert whip_fabric.__version__.count(".") == 2
