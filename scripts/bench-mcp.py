"""One workload against two MCP coordination servers: whip and MCP Agent Mail.

Goal: compare, in one run on one machine, what an agent sees from each server when N agents
(each its own MCP client session, over Streamable HTTP on both) reserve paths, release them
and mail each other: tool calls per second, latency per tool, exclusive reservations granted
twice, and messages accepted under a sender's name that is not the caller's.

Method. Both servers must already run; `scripts/bench-mcp.sh` starts them and registers the
agents. For each N, on each server in turn, every agent loops for the duration:

1. reserve one exclusive path, drawn at random from a pool of 40 (so agents contend);
2. when it got the path, hold it for the "work" (`--hold-ms`, 2 ms: an asyncio sleep) and
   release it; when it did not, go on;
3. send a message to another agent (to itself when N is 1);
4. fetch its own inbox, from where its last fetch stopped.

The driver keeps, per path, the interval each agent held it as the agent saw it: from the
moment the grant's answer arrived to the moment the release was sent (after the work). Two
such intervals of different agents that overlap are a double grant, since the server said
"yours" to both at the same time. A burst follows: all N agents ask for the same path at
the same instant, 20 rounds; every round with more than one winner adds its extra winners.
Last, each agent sends one message naming another agent as its sender, by each server's
own means (Agent Mail's `sender_name`; whip has no such argument, so the call carries
`from`, which is what an agent would try); the message counts as forged if the server
accepted it and the recipient's inbox shows the claimed name as its sender.

What "got the path" means. Whip's `reserve_paths` answers `granted` or `conflicts` per path
(until it landed, `lease_acquire` on one lease per path stood in: `held` or `contended`).
Agent Mail's reservations are advisory: `file_reservation_paths` always creates the
reservation and lists it in `granted`, and reports any active exclusive holder beside it in
`conflicts`. Its own docs tell an agent to treat a conflict as "do not edit"; the driver
counts an Agent Mail reservation as held only when it came back with no conflict, and
releases the one it was given either way. The raw reading (every `granted` entry) is
reported too, as `raw` in the burst.

Output: one JSON object per server and N on stdout (`--json`), and a Markdown table. Calls
and cycles count when they ended within the measured window; a call that fails (a refusal,
or no answer within CALL_TIMEOUT_S) is listed under `errors`; a session that breaks ends
that server's run at that N with `failed` and what was measured so far.
Whip's mailbox is a queue with caps (256 waiting, 64 per sender), so a whip agent
acknowledges what it read every 32 messages (`mail_ack`); Agent Mail's inbox is an archive
with nothing to acknowledge. The acks are counted as tool calls and listed separately.
"""

import argparse
import asyncio
import json
import random
import sys
import time
from contextlib import AsyncExitStack

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

# Paths the agents contend for.
PATH_POOL = 40
# Rounds of the same-instant burst, per N, and the time after which no new round starts.
BURST_ROUNDS = 20
BURST_BUDGET_S = 60
# A reservation's time to live, far longer than any hold of the workload, so no grant ever
# lapses while a client believes it holds it.
TTL_S = 300
# A whip agent acknowledges its inbox once it has read this many messages since the last ack.
ACK_EVERY = 32
# The longest one tool call may take before the driver gives up on it (and counts an error);
# longer than Agent Mail's own 60 s archive-lock wait, so its refusal comes first.
CALL_TIMEOUT_S = 120.0


class Refused(Exception):
    """A tool answered with an error (isError) that the workload did not expect."""


async def open_session(stack, url, headers):
    # No HTTP timeout: a transport timeout would end the whole session, where the MCP
    # request timeout (CALL_TIMEOUT_S) fails only the call that took too long.
    client = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=None))
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


class Agent:
    """One agent: its MCP session, its name on its server, and what it measured."""

    def __init__(self, server, name, session):
        self.server = server
        self.name = name
        self.session = session
        self.cursor = None  # where the last inbox fetch stopped
        self.unacked = 0
        self.last_seq = None

    async def call(self, tool, arguments, stats=None, label=None):
        started = time.perf_counter()
        try:
            result = await self.session.call_tool(
                tool, arguments, read_timeout_seconds=CALL_TIMEOUT_S
            )
        except Exception as e:  # noqa: BLE001 - a timeout or a dropped request is a result
            if stats is not None:
                stats.record(label or tool, time.perf_counter() - started, started)
            return True, None, f"exception: {type(e).__name__}: {e}"
        elapsed = time.perf_counter() - started
        if stats is not None:
            stats.record(label or tool, elapsed, started)
        text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        body = result.structured_content
        if body is None and text and not result.is_error:
            try:
                body = json.loads(text)
            except ValueError:
                body = None
        return bool(result.is_error), body, text


