"""Where a client finds its cells, agent, token and CA by default: the CLI's own files.

- cells: ``WHIP_CELL`` (``host:port[,host:port...]``);
- agent: ``WHIP_AGENT``, else ``cli-$USER`` (the CLI's default agent);
- token: the agent's entry in the credentials file, ``WHIP_CREDENTIALS``, else
  ``credentials.json`` in the whip config directory (``WHIP_CONFIG_DIR``, else
  ``~/.config/whip``), a JSON object ``{agent: token}``;
- CA: ``ca.pem`` in the whip config directory;
- ``WHIP_INSECURE=1``: plaintext (the server must run ``--insecure``, on loopback only).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidArgument, NotAuthenticated

__all__ = ["Settings", "config_dir", "credentials_path", "resolve"]


@dataclass(frozen=True)
class Settings:
    """What a client connects with."""

    cells: tuple[str, ...]
    agent: str
    token: str
    ca_pem: bytes | None
    insecure: bool


def config_dir() -> Path:
    """The whip config directory: ``WHIP_CONFIG_DIR``, else ``~/.config/whip``."""
    named = os.environ.get("WHIP_CONFIG_DIR")
    if named:
        return Path(named)
    return Path.home() / ".config" / "whip"


def credentials_path() -> Path:
    """The CLI's credentials file: ``WHIP_CREDENTIALS``, else in the config directory."""
    named = os.environ.get("WHIP_CREDENTIALS")
    if named:
        return Path(named)
    return config_dir() / "credentials.json"


def default_agent() -> str:
    """``WHIP_AGENT``, else the CLI's default agent ``cli-$USER``."""
    named = os.environ.get("WHIP_AGENT")
    if named:
        return named
    return "cli-" + os.environ.get("USER", "operator")


def _cells(cells: list[str] | None) -> tuple[str, ...]:
    if cells is None:
        spec = os.environ.get("WHIP_CELL", "")
        cells = [part for part in spec.split(",")]
    found = tuple(c.strip() for c in cells if c.strip())
    if not found:
        raise InvalidArgument("no cell address: pass cells=[...] or set WHIP_CELL")
    return found


def _token(agent: str, token: str | None) -> str:
    if token is not None:
        return token
    path = credentials_path()
    try:
        tokens = json.loads(path.read_text())
    except FileNotFoundError:
        tokens = {}
    found = tokens.get(agent) if isinstance(tokens, dict) else None
    if not isinstance(found, str):
        raise NotAuthenticated(
            f"no token for agent {agent!r} in {path}: register it (`whip agent register "
            f"--agent {agent}`) or pass token=..."
        )
    return found


def _ca(ca: str | None, insecure: bool) -> bytes | None:
    if insecure:
        return None
    if ca is not None and ca.lstrip().startswith("-----BEGIN"):
        return ca.encode()
    path = Path(ca) if ca is not None else config_dir() / "ca.pem"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InvalidArgument(
            f"no CA certificate at {path}: copy the cluster's ca.pem there or pass ca=..."
        ) from None


def resolve(
    cells: list[str] | None, agent: str | None, token: str | None, ca: str | None
) -> Settings:
    """The settings of a connection: each argument given, else the CLI's default."""
    insecure = os.environ.get("WHIP_INSECURE", "") not in ("", "0", "false")
    name = agent if agent is not None else default_agent()
    return Settings(
        cells=_cells(cells),
        agent=name,
        token=_token(name, token),
        ca_pem=_ca(ca, insecure),
        insecure=insecure,
    )
