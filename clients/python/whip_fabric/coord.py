"""Leases, budget counters and ledgers.

A lease is ``async with client.lease(resource, key, ttl=30, wait=10) as held:``: it takes
a slot (waiting in the cell's FIFO queue up to ``wait`` seconds), renews it in the
background at a third of its ttl, and releases it on exit. ``held.fence`` is the fencing
token to present to whatever the lease guards. When no slot came within the wait the
block raises :class:`~whip_fabric.errors.Contended` with the holders. A renewal that finds
the slot lost sets ``held.lost`` (and cancels nothing: check it, or use the fence).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from . import errors
from ._proto import whip_pb2 as pb
from .routing import resource_point
from .transport import Transport
from .waits import Waiter

__all__ = [
    "Counter",
    "CounterResult",
    "Held",
    "LeaseBlock",
    "Ledger",
    "LedgerEntry",
    "Leases",
    "LeaseOutcome",
]

DEFAULT_OWNER = "shared"
# A ledger entry's retention when none is given (the CLI's default).
RETAIN_DEFAULT_S = 90 * 24 * 3600.0
# What share of the ttl passes between two renewals.
RENEW_SHARE = 1 / 3
_RESETS = {"hourly": pb.HOURLY, "daily": pb.DAILY, "weekly": pb.WEEKLY, "monthly": pb.MONTHLY}


def _holders(answer: pb.LeaseResponse) -> tuple[errors.Holder, ...]:
    return tuple(errors.Holder(h.holder, h.fence, h.expires_at_ms) for h in answer.holders)


@dataclass(frozen=True)
class LeaseOutcome:
    """One lease answer: ``outcome`` is held, contended, waiting, renewed, released or
    not_held."""

    outcome: str
    fence: int = 0
    expires_at_ms: int = 0
    holders: tuple[errors.Holder, ...] = ()
    position: int = 0


_OUTCOMES = {
    pb.LEASE_HELD: "held",
    pb.LEASE_HELD_DEGRADED: "held",
    pb.LEASE_CONTENDED: "contended",
    pb.LEASE_WAITING: "waiting",
    pb.LEASE_RENEWED: "renewed",
    pb.LEASE_RELEASED: "released",
    pb.LEASE_NOT_HELD: "not_held",
}


def _outcome(answer: pb.LeaseResponse) -> LeaseOutcome:
    return LeaseOutcome(
        _OUTCOMES.get(answer.code, "unknown"), answer.fence, answer.expires_at_ms,
        _holders(answer), answer.position,
    )


@dataclass
class Held:
    """A held lease slot: its fence (present it to what the lease guards)."""

    resource: str
    key: str
    holder: str
    fence: int
    expires_at_ms: int
    lost: bool = False


class Leases:
    """Single calls on leases (``client.leases``); ``client.lease(...)`` is the block."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def acquire(
        self, resource: str, key: str, *, holder: str, ttl: float, slots: int = 1,
        wait: float = 0, owner: str = DEFAULT_OWNER,
    ) -> LeaseOutcome:
        """One acquire: held, contended, or waiting (queued for up to ``wait`` s)."""
        lease = pb.ResourceId(owner=owner, name=resource, key=key)
        request = pb.LeaseAcquireRequest(
            lease=lease, holder=holder, slots=slots, ttl_ms=int(ttl * 1000),
            wait_ms=int(wait * 1000), idempotency_key=self._t.idempotency_key(),
        )
        return _outcome(await self._call("LeaseAcquire", request, lease))

    async def renew(
        self, resource: str, key: str, *, holder: str, ttl: float, owner: str = DEFAULT_OWNER
    ) -> LeaseOutcome:
        """Renew the holder's slot: renewed, or not_held when it lapsed."""
        lease = pb.ResourceId(owner=owner, name=resource, key=key)
        request = pb.LeaseRenewRequest(
            lease=lease, holder=holder, ttl_ms=int(ttl * 1000),
            idempotency_key=self._t.idempotency_key(),
        )
        return _outcome(await self._call("LeaseRenew", request, lease))

    async def release(
        self, resource: str, key: str, *, holder: str, owner: str = DEFAULT_OWNER
    ) -> LeaseOutcome:
        """Give the slot back (or leave the wait queue)."""
        lease = pb.ResourceId(owner=owner, name=resource, key=key)
        request = pb.LeaseReleaseRequest(
            lease=lease, holder=holder, idempotency_key=self._t.idempotency_key()
        )
        return _outcome(await self._call("LeaseRelease", request, lease))

    async def _call(
        self, method: str,
        request: pb.LeaseAcquireRequest | pb.LeaseRenewRequest | pb.LeaseReleaseRequest,
        lease: pb.ResourceId,
    ) -> pb.LeaseResponse:
        return await self._t.unary(
            method, request, pb.LeaseResponse, point=resource_point(lease)
        )

    async def view(
        self, resource: str, key: str, owner: str = DEFAULT_OWNER
    ) -> pb.LeaseView | None:
        """The lease's holders and waiters now, or None when nobody holds or waits."""
        request = pb.LeaseListRequest(prefix=f"{owner}/{resource}", limit=0)
        answer = await self._t.unary("LeaseList", request, pb.LeaseListResponse)
        for view in answer.leases:
            if view.lease.key == key and view.lease.name == resource:
                return view
        return None

    async def holders(
        self, resource: str, key: str, owner: str = DEFAULT_OWNER
    ) -> tuple[errors.Holder, ...]:
        """Who holds the lease's slots now."""
        view = await self.view(resource, key, owner)
        if view is None:
            return ()
        return tuple(errors.Holder(h.holder, h.fence, h.expires_at_ms) for h in view.holders)

    async def waiting(
        self, resource: str, key: str, holder: str, owner: str = DEFAULT_OWNER
    ) -> bool:
        """Whether ``holder`` is queued for the lease and holds no slot of it."""
        view = await self.view(resource, key, owner)
        if view is None:
            return False
        queued = any(w.holder == holder for w in view.waiters)
        return queued and not any(h.holder == holder for h in view.holders)