class Stats:
    """Latencies per tool, counted only once the measured window has begun."""

    def __init__(self):
        self.measure_from = None
        self.measure_to = None
        self.latencies = {}
        self.errors = {}

    def record(self, tool, elapsed, started):
        if self.within(started + elapsed):
            self.latencies.setdefault(tool, []).append(elapsed)

    def within(self, moment):
        return self.measure_from is not None and self.measure_from <= moment <= self.measure_to

    def error(self, tool, text):
        entry = self.errors.setdefault(tool, [0, text[:200]])
        entry[0] += 1

    def calls(self):
        return sum(len(v) for v in self.latencies.values())


def quantile(values, q):
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Whip:
    """whip's tools over its `--mcp` listener; each agent proves itself with its own bearer."""

    label = "whip"

    def __init__(self, url, credentials, prefix):
        self.url = url
        self.credentials = credentials
        self.prefix = prefix
        self.reserve_tool = None

    async def agents(self, stack, n):
        with open(self.credentials) as f:
            tokens = json.load(f)
        agents = []
        for i in range(n):
            name = f"{self.prefix}{i}"
            headers = {"Authorization": f"Bearer {tokens[name]}"}
            agents.append(Agent(self, name, await open_session(stack, self.url, headers)))
        listed = {t.name for t in (await agents[0].session.list_tools()).tools}
        self.reserve_tool = "reserve_paths" if "reserve_paths" in listed else "lease_acquire"
        return agents

    def spare(self):
        return f"{self.prefix}spare"

    async def reserve(self, agent, path, stats):
        """Whether `agent` now holds `path` exclusively (and, raw, whether it was granted)."""
        if self.reserve_tool == "reserve_paths":
            args = {"repo": "bench", "paths": [path], "exclusive": True, "ttl_s": TTL_S}
            failed, body, text = await agent.call("reserve_paths", args, stats, "reserve")
            if failed:
                stats.error("reserve", text)
                return False, False
            held = any(g.get("path") == path for g in body.get("granted", []))
            return held, held
        args = {"name": "bench-paths", "key": path, "ttl_s": TTL_S}
        failed, body, text = await agent.call("lease_acquire", args, stats, "reserve")
        if failed:
            stats.error("reserve", text)
            return False, False
        held = body.get("outcome") == "held"
        return held, held

    async def release(self, agent, path, stats, held):
        if not held:
            return
        if self.reserve_tool == "reserve_paths":
            args = {"repo": "bench", "paths": [path]}
            failed, _, text = await agent.call("release_paths", args, stats, "release")
        else:
            args = {"name": "bench-paths", "key": path}
            failed, _, text = await agent.call("lease_release", args, stats, "release")
        if failed:
            stats.error("release", text)

    async def send(self, agent, to, text, stats, claimed=None):
        args = {"to": to, "type": "inform", "text": text}
        if claimed is not None:
            args["from"] = claimed
        failed, _, answer = await agent.call("mail_send", args, stats, "send")
        if failed and stats is not None and claimed is None:
            stats.error("send", answer)
        return not failed, answer

    async def inbox(self, agent, stats):
        """The messages that arrived since the last fetch, as (sender, text)."""
        args = {} if agent.cursor is None else {"after": agent.cursor}
        failed, body, text = await agent.call("mail_inbox", args, stats, "inbox")
        if failed:
            if stats is not None:
                stats.error("inbox", text)
            return []
        messages = body.get("messages", [])
        if body.get("next_after") is not None:
            agent.cursor = body["next_after"]
        if messages:
            agent.last_seq = messages[-1]["seq"]
            agent.unacked += len(messages)
        if agent.unacked >= ACK_EVERY:
            failed, _, text = await agent.call(
                "mail_ack", {"through_seq": agent.last_seq}, stats, "ack"
            )
            if failed and stats is not None:
                stats.error("ack", text)
            agent.unacked = 0
        return [(strip_address(m.get("from", "")), m.get("text", "")) for m in messages]

    def tools(self):
        if self.reserve_tool == "reserve_paths":
            return {"reserve": "reserve_paths", "release": "release_paths"}
        return {"reserve": "lease_acquire", "release": "lease_release"}


