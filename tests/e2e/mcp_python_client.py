"""A lead's side of `runner mcp`, through the official MCP Python SDK (`mcp`, pinned and
installed by .ci/run in target/e2e-mcp-python/venv). Driven by tests/e2e/mcp_python.rs:

    python mcp_python_client.py SCENARIO RUNNER_BINARY FOLDER

starts `RUNNER_BINARY mcp` in FOLDER over stdio (the SDK's `stdio_client`), plays SCENARIO and
prints one JSON object on stdout, which the Rust test reads; the test checks the files and
processes the scenario leaves. Scenarios:

- tools: list the tools (name, title, annotations, whether an output schema is declared),
  the server's name and version, then todo_add and todo_list (the SDK checks each result's
  structuredContent against the tool's outputSchema, and raises when it does not match).
- cancel: a waited batch_run over sleeping teammates, abandoned once both run (the SDK sends
  notifications/cancelled), then the team's state until it is no longer running.
- disconnect: a waited batch_run over sleeping teammates, then the process ends without a
  goodbye once both run (the server's stdin closes under it).
- progress: a waited batch_run with a progress callback (an item fails while the file
  fail-ITEM is there), then, without that file, the same call again, which resumes the batch:
  the progress notifications each got.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

SCENARIO, RUNNER, FOLDER = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def batch_args(wait: bool) -> dict:
    """batch_run over FOLDER/rows.csv with FOLDER/agent.sh."""
    return {
        "csv_path": "rows.csv",
        "instruction": "Look at {topic}.",
        "id_column": "id",
        "command": ["sh", str(FOLDER / "agent.sh")],
        "wait": wait,
    }


def dumped(model) -> dict:
    """A result or a tool as its JSON (the wire's names)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def both_teammates_run() -> None:
    """Until the sleeping agent has written a.pid and b.pid."""
    while not ((FOLDER / "a.pid").exists() and (FOLDER / "b.pid").exists()):
        await asyncio.sleep(0.05)


async def tools(session: ClientSession, init) -> dict:
    listed = await session.list_tools()
    out = {
        "server": dumped(init)["serverInfo"],
        "tools": [
            {
                "name": t.name,
                "title": dumped(t).get("title"),
                "annotations": dumped(t).get("annotations"),
                "has_output_schema": dumped(t).get("outputSchema") is not None,
            }
            for t in listed.tools
        ],
    }
    added = await session.call_tool("todo_add", {"text": "Audit the lexer", "store": "S"})
    listing = await session.call_tool("todo_list", {"store": "S"})
    out["added"] = dumped(added).get("structuredContent")
    out["listing"] = dumped(listing).get("structuredContent")
    refused = await session.call_tool("todo_add", {"txt": "typo", "store": "S"})
    out["refused"] = {"isError": refused.is_error, "text": refused.content[0].text}
    return out


async def cancel(session: ClientSession) -> dict:
    call = asyncio.create_task(session.call_tool("batch_run", batch_args(True)))
    await both_teammates_run()
    call.cancel()
    try:
        await call
    except asyncio.CancelledError:
        pass
    # The server goes on: ask for the team's state until it has stopped (a minute at most).
    for _ in range(600):
        status = await session.call_tool("status", {"team": "workers-output.csv"})
        state = (dumped(status).get("structuredContent") or {}).get("state")
        if state != "running":
            break
        await asyncio.sleep(0.1)
    return {"status": dumped(status).get("structuredContent")}


async def disconnect(session: ClientSession) -> dict:
    asyncio.create_task(session.call_tool("batch_run", batch_args(True)))
    await both_teammates_run()
    print(json.dumps({"disconnected": True}), flush=True)
    # Gone without closing anything: no SDK shutdown, the server only sees its stdin close.
    os._exit(0)


async def progress(session: ClientSession) -> dict:
    out = {}
    for run in ["first", "resumed"]:
        seen = []

        async def on_progress(done, total, message):
            seen.append({"progress": done, "total": total, "message": message})

        result = await session.call_tool("batch_run", batch_args(True), progress_callback=on_progress)
        out[run] = {"result": dumped(result).get("structuredContent"), "progress": seen}
        for failing in FOLDER.glob("fail-*"):
            failing.unlink()
    return out


async def main() -> None:
    server = StdioServerParameters(
        command=RUNNER,
        args=["mcp"],
        cwd=str(FOLDER),
        env={"HOME": str(FOLDER / "home"), "TMPDIR": str(FOLDER / "tmp"), "NO_COLOR": "1"},
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            if SCENARIO == "tools":
                out = await tools(session, init)
            elif SCENARIO == "cancel":
                out = await cancel(session)
            elif SCENARIO == "disconnect":
                out = await disconnect(session)
            elif SCENARIO == "progress":
                out = await progress(session)
            else:
                raise SystemExit(f"unknown scenario {SCENARIO}")
    print(json.dumps(out), flush=True)


asyncio.run(main())
