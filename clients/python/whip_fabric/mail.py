"""Agent mail: send, read, follow and take from an inbox.

The sender of a message is the caller the server proved (never a field the client sets),
and ``trust`` says how far the server vouches for it: ``untrusted`` (a peer),
``authority`` (the recipient's supervisor chain) or ``server``. A refused send raises the
refusal's error class (``not_member``, ``mailbox_full``, ...).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import errors
from ._proto import whip_pb2 as pb
from .transport import Transport
from .waits import CALL_S, Waiter

__all__ = ["Mail", "MailMessage"]

_TYPES = {
    "inform": pb.MAIL_TYPE_INFORM,
    "ask": pb.MAIL_TYPE_ASK,
    "reply": pb.MAIL_TYPE_REPLY,
    "directive": pb.MAIL_TYPE_DIRECTIVE,
    "notice": pb.MAIL_TYPE_NOTICE,
}
_NAMES = {number: name for name, number in _TYPES.items()}


@dataclass(frozen=True)
class MailMessage:
    """A delivered message, as the server stamped it."""

    id: str
    seq: int
    to: str
    sender: str
    type: str
    text: str
    payload: Any
    trust: str
    at_ms: int
    in_reply_to: str | None
    thread: str | None
    screen: str


def _message(m: pb.MailMessage) -> MailMessage:
    payload = json.loads(m.payload) if m.HasField("payload") else None
    return MailMessage(
        m.id, m.seq, m.to, getattr(m, "from"), _NAMES.get(m.type, str(m.type)), m.text,
        payload, m.trust, m.at_ms,
        m.in_reply_to if m.HasField("in_reply_to") else None,
        m.thread if m.HasField("thread") else None,
        m.screen.verdict,
    )


class Mail:
    """Mail of the client's agent (``client.mail``)."""

    def __init__(self, transport: Transport, agent: str) -> None:
        self._t = transport
        self._own = f"agent:{agent}"

    async def send(
        self, to: str, *, type: str, text: str, payload: dict[str, Any] | None = None,
        in_reply_to: str | None = None, thread: str | None = None,
    ) -> str:
        """Send a message (``to``: ``agent:NAME``, ``team:NAME``, ``entry:ID`` or a name);
        its id."""
        if type not in _TYPES:
            raise errors.InvalidArgument(f"mail type {type!r} is not one of {sorted(_TYPES)}")
        request = pb.MailSendRequest(
            to=to, type=_TYPES[type], text=text, idempotency_key=self._t.idempotency_key()
        )
        if payload is not None:
            request.payload = json.dumps(payload)
        if in_reply_to is not None:
            request.in_reply_to = in_reply_to
        if thread is not None:
            request.thread = thread
        answer = await self._t.unary("MailSend", request, pb.MailSendResponse)
        if answer.code != pb.MAIL_DELIVERED:
            raise errors.error_for(answer.reason, answer.message)
        return answer.id

    async def send_many(
        self, to: str, texts: Sequence[str], *, type: str = "inform"
    ) -> list[str | errors.WhipError]:
        """Send several messages of one ``type`` to ``to`` in one write (at most 64), in
        order. Each is delivered or refused on its own: its id, or the typed error of its
        refusal (the others are delivered all the same)."""
        if type not in _TYPES:
            raise errors.InvalidArgument(f"mail type {type!r} is not one of {sorted(_TYPES)}")
        messages = [pb.MailSendItem(type=_TYPES[type], text=t) for t in texts]
        request = pb.MailSendManyRequest(
            to=to, messages=messages, idempotency_key=self._t.idempotency_key()
        )
        answer = await self._t.unary("MailSendMany", request, pb.MailSendManyResponse)
        return [
            r.id if r.code == pb.MAIL_DELIVERED else errors.error_for(r.reason, r.message)
            for r in answer.results
        ]

    async def read(
        self, address: str | None = None, *, after_seq: int = 0, limit: int = 0
    ) -> list[MailMessage]:
        """One page of an inbox (default: the agent's own)."""
        request = pb.MailInboxRequest(
            address=address or self._own, after_seq=after_seq, limit=limit
        )
        answer = await self._t.unary("MailInbox", request, pb.MailInboxResponse)
        return [_message(m) for m in answer.messages]

    async def inbox(
        self, address: str | None = None, *, after_seq: int = 0, follow: bool = False
    ) -> AsyncIterator[MailMessage]:
        """Messages after ``after_seq``; with ``follow`` each new one as it lands, woken by
        the mailbox cell's applies (``WaitApplied``), until the caller stops iterating."""
        address = address or self._own
        waiter = await Waiter.mark(self._t, inbox=address) if follow else None
        after = after_seq
        while True:
            for message in await self.read(address, after_seq=after):
                after = max(after, message.seq)
                yield message
            if waiter is None:
                return
            await waiter.next(CALL_S)

    async def ack(self, through_seq: int, address: str | None = None) -> int:
        """Remove the inbox's messages through ``through_seq``; how many went."""
        request = pb.MailAckRequest(
            address=address or self._own, through_seq=through_seq,
            idempotency_key=self._t.idempotency_key(),
        )
        answer = await self._t.unary("MailAck", request, pb.MailResponse)
        if answer.code == pb.MAIL_REFUSED:
            raise errors.error_for(answer.reason, answer.message)
        return answer.removed

    async def take(
        self, address: str | None = None, *, ack_through: int | None = None, max: int = 10,
        visibility_s: float = 30.0, wait_s: float = 0.0,
    ) -> list[MailMessage]:
        """Acknowledge the inbox through ``ack_through`` and take up to ``max`` next
        messages, in one apply (default inbox: the agent's own). Each taken message is
        hidden from other takes for ``visibility_s`` and comes back unless acknowledged (at
        least once). When none waits, wait up to ``wait_s`` for one, woken by the mailbox
        cell's applies; the acknowledgement rides the first take only."""
        address = address or self._own
        deadline = time.monotonic() + wait_s
        waiter = await Waiter.mark(self._t, inbox=address) if wait_s > 0 else None
        visibility_ms = int(visibility_s * 1000) if visibility_s >= 0.001 else 1
        acknowledge = ack_through
        while True:
            request = pb.MailTakeRequest(
                address=address, max=max, visibility_ms=visibility_ms,
                idempotency_key=self._t.idempotency_key(),
            )
            if acknowledge is not None:
                request.ack_through = acknowledge
            answer = await self._t.unary("MailTake", request, pb.MailTakeResponse)
            if answer.code == pb.MAIL_REFUSED:
                raise errors.error_for(answer.reason, answer.message)
            left = deadline - time.monotonic()
            if answer.messages or waiter is None or left <= 0:
                return [_message(m) for m in answer.messages]
            acknowledge = None
            await waiter.next(left)
