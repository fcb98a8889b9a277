"""Real whip servers for the tests: a 3-voter cell (``whip cell serve`` x3 + ``cell init``)
or a 3-node fabric (``whip node serve`` x3 + ``fabric init``), in a temporary directory
with its own whip config (its own CA) and credentials file.

The binary is ``$WHIP``, else ``target/debug/whip`` of the checkout (``$CARGO_TARGET_DIR``
honoured). Every wait is on a predicate with a deadline, never a bare sleep.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
# Generous: the suite runs beside cargo builds on two cores.
START_WAIT_S = 60.0


def whip_binary() -> str:
    """The whip binary the tests run."""
    named = os.environ.get("WHIP")
    if named:
        return named
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return str(target / "debug" / "whip")


def wait_for(what: str, check: Callable[[], bool], within: float = START_WAIT_S) -> None:
    """Wait until ``check()`` holds, looking again every 50 ms, at most ``within`` s."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {within} s")
        time.sleep(0.05)


def free_ports(n: int) -> list[int]:
    """``n`` ports free now (bound and released together, so distinct)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def listening(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHIP_", "WHIPPLESCRIPT_"))}
    env.update(extra)
    return env


class Servers:
    """Three server processes of one cell or fabric, and the CLI against them."""

    def __init__(self, kind: str) -> None:
        assert kind in ("cell", "node")
        self.kind = kind
        self._dir = tempfile.TemporaryDirectory(prefix=f"whip-py-{kind}-")
        self.root = Path(self._dir.name)
        self.config_dir = self.root / "config"
        self.credentials = self.root / "credentials.json"
        self.addrs = [f"127.0.0.1:{p}" for p in free_ports(3)]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.env = _clean_env({
            "WHIP_CONFIG_DIR": str(self.config_dir),
            "WHIP_CREDENTIALS": str(self.credentials),
            "WHIP_LOG": "warn",
        })

    # ------------------------------------------------------------------ processes

    def spawn(self, member: int) -> None:
        """Start (or restart) member ``member`` (1-based)."""
        addr = self.addrs[member - 1]
        log = open(self.root / f"{self.kind}-{member}.log", "ab")
        self.procs[member] = subprocess.Popen(
            [whip_binary(), self.kind, "serve", "--id", str(member), "--listen", addr,
             "--data", str(self.root / f"data-{member}")],
            env=self.env, stdout=log, stderr=log,
        )

    def kill(self, member: int) -> None:
        """SIGKILL member ``member`` and reap it."""
        proc = self.procs.pop(member, None)
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        """Kill every member and remove the directory."""
        for member in list(self.procs):
            self.kill(member)
        self._dir.cleanup()

    # ------------------------------------------------------------------ the CLI

    def whip(self, *args: str, check: bool = True) -> Any:
        """``whip ARGS --cell ADDRS --json``: its JSON answer (None when not JSON)."""
        cells = ",".join(self.addrs)
        out = subprocess.run(
            [whip_binary(), *args, "--cell", cells, "--json"],
            env=self.env, capture_output=True, timeout=120,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"whip {args} failed: {out.stderr.decode()}")
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def start(self) -> Servers:
        """Start all three and make them one cell or fabric."""
        # The first server makes the cluster CA in the config dir: start it alone first.
        self.spawn(1)
        wait_for("member 1 listening", lambda: listening(self.addrs[0]))
        for member in (2, 3):
            self.spawn(member)
        for addr in self.addrs:
            wait_for(f"{addr} listening", lambda a=addr: listening(a))  # type: ignore[misc]
        if self.kind == "cell":
            members = [f"--member={i}={a}" for i, a in enumerate(self.addrs, 1)]
            self.whip("cell", "init", *members)
        else:
            nodes = [f"--node={i}={a}" for i, a in enumerate(self.addrs, 1)]
            self.whip("fabric", "init", *nodes, "--cells", "2")
        return self

    def register(self, *agents: str) -> None:
        """Register agents; their tokens land in the credentials file."""
        for agent in agents:
            self.whip("agent", "register", "--agent", agent)

    def team(self, team: str, supervisor: str, *members: str) -> None:
        """Create ``team`` supervised by ``supervisor`` with ``members``."""
        self.whip("team", "create", team, "--agent", supervisor)
        for member in members:
            self.whip("team", "join", team, "--member", member, "--agent", supervisor)

    def token(self, agent: str) -> str:
        """The token of a registered agent."""
        tokens: dict[str, str] = json.loads(self.credentials.read_text())
        return tokens[agent]

    def ca(self) -> str:
        """The cluster CA's certificate file."""
        return str(self.config_dir / "ca.pem")

    def leader(self) -> int | None:
        """The member leading the cell (a cell) or the most cells' leaders... (a fabric:
        the leader of data cell 1)."""
        if self.kind == "cell":
            for i, addr in enumerate(self.addrs, 1):
                if i not in self.procs:
                    continue
                status = self._status(addr)
                if status and status.get("leader") in self.procs:
                    return int(status["leader"])
            return None
        status = self.whip("fabric", "status", check=False)
        for cell in (status or {}).get("cells", []):
            if cell.get("id") == 1 and cell.get("leader") in self.procs:
                return int(cell["leader"])
        return None

    def _status(self, addr: str) -> dict[str, Any] | None:
        out = subprocess.run(
            [whip_binary(), "cell", "status", "--cell", addr, "--json"],
            env=self.env, capture_output=True, timeout=30,
        )
        try:
            found: dict[str, Any] = json.loads(out.stdout)
            return found
        except ValueError:
            return None
