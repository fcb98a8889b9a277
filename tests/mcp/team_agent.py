"""One agent of the MCP team test (tests/tests/mcp/t60_team.rs), an MCP client through the
official Python SDK, to `whip mcp` over stdio or to a node's Streamable HTTP listener.

Started with one JSON argument:
    {"agent": NAME, "mode": "work" | "drain",
     "server": {"stdio": [WHIP, ARGS...], "env": {...}} | {"url": URL, "token": TOKEN},
     "team": TEAM, "repo_dir": DIR, "repo": REPO_NAME, "git_env": {...},
     "peer": NAME, "forbidden": PATH, "log": FILE}

"work": claim tasks of TEAM until its board has nothing ready or claimed; for each, reserve
the task's file exclusively in REPO, change it in REPO_DIR (this agent's clone), commit
through the guard's hook (which runs `whip guard check` as this agent), complete the task
under its fence, release the file, tell PEER by mail and read its own inbox (a mailbox
holds at most 64 unread messages from one sender). Before the first task it makes two
attempts the fabric must refuse: a commit of FORBIDDEN (a path another agent holds) and a
mail whose sender names another agent. "drain": read and acknowledge the whole inbox.

Every step is one JSON line in LOG, with time.monotonic() (comparable across processes on
one machine): the test checks the team's history from these lines and from the fabric.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

# Calls that fail for the transport (a node killed mid-call) are tried again this often.
RETRIES = 40
RETRY_PAUSE_S = 0.25
# Codes of a tool error that a retry may clear.
RETRYABLE = ("unavailable", "internal", "deadline")


class Refused(Exception):
    def __init__(self, text):
        super().__init__(text)
        self.code = text.split(":", 1)[0]


class Agent:
    def __init__(self, config, session, log):
        self.config = config
        self.session = session
        self.log = log

    def note(self, event, **fields):
        fields.update({"event": event, "agent": self.config["agent"], "t": time.monotonic()})
        self.log.write(json.dumps(fields) + "\n")
        self.log.flush()

    async def call(self, tool, arguments, retry=True):
        """The tool's structured result; a tool error raises Refused with its code."""
        for attempt in range(RETRIES):
            try:
                result = await self.session.call_tool(tool, arguments)
            except Exception as e:  # noqa: BLE001 - the transport failed; try again
                if not retry or attempt == RETRIES - 1:
                    raise
                self.note("transport-retry", tool=tool, error=f"{type(e).__name__}: {e}")
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            if not result.is_error:
                return result.structured_content
            text = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            refused = Refused(text)
            if retry and refused.code in RETRYABLE and attempt < RETRIES - 1:
                self.note("retry", tool=tool, error=text)
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            raise refused
        raise AssertionError("unreachable")

    def git(self, *args, check=True):
        env = {**os.environ, **self.config["git_env"]}
        done = subprocess.run(
            ["git", "-C", self.config["repo_dir"], *args],
            env=env,
            capture_output=True,
            text=True,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"git {args}: {done.stderr}")
        return done

    async def attempt_forbidden(self):
        """Commit a change to a path another agent holds: the guard must refuse it."""
        path = self.config["forbidden"]
        with open(f"{self.config['repo_dir']}/{path}", "a") as f:
            f.write(f"{self.config['agent']} was here\n")
        self.git("add", path)
        done = self.git("commit", "-q", "-m", f"forbidden by {self.config['agent']}", check=False)
        head = self.git("log", "-1", "--format=%s").stdout.strip()
        self.note("forbidden-commit", exit=done.returncode, stderr=done.stderr[-400:], head=head)
        self.git("reset", "-q", "--hard", "HEAD")

    async def attempt_spoof(self):
        """Send mail as another agent: refused, whatever the transport."""
        forged = {"to": self.config["peer"], "type": "inform", "text": "spoofed", "from": "lead"}
        try:
            await self.call("mail_send", forged, retry=False)
            self.note("spoof", refused=None)
        except Refused as e:
            self.note("spoof", refused=e.code)

    async def board_idle(self):
        contents = (await self.session.read_resource(f"whip://team/{self.config['team']}/board"))
        counts = json.loads(contents.contents[0].text)["counts"]
        return counts["ready"] == 0 and counts["claimed"] == 0 and counts["cell_ready"] == 0

    async def work_one(self, claimed):
        team, repo = self.config["team"], self.config["repo"]
        task, fence = claimed["task"], claimed["fence"]
        path = task["body"]["file"]
        reserve = {"repo": repo, "paths": [path], "exclusive": True, "ttl_s": 60}
        reserved = await self.call("reserve_paths", reserve)
        if not reserved["granted"]:
            self.note("conflict", task=task["id"], file=path, conflicts=reserved["conflicts"])
            await self.call("board_release", {"team": team, "task_id": task["id"], "fence": fence})
            return
        grant = reserved["granted"][0]
        self.note("granted", task=task["id"], file=path, fence=grant["fence"])
        with open(f"{self.config['repo_dir']}/{path}", "a") as f:
            f.write(f"task {task['id']} by {self.config['agent']}\n")
        self.git("add", path)
        self.git("commit", "-q", "-m", f"{task['id']} {path}")
        sha = self.git("rev-parse", "HEAD").stdout.strip()
        self.note("committed", task=task["id"], file=path, sha=sha)
        done = {"team": team, "task_id": task["id"], "fence": fence, "result": {"commit": sha}}
        try:
            completed = await self.call("board_complete", done)
            self.note("completed", task=task["id"], outcome=completed["outcome"])
        except Refused as e:
            # A retry after a completion whose answer was lost, or a claim that lapsed.
            self.note("complete-refused", task=task["id"], code=e.code, text=str(e))
        self.note("release-sent", task=task["id"], file=path, fence=grant["fence"])
        await self.call("release_paths", {"repo": repo, "paths": [path]})
        text = f"done {task['id']}"
        note = {"to": self.config["peer"], "type": "inform", "text": text,
                "idempotency_key": f"{self.config['agent']}/{task['id']}"}
        sent = await self.call("mail_send", note)
        self.note("mail-sent", id=sent["id"], to=self.config["peer"], text=text)
        # Read (and acknowledge) what peers sent, as a working agent does: a mailbox holds
        # at most 64 unread messages from one sender.
        await self.drain()

    async def work(self):
        await self.call("start_session", {"team": self.config["team"]})
        await self.attempt_forbidden()
        await self.attempt_spoof()
        while True:
            claim = await self.call("board_claim", {"team": self.config["team"], "wait_s": 2})
            if claim["task"] is None:
                if await self.board_idle():
                    self.note("idle")
                    return
                continue
            await self.work_one(claim)

    async def drain(self):
        after = 0
        while True:
            page = await self.call("mail_inbox", {"after": after, "limit": 100})
            for m in page["messages"]:
                self.note("mail-received", id=m["id"], sender=m["from"], text=m["text"])
            if not page["messages"]:
                return
            after = page["next_after"]
            await self.call("mail_ack", {"through_seq": after})


async def open_session(stack, server, agent):
    if "url" in server:
        import httpx2

        headers = {"Authorization": f"Bearer {server['token']}"}
        client = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60))
        streams = await stack.enter_async_context(
            streamable_http_client(server["url"], http_client=client)
        )
        read, write = streams[0], streams[1]
    else:
        env = dict(server.get("env", {}))
        env["WHIP_AGENT"] = agent
        command, *args = server["stdio"]
        params = StdioServerParameters(command=command, args=args, env=env)
        read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def main():
    config = json.loads(sys.argv[1])
    with open(config["log"], "a") as log:
        async with AsyncExitStack() as stack:
            session = await open_session(stack, config["server"], config["agent"])
            agent = Agent(config, session, log)
            if config["mode"] == "work":
                await agent.work()
            else:
                await agent.drain()


if __name__ == "__main__":
    asyncio.run(main())
