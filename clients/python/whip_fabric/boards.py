"""A team's task board: post tasks, claim them, and complete, fail, release or extend each
claim with its fence.

``async for task in client.board(team).claims(worker, wait=10):`` claims one task after
another; while the board is empty it waits (woken by the board cell's applies through
``WaitApplied``, never polling) up to ``wait`` seconds, then ends. Every call on a task
presents its claim's fence: after the claim's window another worker may hold it, and the
late call raises :class:`~whip_fabric.errors.StaleFence` (or ``ClaimExpired``, a kind of
it, when nobody claimed it since).
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import errors
from ._proto import whip_pb2 as pb
from .transport import Transport
from .waits import Waiter

__all__ = ["Board", "BoardStats", "Task"]

_Claimed = TypeVar("_Claimed")


def _body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _checked(answer: pb.BoardResponse) -> pb.BoardResponse:
    if answer.code == pb.BOARD_REFUSED:
        raise errors.error_for(answer.refusal, answer.message)
    return answer


@dataclass
class Task:
    """A task of a board; one you claimed carries its claim's ``fence``."""

    id: str
    team: str
    body: Any
    fence: int = 0
    deadline_ms: int = 0
    delivery_count: int = 0
    state: str = "claimed"
    tier: str = "local"
    result: Any = None
    _board: Board | None = field(default=None, repr=False, compare=False)

    def _owner(self) -> Board:
        if self._board is None:
            raise errors.InvalidArgument("this task was read, not claimed: it has no claim")
        return self._board

    async def complete(self, result: Any = None) -> None:
        """Complete the task with ``result`` (JSON)."""
        await self._owner()._task_call("BoardComplete", self, result=json.dumps(result).encode())
        self.state = "done"

    async def fail(self, error: str) -> None:
        """Fail this delivery: the task is ready again (dead-lettered past its limit)."""
        await self._owner()._task_call("BoardFail", self, error=error)
        self.state = "failed"

    async def release(self) -> None:
        """Give the claim back unfinished (no failure recorded)."""
        await self._owner()._task_call("BoardRelease", self)
        self.state = "ready"

    async def extend(self, by: float) -> None:
        """Move the claim's deadline ``by`` seconds later."""
        answer = await self._owner()._task_call("BoardExtend", self, extend_ms=int(by * 1000))
        self.deadline_ms = answer.deadline_ms or self.deadline_ms


@dataclass(frozen=True)
class BoardStats:
    """Task counts of a board."""

    ready: int
    claimed: int
    done: int
    dead: int
    tier: str
    cell_ready: int


def _task(t: pb.Task, board: Board | None) -> Task:
    return Task(
        t.id, t.team, _body(t.body), t.fence, t.deadline_ms, t.delivery_count, t.state,
        t.tier, _body(t.result) if t.result else None, board,
    )


