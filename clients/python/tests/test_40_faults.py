"""A leader killed mid-test: board cycles and CAS writes keep going through the client's
retries (the same idempotency key on every try, so nothing applies twice), on a 3-voter
cell and on a 3-node fabric of their own. The sync wrapper drives the same API."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

import whip_fabric
from conftest import AGENTS, client_of
from servers import Servers, wait_for
from whip_fabric import sync

# Tasks posted and worked across the kill.
TASKS = 40


@pytest.fixture(params=["cell", "node"])
def own(request: pytest.FixtureRequest) -> Iterator[Servers]:
    servers = Servers(request.param).start()
    servers.register(*AGENTS)
    servers.team("crew", "alice", "bob")
    yield servers
    servers.stop()


async def _worker(client: whip_fabric.Client, done: list[str], stop: asyncio.Event) -> None:
    while not stop.is_set():
        async for task in client.board("crew").claims("w", wait=2):
            await task.complete({"by": "bob"})
            done.append(task.id)
        if len(done) >= TASKS:
            return


async def test_a_killed_leader_loses_no_work_and_applies_nothing_twice(own: Servers) -> None:
    alice, bob = await client_of(own, "alice"), await client_of(own, "bob")
    try:
        done: list[str] = []
        stop = asyncio.Event()
        worker = asyncio.create_task(_worker(bob, done, stop))
        posted = [await alice.board("crew").post({"n": i}) for i in range(TASKS // 2)]
        leader = await asyncio.to_thread(own.leader)
        assert leader is not None
        own.kill(leader)
        # Writes during the election: retried by the client until a new leader answers.
        posted += [await alice.board("crew").post({"n": i}) for i in range(TASKS // 2, TASKS)]
        key = f"fault-{os.urandom(4).hex()}"
        first = await alice.kv.cas(key, b"1", expect=0)
        assert first.ok
        await asyncio.wait_for(worker, 120)
        stop.set()
        assert sorted(done) == sorted(posted)
        stats = await alice.board("crew").stats()
        assert (stats.ready, stats.claimed, stats.done) == (0, 0, TASKS)
        own.spawn(leader)
        await asyncio.to_thread(
            wait_for, "a leader again", lambda: own.leader() is not None
        )
    finally:
        await alice.close()
        await bob.close()


def test_the_sync_client_claims_and_completes(cell: Servers) -> None:
    client = sync.connect(
        cell.addrs, agent="alice", token=cell.token("alice"), ca=cell.ca()
    )
    try:
        task_id = client.board("crew").post({"sync": True})
        for task in client.board("crew").claims("sync-worker", wait=5):
            task.complete({"ok": 1})
            if task.id == task_id:
                break
        found = client.board("crew").get(task_id)
        assert found.state == "done"
        with client.lease(f"sync-{os.urandom(3).hex()}", "k", ttl=10) as held:
            assert held.fence > 0
    finally:
        client.close()
