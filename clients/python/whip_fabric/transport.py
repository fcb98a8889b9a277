"""Calls to a cell or fabric: TLS channels, the agent's token, retries and routing.

What is retried, and how:

- A call that found no leader (``UNAVAILABLE``), ran out of time (``DEADLINE_EXCEEDED``)
  or lost its connection is tried again on the next member, with short capped backoff,
  for at most ``retry_for`` seconds. A ``NotLeader`` answer naming the leader sends the
  next try straight there.
- Every write carries an idempotency key, made once before its first try; every retry
  sends the same request, so a try that applied without answering is answered from its
  record by the next one, never applied twice.
- In a fabric, plain keyed writes (KV, leases, counters, ledgers) go straight to the node
  hosting the leader of the cell owning the key (:mod:`whip_fabric.routing`), naming the
  cell and epoch; after ``NotLeader``, ``WrongRange`` or an unreachable node the table is
  corrected, and after ``DIRECT_ATTEMPTS_MAX`` tries the write goes through any member,
  which forwards it.
- Refusals (``not_member``, ``reserved``, a bad argument, ...) are never retried: they
  raise their :mod:`whip_fabric.errors` class at once.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncGenerator
from typing import Any, Protocol, TypeVar, cast

import grpc
import grpc.aio

from . import errors
from ._proto import whip_pb2 as pb
from .config import Settings
from .routing import REFRESH_S, UNREACHABLE_S, Pick, RangeTable

__all__ = ["Transport"]

# The name every node certificate carries (cell/src/tls.rs, NODE_NAME).
NODE_NAME = "node.whip.internal"
SERVICE = "/whip.v1.Cell/"
MESSAGE_BYTES_MAX = 64 * 1024 * 1024
# One attempt's bound before the call moves on (the Rust client's CLIENT_ATTEMPT_TIMEOUT_MS).
ATTEMPT_TIMEOUT_S = 3.0
RETRY_FOR_S = 10.0
BACKOFF_MIN_S = 0.01
BACKOFF_MAX_S = 0.1
DIRECT_ATTEMPTS_MAX = 3
DETAILS_KEY = "grpc-status-details-bin"
RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
    }
)


class Message(Protocol):
    """A protobuf message (what the generated classes are)."""

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...


R = TypeVar("R")


class _Failure(Exception):
    """One failed attempt: its status, and the typed detail it carried."""

    def __init__(self, code: grpc.StatusCode, message: str, detail: pb.ErrorDetail | None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail

    def leader_hint(self) -> str | None:
        if self.detail is not None and self.detail.WhichOneof("kind") == "not_leader":
            return self.detail.not_leader.leader_addr or None
        return None

    def wrong_range(self) -> bool:
        return self.detail is not None and self.detail.WhichOneof("kind") == "wrong_range"

    def refusal(self) -> str | None:
        """The stable refusal code the server put in the status details, if any."""
        if self.detail is not None and self.detail.WhichOneof("kind") == "refused":
            return self.detail.refused.code or None
        return None

    def retryable(self) -> bool:
        """Unavailable, or sent to the wrong member or range; a refusal is final."""
        routed = self.detail is not None and self.detail.WhichOneof("kind") != "refused"
        return self.code in RETRYABLE or routed

    def error(self) -> errors.WhipError:
        refusal = self.refusal()
        if refusal is not None:
            return errors.error_for(refusal, self.message)
        if self.code in RETRYABLE:
            return errors.Unavailable(self.message or self.code.name.lower())
        return errors.from_status(self.code, self.message)


def _detail_of(err: grpc.aio.AioRpcError) -> pb.ErrorDetail | None:
    pairs: Any = err.trailing_metadata() or ()
    for key, value in pairs:
        if key == DETAILS_KEY and isinstance(value, bytes) and value:
            detail = pb.ErrorDetail()
            try:
                detail.ParseFromString(value)
            except Exception:
                return None
            return detail if detail.WhichOneof("kind") else None
    return None


def _failure(err: grpc.aio.AioRpcError) -> _Failure:
    return _Failure(err.code(), err.details() or "", _detail_of(err))


class Transport:
    """The channels, identity and retry loop shared by every API of one client."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.members: list[str] = list(settings.cells)
        self._next = 0
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._client_id = int.from_bytes(os.urandom(8), "big")
        self._seq = itertools.count()
        self._metadata = (("x-whip-agent", settings.agent), ("x-whip-token", settings.token))
        self._table: RangeTable | None = None
        self._single = False
        self._learning = asyncio.Lock()
        self._quiet_until = 0.0
        self._reload = False
        self._unreachable: dict[str, float] = {}
        self.retry_for = RETRY_FOR_S

    # ------------------------------------------------------------------ channels

    def channel(self, addr: str) -> grpc.aio.Channel:
        """The channel to ``addr``, opened on first use."""
        found = self._channels.get(addr)
        if found is None:
            found = self._open(addr)
            self._channels[addr] = found
        return found

    def _open(self, addr: str) -> grpc.aio.Channel:
        options: list[tuple[str, int | str]] = [
            ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
            ("grpc.max_send_message_length", MESSAGE_BYTES_MAX),
            ("grpc.enable_retries", 0),
        ]
        if self.settings.insecure:
            return grpc.aio.insecure_channel(addr, options=options)
        credentials = grpc.ssl_channel_credentials(root_certificates=self.settings.ca_pem)
        options.append(("grpc.ssl_target_name_override", NODE_NAME))
        return grpc.aio.secure_channel(addr, credentials, options=options)

    async def close(self) -> None:
        """Close every channel."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close(None)

    def idempotency_key(self) -> str:
        """A fresh idempotency key: this client's random id and a sequence number."""
        return f"py{self._client_id:016x}-{next(self._seq)}"

    # ------------------------------------------------------------------ one attempt

    async def _attempt(
        self,
        addr: str,
        method: str,
        request: Message,
        response: type[R],
        timeout: float,
        route: Pick | None = None,
    ) -> R:
        callable_ = self.channel(addr).unary_unary(
            SERVICE + method,
            request_serializer=_serialize,
            response_deserializer=getattr(response, "FromString"),
        )
        metadata = self._metadata + ((route.header(),) if route is not None else ())
        try:
            answer = await callable_(request, timeout=timeout, metadata=metadata)
        except grpc.aio.AioRpcError as err:
            raise _failure(err) from None
        return cast(R, answer)

    # ------------------------------------------------------------------ unary calls

    async def unary(
        self,
        method: str,
        request: Message,
        response: type[R],
        *,
        point: int | None = None,
        timeout: float = ATTEMPT_TIMEOUT_S,
    ) -> R:
        """Call ``method``: routed by ``point`` when given (a fabric), else any member."""
        if point is not None and not self._single:
            answered, value = await self._direct(method, request, response, point, timeout)
            if answered:
                return cast(R, value)
        return await self._any_member(method, request, response, timeout)

    async def _any_member(
        self, method: str, request: Message, response: type[R], timeout: float
    ) -> R:
        deadline = time.monotonic() + self.retry_for
        backoff = BACKOFF_MIN_S
        followed_hint = False
        while True:
            addr = self.members[self._next % len(self.members)]
            try:
                return await self._attempt(addr, method, request, response, timeout)
            except _Failure as failure:
                if not failure.retryable() or time.monotonic() >= deadline:
                    raise _named(failure, addr) from None
                hint = failure.leader_hint()
                if hint is not None and hint != addr:
                    self._follow(hint)
                    if followed_hint:
                        await asyncio.sleep(backoff)
                    followed_hint = True
                else:
                    self._next += 1
                    await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _follow(self, leader: str) -> None:
        if leader not in self.members:
            self.members.append(leader)
        self._next = self.members.index(leader)

    async def _direct(
        self, method: str, request: Message, response: type[R], at: int, timeout: float
    ) -> tuple[bool, R | None]:
        backoff = BACKOFF_MIN_S
        for _ in range(DIRECT_ATTEMPTS_MAX):
            pick = await self._pick(at)
            if pick is None:
                break
            try:
                value = await self._attempt(pick.addr, method, request, response, timeout, pick)
                return True, value
            except _Failure as failure:
                if not failure.retryable():
                    raise failure.error() from None
                self._failed(pick, failure)
                if failure.leader_hint() is None and not failure.wrong_range():
                    await asyncio.sleep(backoff)
                    backoff *= 2
        return False, None

    # ------------------------------------------------------------------ the range map

    async def _pick(self, at: int) -> Pick | None:
        table = await self._learn()
        if table is None:
            return None
        owner = table.locate(at)
        leader = table.leaders.get(owner.cell)
        now = time.monotonic()
        if leader is not None and self._unreachable.get(leader, 0.0) <= now:
            return Pick(leader, owner.cell, owner.epoch)
        if now - table.learned >= REFRESH_S:
            self._table = None
        return None

    async def _learn(self) -> RangeTable | None:
        if self._single:
            return None
        if self._table is not None:
            return self._table
        async with self._learning:
            if self._table is not None or time.monotonic() < self._quiet_until:
                return self._table
            request = pb.RoutesRequest(reload=self._reload)
            self._reload = False
            try:
                answer = await self._any_member(
                    "Routes", request, pb.RoutesResponse, ATTEMPT_TIMEOUT_S
                )
            except errors.WhipError:
                self._quiet_until = time.monotonic() + REFRESH_S
                return None
            self._table = RangeTable.of(answer)
            self._single = self._table is None and not answer.ranges
            return self._table

    def _failed(self, pick: Pick, failure: _Failure) -> None:
        hint = failure.leader_hint()
        if hint is not None and self._table is not None:
            self._table.leaders[pick.cell] = hint
            return
        if failure.wrong_range():
            self._reload = True
        elif failure.code in RETRYABLE:
            self._unreachable[pick.addr] = time.monotonic() + UNREACHABLE_S
        self._table = None

    # ------------------------------------------------------------------ streams

    def rotate(self) -> None:
        """Aim the next call at the next member (a stream went silent on this one)."""
        self._next += 1

    async def stream(
        self, method: str, request: Message, response: type[R]
    ) -> AsyncGenerator[R, None]:
        """A server stream of ``method`` from the current member (no retry: the caller
        resumes from its own cursor)."""
        addr = self.members[self._next % len(self.members)]
        callable_ = self.channel(addr).unary_stream(
            SERVICE + method,
            request_serializer=_serialize,
            response_deserializer=getattr(response, "FromString"),
        )
        call = callable_(request, metadata=self._metadata)
        try:
            async for item in call:
                yield cast(R, item)
        except grpc.aio.AioRpcError as err:
            failure = _failure(err)
            if failure.retryable():
                self._next += 1
            raise _named(failure, addr) from None
        finally:
            call.cancel()


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _named(failure: _Failure, addr: str) -> errors.WhipError:
    """The error of a call that gave up at ``addr``; an unreachable member is named."""
    err = failure.error()
    if isinstance(err, errors.Unavailable):
        return errors.Unavailable(f"{addr}: {err.detail}")
    return err