class Board:
    """The board of one team (``client.board(team)``)."""

    def __init__(self, transport: Transport, team: str) -> None:
        self._t = transport
        self.team = team

    async def post(self, body: dict[str, Any]) -> str:
        """Post a task (a JSON object); its id."""
        request = pb.BoardPostRequest(
            team=self.team, body=json.dumps(body).encode(),
            idempotency_key=self._t.idempotency_key(),
        )
        return _checked(await self._t.unary("BoardPost", request, pb.BoardResponse)).task_id

    async def post_many(self, bodies: list[dict[str, Any]]) -> list[str]:
        """Post several tasks at once, all or none; their ids."""
        request = pb.BoardPostRequest(
            team=self.team, bodies=[json.dumps(b).encode() for b in bodies],
            idempotency_key=self._t.idempotency_key(),
        )
        answer = _checked(await self._t.unary("BoardPost", request, pb.BoardResponse))
        return list(answer.task_ids)

    async def claim(self, worker: str) -> Task | None:
        """Claim the oldest ready task (local, then cell, then fabric tier) for the
        team's reclaim window; None when the board is empty."""
        request = pb.BoardClaimRequest(
            team=self.team, worker=worker, idempotency_key=self._t.idempotency_key()
        )
        answer = _checked(await self._t.unary("BoardClaim", request, pb.BoardResponse))
        if answer.code != pb.TASK_CLAIMED or not answer.HasField("task"):
            return None
        return _task(answer.task, self)

    async def claim_many(
        self, worker: str, max: int, *, complete: Sequence[tuple[Task, Any]] = (),
        wait: float = 0,
    ) -> builtins.list[Task]:
        """A prefetch in one write: complete each ``(task, result)`` of ``complete`` (all
        or none: one stale fence raises and changes nothing), then claim up to ``max``
        (at most 16) of the oldest ready tasks, each with its own fence and window. The
        claims, oldest first (empty when the board has none). With ``wait`` seconds and
        nothing claimed, wait for a ready task as :meth:`claims` does, then prefetch
        again (the completions are made once, by the first call)."""
        completes = [
            pb.BoardCompletion(task_id=t.id, fence=t.fence, result=json.dumps(r).encode())
            for t, r in complete
        ]
        claims = await self._prefetch(worker, max, completes)
        for task, _ in complete:
            task.state = "done"
        if claims or wait <= 0:
            return claims
        async def again() -> builtins.list[Task] | None:
            return await self._prefetch(worker, max, []) or None
        return await self._waiting(again, wait) or []

    async def _prefetch(
        self, worker: str, max: int, completes: builtins.list[pb.BoardCompletion]
    ) -> builtins.list[Task]:
        request = pb.BoardClaimRequest(
            team=self.team, worker=worker, max=max, completes=completes,
            idempotency_key=self._t.idempotency_key(),
        )
        answer = _checked(await self._t.unary("BoardClaim", request, pb.BoardResponse))
        return [_task(t, self) for t in answer.claims]

    async def claims(self, worker: str, *, wait: float) -> AsyncIterator[Task]:
        """Claim tasks one after another; while the board is empty wait for one (up to
        ``wait`` seconds each time), then end."""
        while True:
            task = await self._claim_waiting(worker, wait)
            if task is None:
                return
            yield task

    async def _claim_waiting(self, worker: str, wait: float) -> Task | None:
        return await self._waiting(lambda: self.claim(worker), wait)

    async def _waiting(
        self, attempt: Callable[[], Awaitable[_Claimed | None]], wait: float
    ) -> _Claimed | None:
        """``attempt`` until it claims something; while it claims nothing, wait for the
        board cell's applies (up to ``wait`` seconds in all), never polling."""
        started = time.monotonic()
        waiter = await Waiter.mark(self._t, board=self.team)
        seen: tuple[int, int, int] | None = None
        while True:
            task = await attempt()
            if task is not None:
                return task
            while True:
                left = wait - (time.monotonic() - started)
                if left <= 0:
                    return None
                if not await waiter.next(left):
                    # No apply in a whole call: a lapsed claim (which no apply announces)
                    # may be claimable now.
                    break
                stats = await self.stats()
                counts = (stats.ready, stats.claimed, stats.cell_ready)
                moved, seen = seen != counts, counts
                if moved or stats.ready + stats.cell_ready > 0:
                    break

    async def _task_call(self, method: str, task: Task, **fields: Any) -> pb.BoardResponse:
        request = pb.BoardTaskRequest(
            team=self.team, task_id=task.id, fence=task.fence,
            idempotency_key=self._t.idempotency_key(), **fields,
        )
        return _checked(await self._t.unary(method, request, pb.BoardResponse))

    async def stats(self) -> BoardStats:
        """The board's counts."""
        answer = await self._t.unary(
            "BoardStats", pb.BoardStatsRequest(team=self.team), pb.BoardStatsResponse
        )
        return BoardStats(
            answer.ready, answer.claimed, answer.done, answer.dead, answer.tier,
            answer.cell_ready,
        )

    async def get(self, task_id: str) -> Task | None:
        """One task as it is now, or None."""
        request = pb.BoardGetRequest(team=self.team, task_id=task_id)
        answer = await self._t.unary("BoardGet", request, pb.BoardListResponse)
        return _task(answer.tasks[0], None) if answer.tasks else None

    async def list(self, *, state: str = "", limit: int = 0) -> list[Task]:
        """Tasks of the board (one ``state``: ready, claimed, done, dead)."""
        request = pb.BoardListRequest(team=self.team, state=state, limit=limit)
        answer = await self._t.unary("BoardList", request, pb.BoardListResponse)
        return [_task(t, None) for t in answer.tasks]

    async def dead_letters(self, *, limit: int = 0) -> builtins.list[Task]:
        """Dead-lettered tasks."""
        request = pb.BoardListRequest(team=self.team, limit=limit)
        answer = await self._t.unary("BoardDeadLetters", request, pb.BoardListResponse)
        return [_task(t, None) for t in answer.tasks]

    async def redrive(self, task_id: str) -> None:
        """Put a dead-lettered task back on the board."""
        request = pb.BoardTaskRequest(
            team=self.team, task_id=task_id, idempotency_key=self._t.idempotency_key()
        )
        _checked(await self._t.unary("BoardRedrive", request, pb.BoardResponse))
