"""CAS keys: get, put, cas, delete, list, transactions and watches.

A key's *version* is the revision of its last write (0: absent). ``cas`` writes only when
the key's version is the one expected; a mismatch is a :class:`CasResult` with
``ok=False`` and the current version, not an exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal

from . import errors
from ._proto import whip_pb2 as pb
from .routing import keys_point, kv_point
from .transport import Transport

__all__ = [
    "CasResult",
    "Compare",
    "Delete",
    "Get",
    "Kv",
    "KvEntry",
    "Put",
    "TxnResult",
    "WatchEvent",
]

# A page of a list (the server caps its answers too).
LIST_PAGE = 500
WATCH_RECONNECT_FOR_S = 30.0
WATCH_BACKOFF_MAX_S = 0.5
WATCH_SILENCE_S = 5.0


class Compacted(errors.WhipError):
    """A watch asked for revisions the cell no longer keeps: read afresh, then watch."""

    code = "compacted"

    def __init__(self, detail: str = "", *, cell: int = 0, oldest: int = 0) -> None:
        super().__init__(detail)
        self.cell = cell
        self.oldest = oldest


@dataclass(frozen=True)
class KvEntry:
    """A key, its value and its version."""

    key: bytes
    value: bytes
    version: int


@dataclass(frozen=True)
class CasResult:
    """The answer of a conditional write: ``ok`` and the key's version now.

    ``version`` is the new version when ``ok`` (for a delete: the version it had);
    ``current_version`` the key's version when the expectation failed (0: absent).
    """

    ok: bool
    version: int = 0
    current_version: int = 0

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class WatchEvent:
    """One change: ``kind`` is ``put`` or ``delete``; ``revision`` the change's fence."""

    kind: Literal["put", "delete"]
    key: bytes
    value: bytes
    revision: int
    version: int
    cell: int


_OPS = {"==": 0, "!=": 1, "<": 2, ">": 3}


@dataclass(frozen=True)
class Compare:
    """A transaction compare: on the key's ``version`` (0: absent) or its ``value``."""

    key: bytes
    op: Literal["==", "!=", "<", ">"] = "=="
    version: int | None = None
    value: bytes | None = None

    def proto(self) -> pb.KvTxnCompare:
        compare = pb.KvTxnCompare(key=self.key, op=_OPS[self.op])  # type: ignore[arg-type]
        if self.value is not None:
            compare.value = self.value
        else:
            compare.version = self.version or 0
        return compare


@dataclass(frozen=True)
class Put:
    """A transaction put."""

    key: bytes
    value: bytes


@dataclass(frozen=True)
class Delete:
    """A transaction delete."""

    key: bytes


@dataclass(frozen=True)
class Get:
    """A transaction read."""

    key: bytes


TxnOp = Put | Delete | Get


@dataclass(frozen=True)
class TxnResult:
    """Which branch ran, and one answer per operation of it: a put's new version, a
    delete's old version, a get's :class:`KvEntry` (None: absent)."""

    succeeded: bool
    revision: int
    responses: tuple[int | KvEntry | None, ...]


def _op(op: TxnOp) -> pb.KvTxnOp:
    if isinstance(op, Put):
        return pb.KvTxnOp(put=pb.KvPair(key=op.key, value=op.value))
    if isinstance(op, Delete):
        return pb.KvTxnOp(delete=op.key)
    return pb.KvTxnOp(get=op.key)


def _op_key(op: TxnOp) -> bytes:
    return op.key


def _answer(key: bytes, result: pb.KvTxnOpResult) -> int | KvEntry | None:
    which = result.WhichOneof("result")
    if which == "put_version":
        return result.put_version
    if which == "delete_version":
        return result.delete_version
    if result.get.found:
        return KvEntry(key, result.get.value, result.get.version)
    return None


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


