"""LangGraph on the fabric, with the real langgraph package: a graph interrupted in one
process and resumed in another; two processes resuming one thread at once, of which
exactly one continues and the other gets StaleWriter; the saver's own reads and writes
(get, list, pending writes, delete) and the store's namespaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import whip_fabric
from servers import Servers, wait_for
from whip_fabric import errors

WORKER = str(Path(__file__).with_name("lg_worker.py"))


def unique(name: str) -> str:
    return f"{name}-{os.urandom(4).hex()}"


def worker(servers: Servers, mode: str, thread: str) -> subprocess.Popen[bytes]:
    env = dict(servers.env, WHIP_CELL=",".join(servers.addrs), WHIP_AGENT="alice")
    return subprocess.Popen(
        [sys.executable, WORKER, mode, thread], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def answer(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=180)
    lines = out.decode().strip().splitlines()
    assert lines, f"worker said nothing; stderr: {err.decode()[-3000:]}"
    found: dict[str, Any] = json.loads(lines[-1])
    found["stderr"] = err.decode()[-4000:]
    return found


def go(servers: Servers, thread: str) -> None:
    servers.whip("kv", "put", f"race/{thread}/go", "1", "--agent", "alice")


def test_a_graph_interrupted_in_one_process_resumes_in_another(servers: Servers) -> None:
    thread = unique("t")
    first = answer(worker(servers, "start", thread))
    first.pop("stderr")
    assert first["outcome"] == "interrupted"
    assert first["state"]["steps"] == ["plan"]
    go(servers, thread)
    second = answer(worker(servers, "resume", thread))
    second.pop("stderr")
    assert second == {"outcome": "done", "state": {
        "steps": ["plan", "approve", "work"], "approved": "yes"}}


def _entered(servers: Servers, thread: str) -> int:
    rows = servers.whip("kv", "list", f"race/{thread}/entered/", "--agent", "alice")
    return len(rows["items"])


def test_two_processes_race_on_one_thread_and_exactly_one_continues(
    servers: Servers,
) -> None:
    thread = unique("race")
    assert answer(worker(servers, "start", thread))["outcome"] == "interrupted"
    racers = [worker(servers, "resume", thread) for _ in range(2)]
    # Both in flight (each entered `work`) or one already refused: then say go.
    wait_for(
        "both racers in flight",
        lambda: _entered(servers, thread) >= 2 or any(p.poll() is not None for p in racers),
        within=120,
    )
    go(servers, thread)
    answers = [answer(p) for p in racers]
    outcomes = sorted(a["outcome"] for a in answers)
    assert outcomes == ["done", "stale_writer"], answers


@pytest.fixture
async def saver_client(servers: Servers) -> Any:
    from conftest import client_of

    client = await client_of(servers, "alice")
    yield client
    await client.close()


async def test_saver_reads_lists_and_deletes(saver_client: whip_fabric.Client) -> None:
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    from whip_fabric.langgraph import WhipCheckpointSaver

    saver = WhipCheckpointSaver(saver_client, prefix=unique("lg"))
    thread = unique("thread")
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    first = empty_checkpoint()
    c1 = await saver.aput(config, first, {"source": "input", "step": -1}, {})
    second = create_checkpoint(first, None, 0)
    c2 = await saver.aput(c1, second, {"source": "loop", "step": 0}, {})
    await saver.aput_writes(c2, [("messages", "hi"), ("other", 2)], "task-1")
    latest = await saver.aget_tuple(config)
    assert latest is not None and latest.config == c2 and latest.parent_config == c1
    assert [(w[1], w[2]) for w in latest.pending_writes or []] == [("messages", "hi"), ("other", 2)]
    listed = [t.config async for t in saver.alist(config)]
    assert listed == [c2, c1]
    assert [t.config async for t in saver.alist(config, filter={"source": "input"})] == [c1]
    assert [t.config async for t in saver.alist(config, before=c2)] == [c1]
    await saver.adelete_thread(thread)
    assert await saver.aget_tuple(config) is None


async def test_a_second_saver_takes_over_and_the_first_is_stale(
    saver_client: whip_fabric.Client,
) -> None:
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    from whip_fabric.langgraph import WhipCheckpointSaver

    prefix = unique("lg")
    one = WhipCheckpointSaver(saver_client, prefix=prefix)
    two = WhipCheckpointSaver(saver_client, prefix=prefix)
    config: Any = {"configurable": {"thread_id": unique("t"), "checkpoint_ns": ""}}
    base = empty_checkpoint()
    c1 = await one.aput(config, base, {"step": -1}, {})
    c2 = await two.aput(c1, create_checkpoint(base, None, 0), {"step": 0}, {})
    with pytest.raises(errors.StaleWriter):
        await one.aput(c1, create_checkpoint(base, None, 1), {"step": 1}, {})
    # A third built on the old checkpoint cannot fork the thread either.
    three = WhipCheckpointSaver(saver_client, prefix=prefix)
    with pytest.raises(errors.StaleWriter):
        await three.aput(c1, create_checkpoint(base, None, 2), {"step": 2}, {})
    latest = await two.aget_tuple(config)
    assert latest is not None and latest.config == c2


async def test_the_store_keeps_namespaced_items(saver_client: whip_fabric.Client) -> None:
    from whip_fabric.langgraph import WhipStore

    store = WhipStore(saver_client, prefix=unique("store"))
    await store.aput(("users", "u1"), "prefs", {"theme": "dark"})
    await store.aput(("users", "u2"), "prefs", {"theme": "light"})
    item = await store.aget(("users", "u1"), "prefs")
    assert item is not None and item.value == {"theme": "dark"}
    found = await store.asearch(("users",), filter={"theme": "light"})
    assert [i.namespace for i in found] == [("users", "u2")]
    assert await store.alist_namespaces(prefix=("users",)) == [("users", "u1"), ("users", "u2")]
    await store.adelete(("users", "u1"), "prefs")
    assert await store.aget(("users", "u1"), "prefs") is None


async def test_langgraphs_own_conformance_suite_passes(
    saver_client: whip_fabric.Client,
) -> None:
    """LangGraph's checkpointer conformance suite (PyPI `langgraph-checkpoint-conformance`):
    every base capability passes on the fabric."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    from whip_fabric.langgraph import WhipCheckpointSaver

    @checkpointer_test(name="WhipCheckpointSaver")
    async def whip_saver() -> Any:
        yield WhipCheckpointSaver(saver_client, prefix=unique("conformance"))

    report = await validate(whip_saver)
    report.print_report()
    assert report.passed_all_base(), report
