"""A fabric's range map, as a client routes by it (the Rust client's ``MapRouter``).

Every keyed command has a point on a 64-bit ring: the first 8 bytes (big-endian) of the
blake3 hash of its routing key. The map (``Cell.Routes``) cuts the ring into ranges, each
owned by one cell at an epoch, and says which node hosts each cell's leader. A plain keyed
write goes straight to that node and names ``<cell>.<epoch>`` in the ``whip-route``
header; the node serves it only while it leads that cell at that epoch, else answers
``NotLeader`` (with the leader's address) or ``WrongRange``, and the client looks again.
A server answering no ranges is a single cell: then nothing is routed.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

from blake3 import blake3

from ._proto import whip_pb2 as pb

__all__ = ["Pick", "RangeTable", "kv_point", "resource_point", "point"]

ROUTE_HEADER = "whip-route"
# Team rows of the blackboard live at their team's point.
_TEAM_ROW_PREFIXES = (b"doc/", b"frame/", b"artifacts/")
_TEAM_OWNER_PREFIX = "team/"
# A node that did not answer is skipped this long.
UNREACHABLE_S = 2.0
# A table without a reachable leader for a key is learned again after this long.
REFRESH_S = 1.0


def point(routing_key: bytes) -> int:
    """The point of ``routing_key`` on the ring."""
    return int.from_bytes(blake3(routing_key).digest()[:8], "big")


def _tagged(family: bytes, name: str) -> int:
    return point(family + b"\0" + name.encode())


def team_point(team: str) -> int:
    """The point of a team (its record, board and blackboard)."""
    return _tagged(b"team", team)


def _kv_routing_key(key: bytes) -> bytes:
    opened = key.find(b"{")
    if opened >= 0:
        closed = key.find(b"}", opened + 1)
        if closed > opened + 1:
            return key[opened + 1 : closed]
    return key


def _team_of_key(key: bytes) -> str | None:
    for prefix in _TEAM_ROW_PREFIXES:
        if key.startswith(prefix):
            rest = key[len(prefix) :]
            closed = rest.find(b"}")
            if rest.startswith(b"{") and closed > 1:
                try:
                    return rest[1:closed].decode()
                except UnicodeDecodeError:
                    return None
    return None


def kv_point(key: bytes) -> int:
    """The point of a CAS key: its ``{tag}`` if it has one, a team row's team."""
    team = _team_of_key(key)
    if team is not None:
        return team_point(team)
    return point(_kv_routing_key(key))


def resource_point(resource: pb.ResourceId) -> int:
    """The point of a lease, counter or ledger partition."""
    if resource.owner.startswith(_TEAM_OWNER_PREFIX) and len(resource.owner) > 5:
        return team_point(resource.owner[len(_TEAM_OWNER_PREFIX) :])
    joined = b"\0".join(
        part.encode() for part in (resource.owner, resource.name, resource.key)
    )
    return point(joined)


def keys_point(keys: list[bytes]) -> int | None:
    """The one point of ``keys``, or None when they have none in common (or no keys)."""
    points = {kv_point(k) for k in keys}
    return points.pop() if len(points) == 1 else None


@dataclass(frozen=True)
class Pick:
    """Where one keyed write goes: the node and the route it names there."""

    addr: str
    cell: int
    epoch: int

    def header(self) -> tuple[str, str]:
        """The ``whip-route`` metadata pair."""
        return (ROUTE_HEADER, f"{self.cell}.{self.epoch}")


@dataclass
class RangeTable:
    """One answer of ``Cell.Routes``: ranges in ring order and each cell's leader."""

    starts: list[int]
    ranges: list[pb.RangeRoute]
    leaders: dict[int, str]
    learned: float = field(default_factory=time.monotonic)

    @staticmethod
    def of(answer: pb.RoutesResponse) -> RangeTable | None:
        """The table of ``answer``; None for a single cell (no ranges) or a broken map."""
        ranges = list(answer.ranges)
        if not ranges or not _tiles(ranges):
            return None
        leaders = {c.cell: c.leader_addr for c in answer.cells if c.leader_addr}
        return RangeTable([r.start for r in ranges], ranges, leaders)

    def locate(self, at: int) -> pb.RangeRoute:
        """The range holding point ``at``."""
        return self.ranges[bisect.bisect_right(self.starts, at) - 1]


def _tiles(ranges: list[pb.RangeRoute]) -> bool:
    expect = 0
    for r in ranges:
        if r.start != expect or r.last < r.start:
            return False
        expect = r.last + 1
    return expect == 1 << 64