class LeaseBlock:
    """``async with client.lease(...) as held``: acquire, renew in the background,
    release on exit."""

    def __init__(
        self, leases: Leases, transport: Transport, resource: str, key: str, *,
        holder: str, ttl: float, wait: float, slots: int, owner: str,
    ) -> None:
        self._leases, self._t = leases, transport
        self._args = (resource, key)
        self._holder, self._ttl, self._wait = holder, ttl, wait
        self._slots, self._owner = slots, owner
        self._held: Held | None = None
        self._renewer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Held:
        answer = await self._acquire_waiting()
        if answer.outcome != "held":
            holders = answer.holders
            if answer.outcome == "waiting":
                # The wait ran out in the queue: leave it, and say who holds the lease.
                await self._leases.release(*self._args, holder=self._holder, owner=self._owner)
                holders = await self._leases.holders(*self._args, owner=self._owner)
            raise errors.Contended(
                f"{self._args[0]}/{self._args[1]} is held by "
                + ", ".join(h.holder for h in holders),
                holders=holders,
            )
        self._held = Held(*self._args, self._holder, answer.fence, answer.expires_at_ms)
        self._renewer = asyncio.create_task(self._renew_loop(self._held))
        return self._held

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        await self._leases.release(*self._args, holder=self._holder, owner=self._owner)

    async def _acquire_waiting(self) -> LeaseOutcome:
        started = time.monotonic()
        lease = pb.ResourceId(owner=self._owner, name=self._args[0], key=self._args[1])
        waiter = await Waiter.mark(self._t, lease=lease) if self._wait > 0 else None
        while True:
            left = max(0.0, self._wait - (time.monotonic() - started))
            answer = await self._leases.acquire(
                *self._args, holder=self._holder, ttl=self._ttl, slots=self._slots,
                wait=left, owner=self._owner,
            )
            if answer.outcome != "waiting" or left <= 0 or waiter is None:
                return answer
            await self._await_turn(waiter, started)

    async def _await_turn(self, waiter: Waiter, started: float) -> None:
        """Wait, woken by the lease cell's applies, until a read shows the holder no
        longer only queued (asking again is a write, which would wake the wait itself)."""
        while True:
            left = self._wait - (time.monotonic() - started)
            if left <= 0 or not await waiter.next(left):
                return
            if not await self._leases.waiting(*self._args, self._holder, self._owner):
                return

    async def _renew_loop(self, held: Held) -> None:
        while True:
            await asyncio.sleep(self._ttl * RENEW_SHARE)
            try:
                answer = await self._leases.renew(
                    *self._args, holder=self._holder, ttl=self._ttl, owner=self._owner
                )
            except errors.Unavailable:
                continue
            if answer.outcome != "renewed":
                held.lost = True
                return
            held.expires_at_ms = answer.expires_at_ms


