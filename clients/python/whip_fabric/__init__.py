"""whip-fabric: the Python client of whip fabric.

    import whip_fabric

    async with await whip_fabric.connect(["127.0.0.1:7001"]) as client:
        await client.kv.put("greeting", b"hello")
        async with client.lease("deploy", "prod", ttl=30, wait=10) as held:
            print("fence", held.fence)

Async-first (``grpc.aio``); :mod:`whip_fabric.sync` wraps the same API for plain code.
Refusals raise :mod:`whip_fabric.errors`; business outcomes are return values.
"""

from __future__ import annotations

from . import errors
from .boards import Board, BoardStats, Task
from .client import Client, connect
from .coord import CounterResult, Held, LeaseOutcome, LedgerEntry
from .kv import CasResult, Compare, Delete, Get, KvEntry, Put, TxnResult, WatchEvent
from .mail import MailMessage
from .teams import WorkEntry

__version__ = "0.1.0"

__all__ = [
    "Board",
    "BoardStats",
    "CasResult",
    "Client",
    "Compare",
    "CounterResult",
    "Delete",
    "Get",
    "Held",
    "KvEntry",
    "LeaseOutcome",
    "LedgerEntry",
    "MailMessage",
    "Put",
    "Task",
    "TxnResult",
    "WatchEvent",
    "WorkEntry",
    "__version__",
    "connect",
    "errors",
]
