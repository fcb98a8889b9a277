"""A LangGraph process for the checkpointer tests: one graph on WhipCheckpointSaver.

    python lg_worker.py start THREAD     run until the approval interrupt, then exit
    python lg_worker.py resume THREAD    resume with approval "yes" and run to the end

The graph: plan -> approve (interrupt: asks for approval) -> work -> done. ``work``
records that it entered (key race/{THREAD}/entered/{pid}) and waits until the test writes
race/{THREAD}/go, so two resuming processes are both in flight before either writes.
Prints one JSON line: {"outcome": "interrupted"|"done"|"stale_writer", "state": ...}.
Connection settings come from WHIP_CELL, WHIP_AGENT, the credentials file and ca.pem.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from whip_fabric import errors, sync
from whip_fabric.langgraph import WhipCheckpointSaver

GO_WAIT_S = 120.0


class State(TypedDict, total=False):
    steps: list[str]
    approved: str


def build(client: Any, thread: str) -> Any:
    def plan(state: State) -> State:
        return {"steps": state.get("steps", []) + ["plan"]}

    def approve(state: State) -> State:
        answer = interrupt({"question": "ship it?"})
        return {"approved": str(answer), "steps": state["steps"] + ["approve"]}

    def work(state: State) -> State:
        client.kv.put(f"race/{thread}/entered/{os.getpid()}", b"1")
        deadline = time.monotonic() + GO_WAIT_S
        while client.kv.get(f"race/{thread}/go") is None:
            if time.monotonic() > deadline:
                raise TimeoutError("the test never said go")
            time.sleep(0.02)
        return {"steps": state["steps"] + ["work"]}

    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("approve", approve)
    graph.add_node("work", work)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve")
    graph.add_edge("approve", "work")
    graph.add_edge("work", END)
    return graph


def main(mode: str, thread: str) -> None:
    client = sync.connect()
    saver = WhipCheckpointSaver(client)
    app = build(client, thread).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}}
    try:
        if mode == "start":
            app.invoke({"steps": []}, config)
        else:
            app.invoke(Command(resume="yes"), config)
    except errors.StaleWriter as err:
        print(json.dumps({"outcome": "stale_writer", "detail": str(err)}), flush=True)
        client.close()
        return
    snapshot = app.get_state(config)
    outcome = "interrupted" if snapshot.next else "done"
    print(json.dumps({"outcome": outcome, "state": snapshot.values}), flush=True)
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
