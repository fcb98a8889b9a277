"""Boards, leases, counters, ledgers, mail, votes and the work registry through the
client: fenced claims, a late completion refused as StaleFence, waits woken by applies,
typed refusals for non-members."""

from __future__ import annotations

import asyncio
import os

import pytest

import whip_fabric
from servers import Servers
from whip_fabric import errors
from conftest import client_of


def unique(name: str) -> str:
    return f"{name}-{os.urandom(4).hex()}"


async def test_post_claim_complete(alice: whip_fabric.Client, bob: whip_fabric.Client) -> None:
    task_id = await alice.board("crew").post({"build": unique("api")})
    claimed = None
    async for task in bob.board("crew").claims("w1", wait=10):
        if task.id == task_id:
            claimed = task
            await task.complete({"ok": True})
            break
        await task.release()
    assert claimed is not None and claimed.fence > 0
    done = await alice.board("crew").get(task_id)
    assert done is not None and done.state == "done" and done.result == {"ok": True}


async def test_claims_wait_for_a_post(alice: whip_fabric.Client, bob: whip_fabric.Client) -> None:
    team = unique("wait")
    await alice.team.create(team)
    await alice.team.join(team, "bob")
    got: list[str] = []

    async def work() -> None:
        async for task in bob.board(team).claims("w", wait=60):
            got.append(task.id)
            await task.complete()
            return

    worker = asyncio.create_task(work())
    posted = await alice.board(team).post({"n": 1})
    await asyncio.wait_for(worker, 90)
    assert got == [posted]


