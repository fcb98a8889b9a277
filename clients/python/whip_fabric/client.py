"""The client: one connection to a cell or fabric, acting for one agent."""

from __future__ import annotations

from types import TracebackType

from . import config
from .boards import Board
from .coord import Counter, DEFAULT_OWNER, LeaseBlock, Leases, Ledger, new_holder
from .kv import Kv
from .mail import Mail
from .teams import Teams, Votes, Work
from .transport import Transport

__all__ = ["Client", "connect"]


class Client:
    """A connection acting for one agent. Use it as ``async with`` or call
    :meth:`close`.

    Attributes: ``kv``, ``leases``, ``counter``, ``ledger``, ``mail``, ``team``, ``vote``,
    ``work``; :meth:`board` and :meth:`lease` make per-team and per-lease handles.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.agent = transport.settings.agent
        self.kv = Kv(transport)
        self.leases = Leases(transport)
        self.counter = Counter(transport)
        self.ledger = Ledger(transport)
        self.mail = Mail(transport, self.agent)
        self.team = Teams(transport)
        self.vote = Votes(transport)
        self.work = Work(transport)

    def board(self, team: str) -> Board:
        """The task board of ``team``."""
        return Board(self.transport, team)

    def lease(
        self, resource: str, key: str, *, ttl: float, wait: float = 0, slots: int = 1,
        holder: str | None = None, owner: str = DEFAULT_OWNER,
    ) -> LeaseBlock:
        """``async with`` a slot of the lease: renewed in the background, released on
        exit; raises :class:`~whip_fabric.errors.Contended` when none came within
        ``wait`` seconds. ``holder`` defaults to the agent and a random suffix, unique to
        this block."""
        return LeaseBlock(
            self.leases, self.transport, resource, key,
            holder=holder or new_holder(self.agent), ttl=ttl, wait=wait, slots=slots,
            owner=owner,
        )

    async def close(self) -> None:
        """Close the connection's channels."""
        await self.transport.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def connect(
    cells: list[str] | None = None, *, agent: str | None = None, token: str | None = None,
    ca: str | None = None,
) -> Client:
    """Connect to a cell or fabric (any members' or nodes' ``host:port``), acting for
    ``agent`` proven by ``token``, trusting the cluster CA ``ca`` (a path or PEM text).
    Each left out comes from the CLI's files (:mod:`whip_fabric.config`). Channels open on
    first use."""
    return Client(Transport(config.resolve(cells, agent, token, ca)))
