"""A thin blocking wrapper over the async client, for code without an event loop.

    from whip_fabric import sync

    client = sync.connect(["127.0.0.1:7001"], agent="alice")
    client.kv.put("k", b"v")
    with client.lease("deploy", "prod", ttl=30) as held:
        print(held.fence)
    for task in client.board("crew").claims("w1", wait=10):
        task.complete({"ok": True})
    client.close()

The async client runs on one event loop in a background thread (a :class:`Portal`);
every call is sent there and waited for. Coroutines become blocking calls, async
iterators plain iterators and ``async with`` blocks plain ``with`` blocks; everything else
is passed through (wrapped, so methods of the objects returned work the same way).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from .client import Client
from .client import connect as connect_async

__all__ = ["Portal", "SyncProxy", "connect"]

T = TypeVar("T")
# Plain values returned as they are (no wrapper).
_PLAIN = (str, bytes, int, float, bool, type(None), tuple, list, dict)


class Portal:
    """An event loop in a daemon thread, and a way to run coroutines on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the portal's loop and wait for its result."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking call on the portal's own loop would deadlock")
        future: Future[T] = asyncio.run_coroutine_threadsafe(_await(awaitable), self.loop)
        return future.result()

    def stop(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class SyncProxy:
    """A blocking view of an async object living on a :class:`Portal`."""

    def __init__(self, target: Any, portal: Portal) -> None:
        self._target = target
        self._portal = portal

    @property
    def target(self) -> Any:
        """The async object behind this proxy."""
        return self._target

    def __getattr__(self, name: str) -> Any:
        return _wrap(getattr(self._target, name), self._portal)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _wrap(self._target(*args, **kwargs), self._portal)

    def __iter__(self) -> Iterator[Any]:
        iterator = self._target.__aiter__()
        while True:
            try:
                item = self._portal.call(iterator.__anext__())
            except StopAsyncIteration:
                return
            yield _wrap(item, self._portal)

    def __enter__(self) -> Any:
        return _wrap(self._portal.call(self._target.__aenter__()), self._portal)

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._portal.call(self._target.__aexit__(kind, err, tb))

    def __repr__(self) -> str:
        return f"sync({self._target!r})"


def _wrap(value: Any, portal: Portal) -> Any:
    if inspect.isawaitable(value):
        return _wrap(portal.call(value), portal)
    if inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value):
        return _blocking(value, portal)
    if isinstance(value, _PLAIN) or _is_record(value):
        return value
    return SyncProxy(value, portal)


def _is_record(value: Any) -> bool:
    """Frozen dataclasses and protobuf messages are plain data: returned as they are."""
    params = getattr(type(value), "__dataclass_params__", None)
    return bool(params is not None and params.frozen) or hasattr(value, "SerializeToString")


def _blocking(function: Callable[..., Any], portal: Portal) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return _wrap(function(*args, **kwargs), portal)

    return call


class SyncClient(SyncProxy):
    """A blocking :class:`~whip_fabric.Client`; :meth:`close` also stops its portal."""

    def __init__(self, client: Client, portal: Portal) -> None:
        super().__init__(client, portal)
        self.portal = portal
        self.client = client

    def close(self) -> None:
        """Close the connection and stop the background loop."""
        self.portal.call(self.client.close())
        self.portal.stop()


def connect(
    cells: list[str] | None = None, *, agent: str | None = None, token: str | None = None,
    ca: str | None = None,
) -> SyncClient:
    """A blocking client (arguments as :func:`whip_fabric.connect`)."""
    portal = Portal()
    client = portal.call(connect_async(cells, agent=agent, token=token, ca=ca))
    return SyncClient(client, portal)
