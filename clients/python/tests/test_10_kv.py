"""CAS keys through the client, on a cell and on a fabric: writes, CAS outcomes as values,
typed refusals, lists, transactions and a watch from a revision."""

from __future__ import annotations

import asyncio
import os

import pytest

import whip_fabric
from whip_fabric import Compare, Get, Put, errors


def unique(name: str) -> str:
    return f"{name}-{os.urandom(4).hex()}"


async def test_put_get_cas_delete(alice: whip_fabric.Client) -> None:
    key = unique("k")
    assert await alice.kv.get(key) is None
    first = await alice.kv.cas(key, b"one", expect=0)
    assert first.ok and first.version > 0
    entry = await alice.kv.get(key)
    assert entry is not None and entry.value == b"one" and entry.version == first.version
    stale = await alice.kv.cas(key, b"two", expect=first.version + 12345)
    assert not stale.ok and stale.current_version == first.version
    second = await alice.kv.cas(key, b"two", expect=first.version)
    assert second.ok and second.version > first.version
    assert not (await alice.kv.delete(key, expect=first.version)).ok
    assert (await alice.kv.delete(key, expect=second.version)).ok
    assert await alice.kv.get(key) is None


async def test_reserved_keys_raise_their_class(alice: whip_fabric.Client) -> None:
    with pytest.raises(errors.Reserved) as caught:
        await alice.kv.put("agents/{mallory}", b"x")
    assert caught.value.code == "reserved"
    assert isinstance(caught.value, errors.WhipError)


async def test_a_wrong_token_is_not_authenticated(servers: object) -> None:
    from servers import Servers
    assert isinstance(servers, Servers)
    client = await whip_fabric.connect(
        servers.addrs, agent="alice", token="f" * 20 + "0123456789abcdef" * 3, ca=servers.ca()
    )
    try:
        with pytest.raises(errors.NotAuthenticated):
            await client.kv.put(unique("k"), b"x")
    finally:
        await client.close()


async def test_list_pages_in_key_order(alice: whip_fabric.Client) -> None:
    prefix = unique("list") + "/"
    keys = [f"{prefix}{i:03}" for i in range(30)]
    await asyncio.gather(*(alice.kv.put(k, k.encode()) for k in keys))
    found = await alice.kv.list(prefix)
    assert [e.key.decode() for e in found] == keys
    assert len(await alice.kv.list(prefix, limit=7)) == 7


async def test_txn_runs_one_branch(alice: whip_fabric.Client) -> None:
    tag = unique("t")
    a, b = f"{{{tag}}}/a".encode(), f"{{{tag}}}/b".encode()
    done = await alice.kv.txn([Compare(a, "==", version=0)], [Put(a, b"1"), Put(b, b"2")])
    assert done.succeeded and len(done.responses) == 2
    again = await alice.kv.txn([Compare(a, "==", version=0)], [Put(a, b"x")], [Get(a)])
    assert not again.succeeded
    got = again.responses[0]
    assert isinstance(got, whip_fabric.KvEntry) and got.value == b"1"


async def test_watch_from_a_revision_sees_every_change_once(alice: whip_fabric.Client) -> None:
    # One {tag}: every key on one cell, whose revisions order all of them (revisions are
    # a cell's own, so a fabric-wide prefix has no single order).
    prefix = "{" + unique("w") + "}/"
    first = await alice.kv.put(prefix + "a", b"1")
    await alice.kv.put(prefix + "b", b"2")
    await alice.kv.delete(prefix + "a")
    seen: list[tuple[str, bytes]] = []

    async def read() -> None:
        async for event in alice.kv.watch(prefix, from_revision=first):
            seen.append((event.kind, event.key))
            if len(seen) == 4:
                return

    reader = asyncio.create_task(read())
    await alice.kv.put(prefix + "c", b"3")
    done, _ = await asyncio.wait([reader], timeout=60)
    assert done, f"the watch saw only {seen} within 60 s"
    reader.result()
    a, b, c = ((prefix + n).encode() for n in "abc")
    assert seen == [("put", a), ("put", b), ("delete", a), ("put", c)]
