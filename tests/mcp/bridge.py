"""Drive `whip mcp` servers with the official MCP Python client, for the process tests.

Started with one JSON argument, {"whip": PATH, "cwd": DIR, "env": {...}, "agents":
{"alice": ["mcp", "--cell", ADDR], ...}}, it starts one `whip mcp` per agent through the
SDK's stdio client (each with WHIP_AGENT set to its agent and `env` added), opens an MCP
session on each, and prints {"ready": [...]} once all are up. An agent given as
{"url": URL, "headers": {...}} is reached over the SDK's Streamable HTTP client instead,
with those headers on every request. Then it reads one JSON request
per line on stdin and answers each on stdout, tagged with the request's id; requests run
concurrently, so a test that sends two before reading sees them race:

    {"id": 1, "agent": "alice", "method": "list_tools"}
      -> {"id": 1, "tools": [{"name": ..., "input_schema": {...}}, ...]}
    {"id": 2, "agent": "alice", "method": "call", "tool": "board_claim", "arguments": {...}}
      -> {"id": 2, "is_error": false, "text": "...", "structured": {...}}
    {"id": 3, "agent": "alice", "method": "list_resources"}
      -> {"id": 3, "resources": [URI, ...], "templates": [URI template, ...]}
    {"id": 4, "agent": "alice", "method": "read_resource", "uri": "whip://inbox"}
      -> {"id": 4, "contents": [JSON, ...]}

A call that raises answers {"id": N, "exception": "..."}. End of input closes every session
(and so every server) and exits.
"""

import asyncio
import json
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def open_session(stack, config, agent, args):
    if isinstance(args, dict):
        import httpx2

        client = await stack.enter_async_context(httpx2.AsyncClient(headers=args["headers"]))
        streams = await stack.enter_async_context(
            streamable_http_client(args["url"], http_client=client)
        )
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        return session
    env = dict(config.get("env", {}))
    env["WHIP_AGENT"] = agent
    params = StdioServerParameters(
        command=config["whip"], args=args, env=env, cwd=config.get("cwd")
    )
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def answer(sessions, request, out_lock):
    reply = {"id": request.get("id")}
    try:
        session = sessions[request["agent"]]
        if request["method"] == "list_tools":
            listed = await session.list_tools()
            reply["tools"] = [
                {"name": t.name, "input_schema": t.input_schema} for t in listed.tools
            ]
        elif request["method"] == "list_resources":
            listed = await session.list_resources()
            templates = await session.list_resource_templates()
            reply["resources"] = [str(r.uri) for r in listed.resources]
            reply["templates"] = [t.uri_template for t in templates.resource_templates]
        elif request["method"] == "read_resource":
            result = await session.read_resource(request["uri"])
            reply["contents"] = [json.loads(c.text) for c in result.contents]
        else:
            # With "timeout_s", the client gives up after that long and sends
            # notifications/cancelled (the answer is then an exception).
            # With "progress": true, the progress notifications it got come back too.
            progress = []

            async def on_progress(done, total, message):
                progress.append({"progress": done, "total": total, "message": message})

            result = await session.call_tool(
                request["tool"],
                request.get("arguments", {}),
                read_timeout_seconds=request.get("timeout_s"),
                progress_callback=on_progress if request.get("progress") else None,
            )
            reply["progress"] = progress
            texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
            reply["is_error"] = bool(result.is_error)
            reply["text"] = "\n".join(texts)
            reply["structured"] = result.structured_content
    except Exception as e:  # noqa: BLE001 - the test reads what went wrong
        reply["exception"] = f"{type(e).__name__}: {e}"
    async with out_lock:
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


async def main():
    config = json.loads(sys.argv[1])
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out_lock = asyncio.Lock()
    async with AsyncExitStack() as stack:
        sessions = {}
        for agent, args in config["agents"].items():
            sessions[agent] = await open_session(stack, config, agent, args)
        print(json.dumps({"ready": sorted(sessions)}), flush=True)
        pending = set()
        while line := await reader.readline():
            if line.strip():
                request = json.loads(line)
                pending.add(asyncio.create_task(answer(sessions, request, out_lock)))
        await asyncio.gather(*pending)


if __name__ == "__main__":
    asyncio.run(main())