def strip_address(sender):
    return sender[len("agent:"):] if sender.startswith("agent:") else sender


class AgentMail:
    """MCP Agent Mail over its Streamable HTTP server; one static bearer for everyone."""

    label = "agent-mail"

    def __init__(self, url, token, project):
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.project = project
        self.names = []
        self.spare_name = None

    async def agents(self, stack, n):
        sessions = [await open_session(stack, self.url, self.headers) for _ in range(n)]
        first = Agent(self, None, sessions[0])
        failed, _, text = await first.call("ensure_project", {"human_key": self.project})
        if failed:
            raise Refused(f"ensure_project: {text}")
        # Names are the server's to choose (adjective+noun); register once, reuse after.
        while len(self.names) < max(n, 1) + 1:
            args = {"project_key": self.project, "program": "bench-mcp", "model": "none"}
            failed, body, text = await first.call("register_agent", args)
            if failed:
                raise Refused(f"register_agent: {text}")
            self.names.append(body["name"])
        self.spare_name = self.names[-1]
        return [Agent(self, self.names[i], sessions[i]) for i in range(n)]

    def spare(self):
        return self.spare_name

    async def reserve(self, agent, path, stats):
        args = {
            "project_key": self.project,
            "agent_name": agent.name,
            "paths": [path],
            "ttl_seconds": TTL_S,
            "exclusive": True,
        }
        failed, body, text = await agent.call("file_reservation_paths", args, stats, "reserve")
        if failed:
            stats.error("reserve", text)
            return False, False
        granted = any(g.get("path_pattern") == path for g in body.get("granted", []))
        conflicted = any(c.get("path") == path for c in body.get("conflicts", []))
        return granted and not conflicted, granted

    async def release(self, agent, path, stats, held):
        # The reservation exists whether or not it came back conflicted: give it back.
        args = {"project_key": self.project, "agent_name": agent.name, "paths": [path]}
        failed, _, text = await agent.call("release_file_reservations", args, stats, "release")
        if failed:
            stats.error("release", text)

    async def send(self, agent, to, text, stats, claimed=None):
        args = {
            "project_key": self.project,
            "sender_name": claimed or agent.name,
            "to": [to],
            "subject": "bench",
            "body_md": text,
        }
        failed, _, answer = await agent.call("send_message", args, stats, "send")
        if failed and stats is not None and claimed is None:
            stats.error("send", answer)
        return not failed, answer

    async def inbox(self, agent, stats):
        args = {
            "project_key": self.project,
            "agent_name": agent.name,
            "include_bodies": True,
            "limit": 100,
        }
        if agent.cursor is not None:
            args["since_ts"] = agent.cursor
        failed, body, text = await agent.call("fetch_inbox", args, stats, "inbox")
        if failed:
            if stats is not None:
                stats.error("inbox", text)
            return []
        messages = body.get("result", body) if isinstance(body, dict) else body
        messages = messages or []
        if messages:
            agent.cursor = max(m["created_ts"] for m in messages)
        return [(m.get("from", ""), m.get("body_md", "")) for m in messages]

    def tools(self):
        return {
            "reserve": "file_reservation_paths",
            "release": "release_file_reservations",
            "send": "send_message",
            "inbox": "fetch_inbox",
        }


async def workload(server, agents, duration_s, warmup_s, hold_s, seed):
    """The closed loop of every agent; answers the stats and the holds as clients saw them.

    Calls and cycles count when they ended within the measured window."""
    stats = Stats()
    holds = {}  # path -> [(start, end, agent)], the grants an agent worked under
    raw_holds = {}  # the same for every grant, conflicted or not (Agent Mail's raw reading)
    cycles = [0]
    start = time.perf_counter()
    stats.measure_from = start + warmup_s
    stop = stats.measure_from + duration_s
    stats.measure_to = stop

    async def loop(index, agent):
        rng = random.Random(seed * 1000 + index)
        peers = [a.name for a in agents if a is not agent] or [agent.name]
        while time.perf_counter() < stop:
            path = f"src/file{rng.randrange(PATH_POOL)}.rs"
            held, raw = await server.reserve(agent, path, stats)
            granted_at = time.perf_counter()
            if held:
                await asyncio.sleep(hold_s)  # the "work"
                holds.setdefault(path, []).append((granted_at, time.perf_counter(), agent.name))
            if raw:
                interval = (granted_at, time.perf_counter(), agent.name)
                raw_holds.setdefault(path, []).append(interval)
                # Always, past the end too: a reservation left behind would skew the next run.
                await server.release(agent, path, stats, held)
            if time.perf_counter() >= stop:
                break
            await server.send(agent, rng.choice(peers), f"cycle from {agent.name}", stats)
            if time.perf_counter() >= stop:
                break
            await server.inbox(agent, stats)
            if stats.within(time.perf_counter()):
                cycles[0] += 1

    await asyncio.gather(*(loop(i, a) for i, a in enumerate(agents)))
    return stats, holds, raw_holds, cycles[0]


