"""Teams, the voting plane and the live work registry.

``async with client.work.register(kind="session", ttl=30) as entry:`` admits a work entry,
renews it in the background (``entry.signal`` follows what the fabric says: run, pause or
stop) and revokes it on exit. An admission refused by a limit raises
:class:`OverLimit` with the limit, its maximum and the current count.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from google.protobuf.json_format import MessageToDict

from . import errors
from ._proto import whip_pb2 as pb
from .transport import Transport

__all__ = ["OverLimit", "Teams", "Votes", "Work", "WorkEntry"]

RENEW_SHARE = 1 / 3
# Rounds a dissolve runs before it gives up (each removes a bounded batch).
DISSOLVE_ROUNDS_MAX = 1000


def _team_checked(answer: pb.TeamResponse) -> pb.TeamResponse:
    if answer.code == pb.BOARD_REFUSED:
        raise errors.error_for(answer.refusal, answer.message)
    return answer


class Teams:
    """Team operations (``client.team``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def create(
        self, team: str, *, parent: str | None = None, reclaim: float | None = None,
        delivery_limit: int = 0, spill_after: float | None = None,
    ) -> None:
        """Create a team supervised by the caller."""
        settings = pb.BoardSettings(
            reclaim_ms=int((reclaim or 0) * 1000), delivery_limit=delivery_limit,
            spill_after_ms=int((spill_after or 0) * 1000),
        )
        request = pb.TeamCreateRequest(
            team=team, settings=settings, idempotency_key=self._t.idempotency_key()
        )
        if parent is not None:
            request.parent = parent
        _team_checked(await self._t.unary("TeamCreate", request, pb.TeamResponse))

    async def join(self, team: str, agent: str) -> None:
        """Add ``agent`` to the team (the supervisor's call)."""
        request = pb.TeamJoinRequest(
            team=team, agent=agent, idempotency_key=self._t.idempotency_key()
        )
        _team_checked(await self._t.unary("TeamJoin", request, pb.TeamResponse))

    async def dissolve(self, team: str) -> int:
        """Delete the team and everything it keeps, in bounded rounds; rows removed."""
        removed = 0
        for _ in range(DISSOLVE_ROUNDS_MAX):
            request = pb.TeamDissolveRequest(team=team, idempotency_key=self._t.idempotency_key())
            answer = _team_checked(await self._t.unary("TeamDissolve", request, pb.TeamResponse))
            removed += answer.removed
            if answer.done:
                return removed
        raise errors.Unavailable(f"team {team} was not dissolved in {DISSOLVE_ROUNDS_MAX} rounds")

    async def role(self, team: str, member: str, role: str) -> None:
        """Give ``member`` a role (coordinator or worker) for votes."""
        request = pb.TeamRoleRequest(
            team=team, member=member, role=role, idempotency_key=self._t.idempotency_key()
        )
        _vote_checked(await self._t.unary("TeamRole", request, pb.VoteResponse))


def _vote_checked(answer: pb.VoteResponse) -> pb.VoteResponse:
    if answer.code == pb.VOTE_REFUSED:
        raise errors.error_for(answer.reason, answer.message)
    return answer


class Votes:
    """The voting plane (``client.vote``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def open(
        self, team: str, title: str, options: list[str], *, method: str = "plurality",
        electorate: list[str] | None = None, quorum: str = "0.5", threshold: str = "majority",
        duration: float = 3600, until_all_voted: bool = False,
    ) -> str:
        """Open a proposal; its id."""
        request = pb.VoteOpenRequest(
            team=team, title=title, options=options, method=method,
            electorate=electorate or [], quorum=quorum, threshold=threshold,
            duration_ms=int(duration * 1000), until_all_voted=until_all_voted,
            idempotency_key=self._t.idempotency_key(),
        )
        return _vote_checked(await self._t.unary("VoteOpen", request, pb.VoteResponse)).proposal

    async def cast(self, proposal: str, choice: str | list[str]) -> bool:
        """Cast the caller's ballot; True when it closed the vote."""
        choices = [choice] if isinstance(choice, str) else choice
        request = pb.VoteCastRequest(
            proposal=proposal, choice=choices, idempotency_key=self._t.idempotency_key()
        )
        return _vote_checked(await self._t.unary("VoteCast", request, pb.VoteResponse)).closed

    async def close(self, proposal: str) -> dict[str, Any]:
        """Close the proposal now (its opener); the result."""
        request = pb.VoteCloseRequest(proposal=proposal, idempotency_key=self._t.idempotency_key())
        answer = _vote_checked(await self._t.unary("VoteClose", request, pb.VoteResponse))
        return {"result": answer.result, "winner": answer.winner or None}

    async def show(self, proposal: str) -> dict[str, Any] | None:
        """The proposal with its state and result (as a dict), or None."""
        request = pb.VoteShowRequest(proposal=proposal)
        answer = await self._t.unary("VoteShow", request, pb.VoteShowResponse)
        if not answer.HasField("proposal"):
            return None
        return MessageToDict(answer.proposal, preserving_proto_field_name=True)


class OverLimit(errors.WhipError):
    """The work registry admits no more entries here (``limit``: fabric, cell, depth,
    children, ...)."""

    code = "over_limit"

    def __init__(self, detail: str = "", *, limit: str = "", max: int = 0, current: int = 0):
        super().__init__(detail)
        self.limit, self.max, self.current = limit, max, current


@dataclass
class WorkEntry:
    """A live work entry; ``signal`` is what the fabric asks of it (run, pause, stop)."""

    id: str
    kind: str
    owner: str
    signal: str = "run"
    expires_ms: int = 0
    lost: bool = False
    peers: list[str] = field(default_factory=list)


class _WorkBlock:
    def __init__(self, work: Work, request: pb.WorkRegisterRequest, ttl: float) -> None:
        self._work, self._request, self._ttl = work, request, ttl
        self._entry: WorkEntry | None = None
        self._renewer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> WorkEntry:
        self._entry = await self._work.admit(self._request)
        self._renewer = asyncio.create_task(self._renew_loop(self._entry))
        return self._entry

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        if self._entry is not None:
            await self._work.revoke(self._entry.id)

    async def _renew_loop(self, entry: WorkEntry) -> None:
        while True:
            await asyncio.sleep(self._ttl * RENEW_SHARE)
            try:
                answer = await self._work.renew(entry.id, ttl=self._ttl)
            except errors.Unavailable:
                continue
            except errors.WhipError:
                entry.lost = True
                return
            entry.signal = answer.signal or entry.signal
            entry.expires_ms = answer.expires_ms


class Work:
    """The live work registry (``client.work``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def register(
        self, *, kind: str = "session", parent: str = "", work_class: str = "",
        ttl: float = 30, owner: str = "",
    ) -> _WorkBlock:
        """``async with`` a work entry: admitted, renewed, revoked on exit."""
        request = pb.WorkRegisterRequest(
            kind=kind, parent=parent, ttl_ms=int(ttl * 1000), owner=owner,
            idempotency_key=self._t.idempotency_key(),
        )
        setattr(request, "class", work_class)
        return _WorkBlock(self, request, ttl)

    async def admit(self, request: pb.WorkRegisterRequest) -> WorkEntry:
        """Register one entry (see :meth:`register` for the block)."""
        answer = await self._t.unary("WorkRegister", request, pb.WorkResponse)
        if answer.code != pb.WORK_ADMITTED:
            raise OverLimit(
                answer.reason or f"the {answer.limit} limit is reached",
                limit=answer.limit, max=answer.max, current=answer.current,
            )
        e = answer.entry
        return WorkEntry(e.id, e.kind, e.owner, e.signal or "run", e.expires_ms,
                         peers=list(answer.peers))

    async def renew(self, entry_id: str, *, ttl: float) -> pb.WorkResponse:
        """Renew an entry; the answer carries the signal in force."""
        request = pb.WorkRenewRequest(
            id=entry_id, ttl_ms=int(ttl * 1000), idempotency_key=self._t.idempotency_key()
        )
        return await self._t.unary("WorkRenew", request, pb.WorkResponse)

    async def revoke(self, entry_id: str) -> None:
        """Remove an entry (and its descendants)."""
        request = pb.WorkRevokeRequest(id=entry_id, idempotency_key=self._t.idempotency_key())
        await self._t.unary("WorkRevoke", request, pb.WorkResponse)

    async def list(self, parent: str = "", *, limit: int = 0) -> list[dict[str, Any]]:
        """Live entries (children of ``parent``, or all)."""
        request = pb.WorkListRequest(parent=parent, limit=limit)
        answer = await self._t.unary("WorkList", request, pb.WorkListResponse)
        return [MessageToDict(e, preserving_proto_field_name=True) for e in answer.entries]