def new_holder(agent: str) -> str:
    """A holder name unique to one block: the agent and a random suffix."""
    return f"{agent}:{os.urandom(6).hex()}"


@dataclass(frozen=True)
class CounterResult:
    """A consume: ``ok`` False when it would pass the cap (nothing was consumed)."""

    ok: bool
    consumed: int
    remaining: int
    period: str


class Counter:
    """Budget counters with a cap per period (``client.counter``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def consume(
        self, name: str, key: str, *, amount: int, cap: int,
        reset: Literal["hourly", "daily", "weekly", "monthly"] = "daily",
        timezone: str = "UTC", owner: str = DEFAULT_OWNER,
    ) -> CounterResult:
        """Consume ``amount`` of the period's ``cap``; over the cap is ``ok=False``."""
        counter = pb.ResourceId(owner=owner, name=name, key=key)
        request = pb.CounterConsumeRequest(
            counter=counter, amount=amount, cap=cap, reset=_RESETS[reset],
            timezone=timezone, idempotency_key=self._t.idempotency_key(),
        )
        answer = await self._t.unary(
            "CounterConsume", request, pb.CounterResponse, point=resource_point(counter)
        )
        return CounterResult(
            answer.code == pb.COUNTER_OK, answer.consumed, answer.remaining, answer.period
        )


@dataclass(frozen=True)
class LedgerEntry:
    """One entry of a ledger partition."""

    partition: str
    seq: int
    entry: Any
    appended_by: str
    at_ms: int


class Ledger:
    """Append-only partitioned ledgers (``client.ledger``); entries are JSON, appended
    by the client's agent."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def append(
        self, name: str, partition: str, entry: Any, *, retain: float = RETAIN_DEFAULT_S,
        owner: str = DEFAULT_OWNER,
    ) -> int:
        """Append ``entry`` (JSON-encoded) to the partition; its sequence number.
        ``retain`` (seconds, default 90 days): the fabric drops the entry after that long."""
        ledger = pb.ResourceId(owner=owner, name=name, key=partition)
        request = pb.LedgerAppendRequest(
            ledger=ledger, entry=json.dumps(entry).encode(),
            appended_by=self._t.settings.agent,
            retain_ms=int(retain * 1000), idempotency_key=self._t.idempotency_key(),
        )
        answer = await self._t.unary(
            "LedgerAppend", request, pb.LedgerAppendResponse, point=resource_point(ledger)
        )
        return answer.seq

    async def list(
        self, name: str, *, partition: str | None = None, after_seq: int = 0,
        limit: int = 0, owner: str = DEFAULT_OWNER,
    ) -> list[LedgerEntry]:
        """Entries of the ledger (one partition, or all), in sequence order."""
        request = pb.LedgerListRequest(
            owner=owner, name=name, after_seq=after_seq, limit=limit
        )
        if partition is not None:
            request.partition = partition
        answer = await self._t.unary("LedgerList", request, pb.LedgerListResponse)
        return [
            LedgerEntry(e.ledger.key, e.seq, _json(e.entry), e.appended_by, e.at_ms)
            for e in answer.entries
        ]


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw
