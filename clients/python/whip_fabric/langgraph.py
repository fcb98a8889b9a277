"""LangGraph on the fabric: a checkpointer (:class:`WhipCheckpointSaver`) whose threads are
never forked, and a cross-thread memory store (:class:`WhipStore`).

How a thread stays linear. Each thread has a *head*, a CAS key holding the latest
checkpoint id of each namespace. A saver instance becomes the thread's writer the first
time it writes to it: it replaces the head by CAS, on the condition that the head's latest
checkpoint is the one its write builds on (the parent of a ``put``, the checkpoint of a
``put_writes``), and keeps the head's new version as its *fence*. Every later write of
that saver is a CAS expecting its fence (and moves the fence on). When another saver, in
another process, writes to the thread it takes over the same way; the first saver's next
write then finds the head moved and raises :class:`~whip_fabric.errors.StaleWriter`,
which LangGraph lets out of ``invoke``. A takeover built on an old checkpoint (the
thread moved on since it was read) raises ``StaleWriter`` too: of two processes racing
from one checkpoint exactly one continues.

Storage. All keys of a thread share the ``{tag}`` of its id, so they live on one cell of a
fabric. Checkpoints and pending writes are written after the head (a refused writer
writes nothing) as keys with their own deadline, ``retention`` seconds, renewed by nothing:
old checkpoints are pruned by the fabric, not by the saver. The head's deadline moves on
with every write.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from . import errors
from .client import Client, connect
from .sync import Portal, SyncClient

__all__ = ["WhipCheckpointSaver", "WhipStore"]

T = TypeVar("T")
# Checkpoints and writes are kept this long unless told otherwise (seconds): the longest
# deadline a key may have (board's KV_TTL_MS_MAX, 7 days).
RETENTION_DEFAULT_S = 7 * 24 * 3600.0
# Rows read per list of a thread (a bound on one thread's history that a list scans).
SCAN_ROWS_MAX = 100_000


def _escape(text: str) -> str:
    """``text`` safe inside a key segment and a ``{tag}``."""
    for char, code in (("%", "%25"), ("/", "%2F"), ("{", "%7B"), ("}", "%7D")):
        text = text.replace(char, code)
    return text


def _unescape(text: str) -> str:
    for char, code in (("/", "%2F"), ("{", "%7B"), ("}", "%7D"), ("%", "%25")):
        text = text.replace(code, char)
    return text


def _pack(typed: tuple[str, bytes]) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode()]


def _unpack(packed: list[str]) -> tuple[str, bytes]:
    return (packed[0], base64.b64decode(packed[1]))


class _Runner:
    """Runs the saver's async core from sync callers: on the portal of a sync client, or
    on the loop of an async client from another thread."""

    def __init__(self, client: Client, portal: Portal | None) -> None:
        self.client = client
        self.portal = portal
        self.loop: asyncio.AbstractEventLoop | None = portal.loop if portal else None

    def note_loop(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()

    def run(self, awaitable: Awaitable[T]) -> T:
        if self.portal is not None:
            return self.portal.call(awaitable)
        if self.loop is None or _on_loop(self.loop):
            raise RuntimeError(
                "a sync call of a saver made with an async client must come from another "
                "thread than the client's loop: use the saver's async methods, or pass a "
                "whip_fabric.sync client"
            )
        return asyncio.run_coroutine_threadsafe(_wrap(awaitable), self.loop).result()

    async def call(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` where the client lives (the portal's loop, for a sync one)."""
        if self.portal is not None and not _on_loop(self.portal.loop):
            future = asyncio.run_coroutine_threadsafe(_wrap(awaitable), self.portal.loop)
            return await asyncio.wrap_future(future)
        self.note_loop()
        return await awaitable


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def _wrap(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _runner(client_or_cells: Client | SyncClient | list[str] | None) -> _Runner:
    if isinstance(client_or_cells, Client):
        return _Runner(client_or_cells, None)
    if isinstance(client_or_cells, SyncClient):
        return _Runner(client_or_cells.client, client_or_cells.portal)
    portal = Portal()
    client = portal.call(connect(client_or_cells))
    return _Runner(client, portal)


class WhipCheckpointSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer on whip fabric (``graph.compile(checkpointer=saver)``).

    ``client_or_cells``: an async :class:`~whip_fabric.Client` (use the async graph
    methods, or sync ones from another thread), a :mod:`whip_fabric.sync` client, or
    cell addresses (None: the CLI's defaults) for a sync client of its own.
    """

    def __init__(
        self,
        client_or_cells: Client | SyncClient | list[str] | None = None,
        *,
        prefix: str = "langgraph",
        retention: float = RETENTION_DEFAULT_S,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self._runner = _runner(client_or_cells)
        self.prefix = prefix
        self.retention = retention
        self.saver_id = os.urandom(8).hex()
        # Thread -> the head version this saver wrote last (its fence), and the head then.
        self._fences: dict[str, int] = {}
        self._heads: dict[str, dict[str, str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Threads this saver lost: every write is refused until it reads the latest
        # checkpoint again (as each invoke starts), so a run that lost its thread cannot
        # take it back halfway.
        self._lost: set[str] = set()
        self._guard = threading.Lock()

    @property
    def _kv(self) -> Any:
        return self._runner.client.kv

    # ------------------------------------------------------------------ keys

    def _thread_root(self, thread: str) -> str:
        return f"{self.prefix}/{{{_escape(thread)}}}/"

    def _head_key(self, thread: str) -> str:
        return self._thread_root(thread) + "head"

    def _checkpoint_key(self, thread: str, ns: str, checkpoint_id: str) -> str:
        return f"{self._thread_root(thread)}cp/{_escape(ns)}/{checkpoint_id}"

    def _writes_prefix(self, thread: str, ns: str, checkpoint_id: str) -> str:
        return f"{self._thread_root(thread)}w/{_escape(ns)}/{checkpoint_id}/"

    def _lock(self, thread: str) -> asyncio.Lock:
        with self._guard:
            return self._locks.setdefault(thread, asyncio.Lock())

    # ------------------------------------------------------------------ the head

    async def _advance_head(self, thread: str, ns: str, base: str | None, latest: str) -> None:
        """Move the head: the fenced CAS of the writer, or a takeover built on ``base``."""
        async with self._lock(thread):
            if thread in self._lost:
                raise errors.StaleWriter(
                    f"thread {thread!r} was taken over by another saver during this run"
                )
            try:
                await self._write(thread, ns, base, latest)
            except errors.StaleWriter:
                self._lost.add(thread)
                raise

    async def _write(self, thread: str, ns: str, base: str | None, latest: str) -> None:
        fence = self._fences.get(thread)
        if fence is not None:
            await self._fenced_write(thread, ns, latest, fence)
        else:
            await self._take_over(thread, ns, base, latest)

    async def _fenced_write(self, thread: str, ns: str, latest: str, fence: int) -> None:
        head = dict(self._heads.get(thread, {}), **{ns: latest})
        answer = await self._write_head(thread, head, fence)
        if not answer.ok:
            self._fences.pop(thread, None)
            raise errors.StaleWriter(
                f"thread {thread!r} was taken over by another saver (head version "
                f"{answer.current_version}, this saver's fence {fence})"
            )
        self._fences[thread], self._heads[thread] = answer.version, head

    async def _take_over(self, thread: str, ns: str, base: str | None, latest: str) -> None:
        entry = await self._kv.get(self._head_key(thread))
        found: dict[str, str] = json.loads(entry.value)["latest"] if entry else {}
        if found.get(ns) is not None and found.get(ns) != base:
            raise errors.StaleWriter(
                f"thread {thread!r} moved on to checkpoint {found[ns]} since this saver "
                f"read {base}: reload it before writing"
            )
        head = dict(found, **{ns: latest})
        answer = await self._write_head(thread, head, entry.version if entry else 0)
        if not answer.ok:
            raise errors.StaleWriter(f"thread {thread!r} was taken over meanwhile")
        self._fences[thread], self._heads[thread] = answer.version, head

    async def _write_head(self, thread: str, head: dict[str, str], expect: int) -> Any:
        value = json.dumps({"writer": self.saver_id, "latest": head}).encode()
        return await self._kv.cas(
            self._head_key(thread), value, expect=expect, ttl=self.retention
        )

    # ------------------------------------------------------------------ writes

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._runner.call(self._put(config, checkpoint, metadata))

    async def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread, ns = str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))
        parent = configurable.get("checkpoint_id")
        await self._advance_head(thread, ns, parent, checkpoint["id"])
        blob = {
            "v": 1,
            "parent": parent,
            "checkpoint": _pack(self.serde.dumps_typed(checkpoint)),
            "metadata": _pack(self.serde.dumps_typed(get_checkpoint_metadata(config, metadata))),
        }
        key = self._checkpoint_key(thread, ns, checkpoint["id"])
        await self._kv.put(key, json.dumps(blob).encode(), ttl=self.retention)
        return {"configurable": {
            "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"],
        }}

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
        task_path: str = "",
    ) -> None:
        await self._runner.call(self._put_writes(config, writes, task_id, task_path))

    async def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
        task_path: str,
    ) -> None:
        configurable = config["configurable"]
        thread, ns = str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = str(configurable["checkpoint_id"])
        await self._advance_head(thread, ns, checkpoint_id, checkpoint_id)
        prefix = self._writes_prefix(thread, ns, checkpoint_id)
        for idx, (channel, value) in enumerate(writes):
            slot = WRITES_IDX_MAP.get(channel, idx)
            row = {"task_id": task_id, "task_path": task_path, "idx": slot,
                   "channel": channel, "value": _pack(self.serde.dumps_typed(value))}
            key = f"{prefix}{_escape(task_id)}/{slot}"
            body = json.dumps(row).encode()
            if slot >= 0:
                # A regular write is kept as first written (a retry repeats it).
                await self._kv.cas(key, body, expect=0, ttl=self.retention)
            else:
                await self._kv.put(key, body, ttl=self.retention)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._runner.call(self._delete_thread(str(thread_id)))

    async def _delete_thread(self, thread: str) -> None:
        async with self._lock(thread):
            for entry in await self._kv.list(self._thread_root(thread)):
                await self._kv.delete(entry.key)
            self._fences.pop(thread, None)
            self._heads.pop(thread, None)

    # ------------------------------------------------------------------ reads

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._runner.call(self._get_tuple(config))

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread, ns = str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            entry = await self._kv.get(self._head_key(thread))
            latest = json.loads(entry.value)["latest"] if entry else {}
            checkpoint_id = latest.get(ns)
            # Reading the latest checkpoint starts a run: it may take the thread over.
            self._lost.discard(thread)
        if checkpoint_id is None:
            return None
        found = await self._kv.get(self._checkpoint_key(thread, ns, checkpoint_id))
        if found is None:
            return None
        return await self._tuple(thread, ns, checkpoint_id, json.loads(found.value))

    async def _tuple(
        self, thread: str, ns: str, checkpoint_id: str, blob: dict[str, Any]
    ) -> CheckpointTuple:
        rows = await self._kv.list(self._writes_prefix(thread, ns, checkpoint_id))
        writes = sorted(
            (json.loads(r.value) for r in rows),
            key=lambda w: (w["task_path"], w["task_id"], w["idx"]),
        )
        parent = blob.get("parent")
        return CheckpointTuple(
            config={"configurable": {
                "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id,
            }},
            checkpoint=self.serde.loads_typed(_unpack(blob["checkpoint"])),
            metadata=self.serde.loads_typed(_unpack(blob["metadata"])),
            parent_config={"configurable": {
                "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent,
            }} if parent else None,
            pending_writes=[
                (w["task_id"], w["channel"], self.serde.loads_typed(_unpack(w["value"])))
                for w in writes
            ],
        )

    async def alist(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._runner.call(self._list(config, filter, before, limit)):
            yield found

    async def _list(
        self, config: RunnableConfig | None, filter: dict[str, Any] | None,
        before: RunnableConfig | None, limit: int | None,
    ) -> list[CheckpointTuple]:
        rows = await self._checkpoint_rows(config)
        before_id = get_checkpoint_id(before) if before else None
        found: list[CheckpointTuple] = []
        for thread, ns, checkpoint_id, blob in sorted(rows, key=lambda r: r[2], reverse=True):
            if before_id is not None and checkpoint_id >= before_id:
                continue
            item = await self._tuple(thread, ns, checkpoint_id, blob)
            if filter and any(item.metadata.get(k) != v for k, v in filter.items()):
                continue
            found.append(item)
            if limit is not None and len(found) >= limit:
                break
        return found

    async def _checkpoint_rows(
        self, config: RunnableConfig | None
    ) -> list[tuple[str, str, str, dict[str, Any]]]:
        configurable = (config or {}).get("configurable", {})
        thread = configurable.get("thread_id")
        scan = self._thread_root(str(thread)) if thread is not None else f"{self.prefix}/"
        ns_wanted = configurable.get("checkpoint_ns")
        id_wanted = configurable.get("checkpoint_id")
        rows = []
        for entry in await self._kv.list(scan, limit=SCAN_ROWS_MAX):
            parsed = self._parse_checkpoint_key(entry.key.decode())
            if parsed is None:
                continue
            t, ns, checkpoint_id = parsed
            if ns_wanted is not None and ns != ns_wanted:
                continue
            if id_wanted is not None and checkpoint_id != id_wanted:
                continue
            rows.append((t, ns, checkpoint_id, json.loads(entry.value)))
        return rows

    def _parse_checkpoint_key(self, key: str) -> tuple[str, str, str] | None:
        rest = key[len(self.prefix) + 1 :]
        if not rest.startswith("{") or "}/cp/" not in rest:
            return None
        tag, tail = rest[1:].split("}/cp/", 1)
        ns, _, checkpoint_id = tail.rpartition("/")
        return _unescape(tag), _unescape(ns), checkpoint_id

    # ------------------------------------------------------------------ sync faces

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._runner.run(self._get_tuple(config))

    def list(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return iter(self._runner.run(self._list(config, filter, before, limit)))

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._runner.run(self._put(config, checkpoint, metadata))

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
        task_path: str = "",
    ) -> None:
        self._runner.run(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._runner.run(self._delete_thread(str(thread_id)))


# ---------------------------------------------------------------------- the store


def _now() -> datetime:
    return datetime.now(timezone.utc)


class WhipStore(BaseStore):
    """Cross-thread memory for LangGraph on the fabric: items under namespaces, as CAS
    keys ``{prefix}/ns1/ns2/.../key`` holding JSON. Search filters on value fields and
    pages; it ranks nothing (no embeddings)."""

    def __init__(
        self, client_or_cells: Client | SyncClient | list[str] | None = None, *,
        prefix: str = "langgraph-store",
    ) -> None:
        self._runner = _runner(client_or_cells)
        self.prefix = prefix

    def _key(self, namespace: tuple[str, ...], key: str) -> str:
        return "/".join([self.prefix, *map(_escape, namespace), _escape(key)])

    def _scan(self, namespace: tuple[str, ...]) -> str:
        return "/".join([self.prefix, *map(_escape, namespace)]) + "/"

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._runner.run(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._runner.call(self._batch(list(ops)))

    async def _batch(self, ops: Sequence[Op]) -> list[Result]:
        return [await self._one(op) for op in ops]

    async def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return await self._get(op)
        if isinstance(op, PutOp):
            await self._put(op)
            return None
        if isinstance(op, SearchOp):
            return cast(Result, await self._search(op))
        return await self._namespaces(op)

    def _item(self, raw: bytes) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(raw)
        return found

    async def _get(self, op: GetOp) -> Item | None:
        entry = await self._runner.client.kv.get(self._key(op.namespace, op.key))
        if entry is None:
            return None
        row = self._item(entry.value)
        return Item(value=row["value"], key=op.key, namespace=op.namespace,
                    created_at=datetime.fromisoformat(row["created_at"]),
                    updated_at=datetime.fromisoformat(row["updated_at"]))

    async def _put(self, op: PutOp) -> None:
        kv = self._runner.client.kv
        key = self._key(op.namespace, op.key)
        if op.value is None:
            await kv.delete(key)
            return
        old = await kv.get(key)
        created = self._item(old.value)["created_at"] if old else _now().isoformat()
        row = {"value": dict(op.value), "created_at": created, "updated_at": _now().isoformat(),
               "namespace": list(op.namespace), "key": op.key}
        ttl = op.ttl * 60 if op.ttl is not None else None
        await kv.put(key, json.dumps(row).encode(), ttl=ttl)

    async def _rows(self, namespace: tuple[str, ...]) -> list[dict[str, Any]]:
        entries = await self._runner.client.kv.list(self._scan(namespace), limit=SCAN_ROWS_MAX)
        return [self._item(e.value) for e in entries]

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        rows = [
            r for r in await self._rows(op.namespace_prefix)
            if not op.filter or all(r["value"].get(k) == v for k, v in op.filter.items())
        ]
        return [
            SearchItem(namespace=tuple(r["namespace"]), key=r["key"], value=r["value"],
                       created_at=datetime.fromisoformat(r["created_at"]),
                       updated_at=datetime.fromisoformat(r["updated_at"]))
            for r in rows[op.offset : op.offset + op.limit]
        ]

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for row in await self._rows(()):
            namespace = tuple(row["namespace"])
            if all(_matches(namespace, c.match_type, tuple(c.path))
                   for c in op.match_conditions or ()):
                depth = op.max_depth if op.max_depth is not None else len(namespace)
                found.add(namespace[:depth])
        return sorted(found)[op.offset : op.offset + op.limit]


def _matches(namespace: tuple[str, ...], kind: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if kind == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))
