"""Waiting for a subject's next change without polling (``Cell.WaitApplied``).

The pattern is mark, read, wait: :meth:`Waiter.mark` notes the apply index of the cell
holding a board, a mailbox, a lease's queue or a key; a read made after the mark sees every
change a later :meth:`Waiter.next` would announce, so nothing that lands between the read
and the wait is missed. A wake says only that the cell applied something: read again.
"""

from __future__ import annotations

import asyncio

from ._proto import whip_pb2 as pb
from .transport import ATTEMPT_TIMEOUT_S, Transport

__all__ = ["Waiter"]

# Longest one call asks to wait (below one attempt's bound).
CALL_S = 2.0
# A server hosting no member of the subject's cell cannot wake the client: a pause instead.
UNHOSTED_PAUSE_S = 0.25


class Waiter:
    """A mark on the apply index of one subject's cell."""

    def __init__(self, transport: Transport, subject: dict[str, object]) -> None:
        self._t = transport
        self._subject = subject
        self._after = 0

    @classmethod
    async def mark(cls, transport: Transport, **subject: object) -> Waiter:
        """Mark the cell of ``subject`` (``board=``, ``inbox=``, ``lease=`` or ``key=``)."""
        waiter = cls(transport, subject)
        waiter._after = (await waiter._ask(0, 0.0)).applied_index
        return waiter

    async def next(self, left: float) -> bool:
        """Wait until the cell applies past the mark or ``left`` seconds pass, and move
        the mark; True when something was applied (read the subject again)."""
        ask = max(0.0, min(left, CALL_S))
        answer = await self._ask(self._after, ask)
        if not answer.hosted:
            await asyncio.sleep(min(left, UNHOSTED_PAUSE_S))
            return True
        moved = answer.applied_index != self._after
        self._after = answer.applied_index
        return moved

    async def _ask(self, after: int, wait: float) -> pb.WaitAppliedResponse:
        request = pb.WaitAppliedRequest(
            after_index=after, timeout_ms=int(wait * 1000), **self._subject  # type: ignore[arg-type]
        )
        return await self._t.unary(
            "WaitApplied", request, pb.WaitAppliedResponse, timeout=wait + ATTEMPT_TIMEOUT_S
        )