class Kv:
    """The CAS keys of a cell or fabric (``client.kv``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def get(self, key: bytes | str) -> KvEntry | None:
        """The key's value and version, or None when it is absent."""
        k = _bytes(key)
        answer = await self._t.unary("KvGet", pb.KvGetRequest(key=k), pb.KvGetResponse)
        return KvEntry(k, answer.value, answer.version) if answer.found else None

    async def put(
        self, key: bytes | str, value: bytes, *, ttl: float | None = None
    ) -> int:
        """Write the key unconditionally; its new version. ``ttl`` (seconds): the key
        has its own deadline and is deleted past it unless kept alive."""
        k = _bytes(key)
        request = pb.KvPutRequest(
            key=k, value=value, idempotency_key=self._t.idempotency_key(),
            ttl_ms=_ms(ttl),
        )
        answer = await self._write("KvPut", request, kv_point(k))
        return answer.version

    async def cas(
        self, key: bytes | str, value: bytes, *, expect: int, ttl: float | None = None
    ) -> CasResult:
        """Write only when the key's version is ``expect`` (0: the key must be absent)."""
        k = _bytes(key)
        request = pb.KvPutRequest(
            key=k, value=value, expect_version=expect,
            idempotency_key=self._t.idempotency_key(), ttl_ms=_ms(ttl),
        )
        return _cas(await self._write("KvPut", request, kv_point(k)))

    async def delete(self, key: bytes | str, *, expect: int | None = None) -> CasResult:
        """Delete the key (only at version ``expect`` when given)."""
        k = _bytes(key)
        request = pb.KvDeleteRequest(key=k, idempotency_key=self._t.idempotency_key())
        if expect is not None:
            request.expect_version = expect
        return _cas(await self._write("KvDelete", request, kv_point(k)))

    async def keepalive(self, key: bytes | str, *, ttl: float) -> int:
        """Move the key's own deadline to now + ``ttl``; the deadline (ms since the epoch)."""
        k = _bytes(key)
        request = pb.KvKeepaliveRequest(
            key=k, ttl_ms=_ms(ttl), idempotency_key=self._t.idempotency_key()
        )
        return (await self._write("KvKeepalive", request, kv_point(k))).expires_at_ms

    async def _write(
        self, method: str, request: pb.KvPutRequest | pb.KvDeleteRequest
        | pb.KvKeepaliveRequest, at: int,
    ) -> pb.KvWriteResponse:
        answer = await self._t.unary(method, request, pb.KvWriteResponse, point=at)
        if answer.code == pb.KV_REFUSED:
            raise errors.error_for(answer.refusal, answer.message)
        return answer

    async def list(
        self, prefix: bytes | str, *, limit: int | None = None, after: bytes | None = None
    ) -> list[KvEntry]:
        """Keys under ``prefix`` in key order (after ``after``), up to ``limit``."""
        found: list[KvEntry] = []
        cursor = after or b""
        while limit is None or len(found) < limit:
            page = LIST_PAGE if limit is None else min(LIST_PAGE, limit - len(found))
            request = pb.KvRangeRequest(prefix=_bytes(prefix), after_key=cursor, limit=page)
            answer = await self._t.unary("KvRange", request, pb.KvRangeResponse)
            found.extend(KvEntry(e.key, e.value, e.version) for e in answer.entries)
            if not answer.resume_after:
                break
            cursor = answer.resume_after
        return found

    async def txn(
        self,
        compare: Sequence[Compare] = (),
        success: Sequence[TxnOp] = (),
        failure: Sequence[TxnOp] = (),
    ) -> TxnResult:
        """One atomic transaction: when every compare holds ``success`` runs, else
        ``failure``. In a fabric its keys must share one ``{tag}``."""
        request = pb.KvTxnIfRequest(
            compares=[c.proto() for c in compare],
            success=[_op(o) for o in success],
            failure=[_op(o) for o in failure],
            idempotency_key=self._t.idempotency_key(),
        )
        keys = [c.key for c in compare] + [_op_key(o) for o in (*success, *failure)]
        answer = await self._t.unary(
            "KvTxnIf", request, pb.KvTxnIfResponse, point=keys_point(keys)
        )
        ran = success if answer.succeeded else failure
        responses = tuple(
            _answer(_op_key(op), r) for op, r in zip(ran, answer.responses, strict=False)
        )
        return TxnResult(answer.succeeded, answer.fence, responses)

    def watch(
        self, prefix: bytes | str, *, from_revision: int | None = None
    ) -> AsyncIterator[WatchEvent]:
        """Every change under ``prefix`` from ``from_revision`` (None: from now), as an
        async iterator riding the ``Watch`` stream; it reopens on another member after a
        failure without losing or repeating an event. In a fabric every data cell is
        followed, each with its own cursor (revisions are per cell)."""
        return _Watch(self._t, _bytes(prefix), from_revision or 0).events()