def double_grants(holds):
    """Intervals that overlap an earlier interval of another agent on the same path."""
    count = 0
    for intervals in holds.values():
        intervals.sort()
        latest_end, latest_agent = None, None
        for start, end, agent in intervals:
            if latest_end is not None and start < latest_end and agent != latest_agent:
                count += 1
            if latest_end is None or end > latest_end:
                latest_end, latest_agent = end, agent
    return count


async def burst(server, agents, rounds, tag):
    """All agents ask for one path at once, `rounds` times: winners per round.

    Rounds stop early once BURST_BUDGET_S has passed (a server whose calls stall would
    otherwise hold the run for many minutes); the result says how many ran."""
    held_extra, raw_extra, worst = 0, 0, 0
    deadline = time.perf_counter() + BURST_BUDGET_S
    ran = 0
    burst_stats = Stats()
    for r in range(rounds):
        if r > 0 and time.perf_counter() > deadline:
            break
        ran += 1
        path = f"burst/{tag}/{r}"
        go = asyncio.Event()

        async def one(agent):
            await go.wait()
            return await server.reserve(agent, path, burst_stats)

        tasks = [asyncio.create_task(one(a)) for a in agents]
        await asyncio.sleep(0)
        go.set()
        outcomes = await asyncio.gather(*tasks)
        held = sum(1 for h, _ in outcomes if h)
        raw = sum(1 for _, g in outcomes if g)
        held_extra += max(0, held - 1)
        raw_extra += max(0, raw - 1)
        worst = max(worst, held)
        await asyncio.gather(
            *(server.release(a, path, Stats(), h) for a, (h, g) in zip(agents, outcomes) if g)
        )
    return {"rounds": ran, "extra_winners": held_extra, "raw_extra_winners": raw_extra,
            "most_winners_in_a_round": worst,
            "refused": sum(e[0] for e in burst_stats.errors.values())}


async def forgery(server, agents, tag):
    """Each agent sends one message claiming another's name; count accepted and delivered."""
    n = len(agents)
    attempts = []
    refusals = set()
    for i, agent in enumerate(agents):
        claimed = agents[(i + 1) % n].name if n > 1 else server.spare()
        recipient = agents[(i + 2) % n]
        marker = f"forged {tag} {i}"
        accepted, answer = await server.send(agent, recipient.name, marker, None, claimed=claimed)
        attempts.append((accepted, claimed, recipient, marker))
        if not accepted:
            refusals.add(answer.split(":")[0])
    delivered = 0
    for recipient in {id(a[2]): a[2] for a in attempts}.values():
        # Read the recipient's whole inbox from the start, as a fresh client would.
        saved = recipient.cursor
        recipient.cursor = None
        seen = []
        while True:
            page = await server.inbox(recipient, None)
            seen.extend(page)
            if not page or server.label != "whip":
                break
        recipient.cursor = saved
        for accepted, claimed, target, marker in attempts:
            if target is recipient and (claimed, marker) in seen:
                delivered += 1
    accepted = sum(1 for a in attempts if a[0])
    return {"attempts": len(attempts), "accepted": accepted, "delivered_forged": delivered,
            "refused_with": sorted(refusals)}


def leaves(error):
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


async def run_one(server, n, args, seed):
    """One server at N agents; a session that breaks ends the run with what was measured."""
    result = {"server": server.label, "agents": n}
    try:
        await measure(server, n, args, seed, result)
    except BaseException as e:  # noqa: BLE001 - the server's failure is part of the result
        if isinstance(e, KeyboardInterrupt):
            raise
        result["failed"] = "; ".join(sorted({f"{type(x).__name__}: {x}"[:200] for x in leaves(e)}))
    return result


