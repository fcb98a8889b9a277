"""Board cycles per second from Python: claim then complete, by N asyncio workers, on whip
fabric (whip_fabric) and on NATS JetStream R3 (nats-py) doing the same work-queue cycle.

    python board_cycles.py whip --cells A,B,C --team T --workers 1 16 64 --duration 5
    python board_cycles.py nats --url nats://127.0.0.1:4231 --workers 1 16 64 --duration 5

Each run first fills a backlog (not timed), then every worker loops claim -> complete
(whip: BoardClaim, BoardComplete with the claim's fence; NATS: pull fetch of 1 from a
work-queue stream with 3 replicas, then a double ack) for ``--duration`` seconds. Prints one
JSON line per worker count: system, workers, cycles, cycles_per_sec, p50_ms, p99_ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

BATCH = 100


def report(system: str, workers: int, latencies: list[float], seconds: float) -> None:
    """One JSON line; ``seconds`` runs from the start to the last completed cycle (an
    emptied backlog's idle wait is not counted)."""
    ordered = sorted(latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1] if ordered else 0.0
    print(json.dumps({
        "system": system, "workers": workers, "cycles": len(ordered),
        "cycles_per_sec": round(len(ordered) / seconds, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2) if ordered else 0.0,
        "p99_ms": round(p99 * 1000, 2),
    }), flush=True)


async def whip_run(args: argparse.Namespace, workers: int) -> None:
    import whip_fabric

    client = await whip_fabric.connect(args.cells.split(","), agent=args.agent)
    # A fresh team per run: each run starts on an empty board of its own.
    team = f"{args.team}-{workers}-{int(time.time())}"
    await client.team.create(team)
    board = client.board(team)
    backlog = args.backlog
    for start in range(0, backlog, BATCH):
        await board.post_many([{"n": start + i} for i in range(BATCH)])
    latencies: list[float] = []
    deadline = time.monotonic() + args.duration
    ended = [0.0]

    async def work(name: str) -> None:
        while time.monotonic() < deadline:
            began = time.monotonic()
            task = await board.claim(name)
            if task is None:
                return
            await task.complete()
            ended[0] = time.monotonic()
            latencies.append(ended[0] - began)

    started = time.monotonic()
    await asyncio.gather(*(work(f"w{i}") for i in range(workers)))
    report("whip", workers, latencies, ended[0] - started)
    await client.close()


async def nats_run(args: argparse.Namespace, workers: int) -> None:
    import nats

    nc = await nats.connect(args.url)
    js = nc.jetstream()
    stream = f"board{workers}"
    try:
        await js.delete_stream(stream)
    except Exception:
        pass
    await js.add_stream(
        name=stream, subjects=[f"{stream}.tasks"], retention="workqueue", num_replicas=3,
        storage="file",
    )
    for i in range(args.backlog):
        await js.publish(f"{stream}.tasks", json.dumps({"n": i}).encode())
    sub = await js.pull_subscribe(f"{stream}.tasks", durable="workers")
    latencies: list[float] = []
    deadline = time.monotonic() + args.duration
    ended = [0.0]

    async def work() -> None:
        while time.monotonic() < deadline:
            began = time.monotonic()
            try:
                messages = await sub.fetch(1, timeout=2)
            except nats.errors.TimeoutError:
                return
            await messages[0].ack_sync()
            ended[0] = time.monotonic()
            latencies.append(ended[0] - began)

    started = time.monotonic()
    await asyncio.gather(*(work() for _ in range(workers)))
    report("nats-jetstream-r3", workers, latencies, ended[0] - started)
    await js.delete_stream(stream)
    await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("system", choices=["whip", "nats"])
    parser.add_argument("--cells", default="")
    parser.add_argument("--agent", default=None)
    parser.add_argument("--team", default="bench")
    parser.add_argument("--url", default="nats://127.0.0.1:4231")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--backlog", type=int, default=6000)
    args = parser.parse_args()
    run = whip_run if args.system == "whip" else nats_run
    for workers in args.workers:
        asyncio.run(run(args, workers))


if __name__ == "__main__":
    main()