def _ms(seconds: float | None) -> int:
    return 0 if seconds is None else max(0, int(seconds * 1000))


def _cas(answer: pb.KvWriteResponse) -> CasResult:
    if answer.code == pb.KV_VERSION_MISMATCH:
        return CasResult(False, 0, answer.current_version)
    return CasResult(True, answer.version, answer.version)


class _Watch:
    """Followers of one prefix, one per cell, feeding one queue."""

    def __init__(self, transport: Transport, prefix: bytes, start: int) -> None:
        self._t = transport
        self._prefix = prefix
        self._start = start
        self._queue: asyncio.Queue[WatchEvent | BaseException] = asyncio.Queue(maxsize=1024)

    async def _cells(self) -> list[int]:
        routes = await self._t.unary("Routes", pb.RoutesRequest(), pb.RoutesResponse)
        # Every data cell, with ranges or not: a range may move into an empty cell later.
        cells = sorted({c.cell for c in routes.cells} | {r.cell for r in routes.ranges})
        return cells or [0]

    async def events(self) -> AsyncIterator[WatchEvent]:
        tasks = [
            asyncio.create_task(self._follow(cell)) for cell in await self._cells()
        ]
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in tasks:
                task.cancel()

    async def _follow(self, cell: int) -> None:
        request = pb.WatchRequest(
            key=self._prefix, prefix=True, from_revision=self._start, cell=cell
        )
        try:
            await self._follow_loop(request)
        except asyncio.CancelledError:
            raise
        except BaseException as err:
            await self._queue.put(err)

    async def _follow_loop(self, request: pb.WatchRequest) -> None:
        since_answer = time.monotonic()
        backoff = 0.01
        while True:
            try:
                answered = await self._drain(request)
            except errors.Unavailable:
                answered = False
            if answered:
                since_answer, backoff = time.monotonic(), 0.01
                continue
            if time.monotonic() - since_answer >= WATCH_RECONNECT_FOR_S:
                raise errors.Unavailable("no member served the watch in time")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, WATCH_BACKOFF_MAX_S)

    async def _drain(self, request: pb.WatchRequest) -> bool:
        answered = False
        stream = self._t.stream("Watch", request, pb.WatchResponse)
        while True:
            try:
                # A live stream beats every second: silence means the member is gone
                # or cut off, so the next try opens on another node.
                answer = await asyncio.wait_for(anext(stream), WATCH_SILENCE_S)
            except StopAsyncIteration:
                return answered
            except asyncio.TimeoutError:
                await stream.aclose()
                self._t.rotate()
                return answered
            if answer.compacted_below:
                raise Compacted(
                    f"events below revision {answer.compacted_below} of cell "
                    f"{answer.cell} are gone",
                    cell=answer.cell, oldest=answer.compacted_below,
                )
            answered = True
            request.from_revision = max(request.from_revision, answer.next_from)
            for e in answer.events:
                kind: Literal["put", "delete"] = "put" if e.kind == pb.WatchEvent.PUT else "delete"
                await self._queue.put(
                    WatchEvent(kind, e.key, e.value, e.revision, e.version, answer.cell)
                )
            if answer.moved:
                await stream.aclose()
                return answered