async def measure(server, n, args, seed, result):
    async with AsyncExitStack() as stack:
        agents = await server.agents(stack, n)
        tag = f"{int(time.time())}-{n}"
        stats, holds, raw_holds, cycles = await workload(
            server, agents, args.duration, args.warmup, args.hold_ms / 1000, seed
        )
        result.update({
            "transport": "streamable-http",
            "duration_s": args.duration,
            "cycles": cycles,
            "cycles_per_s": cycles / args.duration,
            "calls": stats.calls(),
            "calls_per_s": stats.calls() / args.duration,
            "tools": server.tools(),
            "latency_ms": {
                tool: {
                    "calls": len(v),
                    "p50": 1000 * quantile(v, 0.50),
                    "p99": 1000 * quantile(v, 0.99),
                }
                for tool, v in sorted(stats.latencies.items())
            },
            "grants_held": sum(len(v) for v in holds.values()),
            "double_grants": double_grants(holds),
            "raw_double_grants": double_grants(raw_holds),
            "errors": stats.errors,
        })
        result["burst"] = await burst(server, agents, BURST_ROUNDS, tag)
        result["forged"] = await forgery(server, agents, tag)


def table(results):
    lines = [
        "| server | agents | cycles/s | calls/s | reserve p50/p99 ms | release p50/p99 ms "
        "| send p50/p99 ms | inbox p50/p99 ms | holds | double grants | burst winners "
        "(max/round, extra) | forged accepted/delivered |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "latency_ms" not in r:
            lines.append(f"| {r['server']} | {r['agents']} | failed: {r.get('failed')} |")
            continue
        r.setdefault("burst", {"rounds": 0, "extra_winners": "—", "raw_extra_winners": "—",
                               "most_winners_in_a_round": "—", "refused": 0})
        r.setdefault("forged", {"accepted": "—", "attempts": "—", "delivered_forged": "—"})

        def lat(tool):
            v = r["latency_ms"].get(tool)
            return f"{v['p50']:.1f} / {v['p99']:.1f}" if v else "—"

        b, f = r["burst"], r["forged"]
        raw = f" (raw extra {b['raw_extra_winners']})" if r["server"] != "whip" else ""
        raw_dg = f" (raw {r['raw_double_grants']})" if r["server"] != "whip" else ""
        if b["rounds"] != BURST_ROUNDS or b["refused"]:
            raw += f" in {b['rounds']} rounds, {b['refused']} refused"
        lines.append(
            f"| {r['server']} | {r['agents']} | {r['cycles_per_s']:.1f} | {r['calls_per_s']:.1f} "
            f"| {lat('reserve')} | {lat('release')} | {lat('send')} | {lat('inbox')} "
            f"| {r['grants_held']} | {r['double_grants']}{raw_dg} "
            f"| {b['most_winners_in_a_round']}, {b['extra_winners']}{raw} "
            f"| {f['accepted']}/{f['attempts']} / {f['delivered_forged']} |"
            + (f" failed: {r['failed']}" if r.get("failed") else "")
        )
    return "\n".join(lines)


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--whip-url", default="")
    p.add_argument("--whip-credentials", default="")
    p.add_argument("--whip-prefix", default="bench-")
    p.add_argument("--am-url", default="")
    p.add_argument("--am-token", default="")
    p.add_argument("--am-project", default="")
    p.add_argument("--agents", default="1,8,32")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--hold-ms", type=float, default=2.0, help="the work while a path is held")
    p.add_argument("--only", choices=["whip", "agent-mail"])
    p.add_argument("--json", action="store_true", help="print one JSON object per result")
    args = p.parse_args()
    servers = [
        Whip(args.whip_url, args.whip_credentials, args.whip_prefix),
        AgentMail(args.am_url, args.am_token, args.am_project),
    ]
    if args.only:
        servers = [s for s in servers if s.label == args.only]
    results = []
    for n in [int(x) for x in args.agents.split(",")]:
        # The servers take turns at each N, so a noisy minute hurts both.
        for server in servers:
            print(f"# {server.label}, {n} agents", file=sys.stderr, flush=True)
            result = await run_one(server, n, args, seed=n)
            results.append(result)
            if args.json:
                print(json.dumps(result), flush=True)
            print(json.dumps({k: result.get(k) for k in
                              ("server", "agents", "cycles_per_s", "calls_per_s",
                               "double_grants", "burst", "forged", "errors", "failed")}),
                  file=sys.stderr, flush=True)
    print(table(results))


if __name__ == "__main__":
    asyncio.run(main())