async def test_claim_many_prefetches_and_completes_in_one_call(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    team = unique("prefetch")
    await alice.team.create(team)
    await alice.team.join(team, "bob")
    posted = await alice.board(team).post_many([{"n": n} for n in range(5)])
    board = bob.board(team)
    first = await board.claim_many("w", 3)
    assert [t.id for t in first] == posted[:3]
    fences = [t.fence for t in first]
    assert fences == sorted(set(fences)), "each claim has its own fence"
    stale = first[0]
    forged = whip_fabric.Task(stale.id, stale.team, None, fence=stale.fence - 1)
    with pytest.raises(errors.StaleFence):
        await board.claim_many("w", 3, complete=[(forged, "x")])
    stats = await board.stats()
    assert (stats.ready, stats.claimed, stats.done) == (2, 3, 0), "nothing changed"
    rest = await board.claim_many("w", 3, complete=[(t, {"ok": t.id}) for t in first])
    assert [t.id for t in rest] == posted[3:]
    assert all(t.state == "done" for t in first)
    last = await board.claim_many("w", 3, complete=[(t, None) for t in rest])
    assert last == []
    done = await alice.board(team).get(posted[0])
    assert done is not None and done.result == {"ok": posted[0]}


async def test_claim_many_waits_for_a_post(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    team = unique("prefetch-wait")
    await alice.team.create(team)
    await alice.team.join(team, "bob")
    waiting = asyncio.create_task(bob.board(team).claim_many("w", 4, wait=60))
    posted = await alice.board(team).post({"n": 1})
    claims = await asyncio.wait_for(waiting, 90)
    assert [t.id for t in claims] == [posted]
    assert await bob.board(team).claim_many("w", 4) == [], "nothing else is ready"


async def test_a_completion_after_the_reclaim_window_is_stale(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    team = unique("late")
    await alice.team.create(team, reclaim=1.0)
    await alice.team.join(team, "bob")
    await alice.board(team).post({"n": 1})
    board = bob.board(team)
    first = await board.claim("slow")
    assert first is not None
    # Another worker takes it over once the window lapsed: claim until the board hands
    # it out again (bounded; each claim is a real write, no sleep decides the outcome).
    second = None
    async for task in board.claims("fast", wait=60):
        second = task
        break
    assert second is not None and second.id == first.id and second.fence > first.fence
    with pytest.raises(errors.StaleFence) as caught:
        await first.complete("late")
    assert caught.value.code == "stale_fence"
    assert caught.value.presented == first.fence and caught.value.current == second.fence
    await second.complete("on time")


async def test_a_non_member_gets_not_member(servers: Servers, alice: whip_fabric.Client) -> None:
    dave = await client_of(servers, "dave")
    try:
        with pytest.raises(errors.NotMember) as caught:
            await dave.board("crew").post({"x": 1})
        assert caught.value.code == "not_member"
    finally:
        await dave.close()


async def test_a_refused_read_is_typed_by_its_code(alice: whip_fabric.Client) -> None:
    """The server's refusal code travels in the status details; the client raises its
    class at once (a refusal is not retried like an unreachable member)."""
    with pytest.raises(errors.UnknownTeam) as caught:
        await alice.board(unique("never-made")).stats()
    assert caught.value.code == "unknown_team"


async def test_lease_block_fences_and_contends(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    resource = unique("deploy")
    async with alice.lease(resource, "prod", ttl=30) as held:
        assert held.fence > 0
        with pytest.raises(errors.Contended) as caught:
            async with bob.lease(resource, "prod", ttl=30, wait=0.2):
                pass
        assert [h.fence for h in caught.value.holders] == [held.fence]
    async with bob.lease(resource, "prod", ttl=30) as again:
        assert again.fence > held.fence


async def test_lease_wait_is_granted_on_release(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    resource = unique("queue")

    async def second() -> int:
        async with bob.lease(resource, "k", ttl=30, wait=90) as held:
            return held.fence

    async with alice.lease(resource, "k", ttl=30) as first:
        waiting = asyncio.create_task(second())
        # Release once bob is queued: a predicate on the lease's own list, bounded.
        for _ in range(1200):
            if await _waiters(alice, resource):
                break
            await asyncio.sleep(0.05)
        assert not waiting.done()
    fence = await asyncio.wait_for(waiting, 90)
    assert fence > first.fence


async def _waiters(client: whip_fabric.Client, resource: str) -> list[str]:
    from whip_fabric._proto import whip_pb2 as pb

    answer = await client.transport.unary(
        "LeaseList", pb.LeaseListRequest(prefix=f"shared/{resource}"), pb.LeaseListResponse
    )
    return [w.holder for v in answer.leases for w in v.waiters]


async def test_counter_over_cap_is_a_value(alice: whip_fabric.Client) -> None:
    name = unique("tokens")
    ok = await alice.counter.consume(name, "core", amount=6, cap=10)
    over = await alice.counter.consume(name, "core", amount=6, cap=10)
    assert ok.ok and ok.remaining == 4
    assert not over.ok and over.consumed == 6


async def test_ledger_append_and_list(alice: whip_fabric.Client) -> None:
    name = unique("decisions")
    first = await alice.ledger.append(name, "p", {"n": 1})
    second = await alice.ledger.append(name, "p", {"n": 2})
    assert second > first
    entries = await alice.ledger.list(name, partition="p")
    assert [e.entry for e in entries] == [{"n": 1}, {"n": 2}]
    assert {e.appended_by for e in entries} == {"alice"}


async def test_mail_follow_proves_the_sender(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    text = unique("hello")
    got: list[whip_fabric.MailMessage] = []

    async def follow() -> None:
        async for message in bob.mail.inbox(follow=True):
            if message.text == text:
                got.append(message)
                return

    reader = asyncio.create_task(follow())
    sent = await alice.mail.send("agent:bob", type="inform", text=text, payload={"k": 1})
    await asyncio.wait_for(reader, 60)
    assert got[0].id == sent and got[0].sender == "alice" and got[0].payload == {"k": 1}
    assert got[0].trust in ("untrusted", "authority")


async def test_mail_take_acks_takes_and_redelivers(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    team = unique("inbox")
    await alice.team.create(team)
    await alice.team.join(team, "bob")
    address = f"team:{team}"
    for n in range(3):
        await alice.mail.send(address, type="inform", text=f"m{n}")
    first = await bob.mail.take(address, max=2)
    assert [m.text for m in first] == ["m0", "m1"]
    second = await bob.mail.take(address, ack_through=first[-1].seq, max=5, visibility_s=1)
    assert [m.text for m in second] == ["m2"]
    # Not acknowledged: it comes back once its one-second window ends, to a waiting take.
    again = await bob.mail.take(address, wait_s=30)
    assert [m.seq for m in again] == [second[0].seq]
    assert [m.text for m in await bob.mail.read(address)] == ["m2"]
    # Another agent naming bob's own inbox takes nothing and acknowledges nothing.
    await alice.mail.send("agent:bob", type="inform", text=unique("private"))
    before = await bob.mail.read()
    with pytest.raises(errors.Refused) as refused:
        await alice.mail.take("agent:bob", ack_through=before[-1].seq)
    assert refused.value.code == "not_reader"
    assert [m.seq for m in await bob.mail.read()] == [m.seq for m in before]


async def test_mail_send_many_sends_in_one_write_each_on_its_own(
    alice: whip_fabric.Client, bob: whip_fabric.Client
) -> None:
    team = unique("batch")
    await alice.team.create(team)
    await alice.team.join(team, "bob")
    address = f"team:{team}"
    ids = await alice.mail.send_many(address, ["a", "b", "c"])
    assert all(isinstance(i, str) for i in ids) and len(set(ids)) == 3
    taken = await bob.mail.take(address, max=10)
    assert [(m.text, m.sender) for m in taken] == [("a", "alice"), ("b", "alice"), ("c", "alice")]
    # bob is no authority over the team: each directive of his batch is refused alone.
    refused = await bob.mail.send_many(address, ["x", "y"], type="directive")
    assert [getattr(r, "code", None) for r in refused] == ["not_authorized", "not_authorized"]


async def test_vote_open_cast_show(alice: whip_fabric.Client, bob: whip_fabric.Client) -> None:
    team = unique("vote")
    await alice.team.create(team)
    await alice.team.join(team, "bob")
    await alice.team.role(team, "bob", "coordinator")
    proposal = await alice.vote.open(
        team, "ship?", ["yes", "no"], electorate=["coordinator"], until_all_voted=True
    )
    closed = await bob.vote.cast(proposal, "yes")
    shown = await alice.vote.show(proposal)
    assert shown is not None and shown["id"] == proposal
    assert closed == (shown["state"] == "closed")


async def test_work_entry_renews_and_goes_on_exit(alice: whip_fabric.Client) -> None:
    async with alice.work.register(kind="session", ttl=30) as entry:
        assert entry.id
        ids = [e["id"] for e in await alice.work.list()]
        assert entry.id in ids
    assert entry.id not in [e["id"] for e in await alice.work.list()]
