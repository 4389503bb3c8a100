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
- arguments: refused arguments (a misspelled field, a wrong type, a missing one), a team
  named `--watch`, an unknown tool, and a batch_run its checks refuse (a row with a field too
  many), the files then, and the corrected call.
- failed: a waited batch_run whose item b fails, then the team's status.
- ids: four items added, the ids todo_list gives, Alpha and Gamma resolved by id in two waited
  calls (each followed by `status` of what the answer says to follow, the workspace archived
  by then), Alpha's id again, and the inbox.
- long: a 200 KiB item added and listed.
- together: two waited batch_runs sent at once.
- background: a batch_run in the background, then the process ends without a goodbye once
  both teammates run (the team is to run on).
- warnings: a waited batch_run over rows.csv with two empty records at its end (the run
  warns that it skipped them): its answer.
- serve: a batch_run in the background with `serve: true` over gated teammates: its answer,
  the page_url fetched with its token and without, then `go` written, the team's status
  until it has ended, whether the page still listens then (asked until it does not, a
  minute at most); then the same call waited (it resumes: nothing runs) and whether its
  page still listens once it has answered.
- best_of: batch_run with a best_of or judge the CLI would refuse (a number out of range, one
  runner, an unknown judge, `stage NAME`), the files then, and a waited batch_run with
  `best_of: "2"` and `judge: score …` (each candidate's score is its number): its answer, and
  the team's status after it.
- progress: a waited batch_run with a progress callback (an item fails while the file
  fail-ITEM is there), then, without that file, the same call again, which resumes the batch:
  the progress notifications each got.
"""

import asyncio
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
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


def answer(result) -> dict:
    """A tool's answer: whether it is an error, its text, its structured content."""
    d = dumped(result)
    return {
        "isError": bool(result.is_error),
        "text": result.content[0].text if result.content else "",
        "structured": d.get("structuredContent"),
    }


async def refusal_or_error(call) -> dict:
    """A call's answer, or the protocol error it raised (its message)."""
    try:
        return answer(await call)
    except Exception as e:  # the SDK raises McpError for a JSON-RPC error
        return {"protocol_error": str(e)}


def files() -> list:
    """Every file under FOLDER but the client's own (home, tmp), relative, sorted."""
    return sorted(
        str(p.relative_to(FOLDER))
        for p in FOLDER.rglob("*")
        if p.is_file() and p.relative_to(FOLDER).parts[0] not in ("home", "tmp")
    )


async def arguments(session: ClientSession) -> dict:
    out = {"refused": {}}
    for name, tool, args in [
        ("misspelled", "batch_run", dict(batch_args(True), max_concurency=2)),
        ("wrong_type", "batch_run", dict(batch_args(True), max_concurrency="two")),
        ("text_type", "todo_add", {"text": 5, "store": "S"}),
        ("missing", "todo_add", {"store": "S"}),
        ("show_misspelled", "show", {"item": "a", "tem": "x"}),
        ("watch", "status", {"team": "--watch"}),
        ("unknown_tool", "todo_lst", {}),
    ]:
        out["refused"][name] = await refusal_or_error(session.call_tool(tool, args))
    bad_rows = FOLDER / "rows.csv"
    good = bad_rows.read_text()
    bad_rows.write_text(good + "c,z,extra\n")
    first_try = dict(batch_args(True), instruction="First look at {topic}.")
    out["checks_refused"] = await refusal_or_error(session.call_tool("batch_run", first_try))
    out["files_after_refusal"] = files()
    bad_rows.write_text(good)
    out["corrected"] = answer(await session.call_tool("batch_run", batch_args(True)))
    return out


async def failed(session: ClientSession) -> dict:
    run = answer(await session.call_tool("batch_run", batch_args(True)))
    status = answer(await session.call_tool("status", {"team": "workers-output.csv"}))
    return {"run": run, "status": status}


async def ids(session: ClientSession) -> dict:
    for title in ["Alpha", "Beta", "Gamma", "Delta"]:
        await session.call_tool("todo_add", {"text": title, "store": "S"})
    listed = answer(await session.call_tool("todo_list", {"store": "S"}))["structured"]
    id_of = {i["title"]: i["id"] for i in listed["items"]}
    resolve = lambda i: {"store": "S", "ids": [i], "command": ["sh", str(FOLDER / "agent.sh")], "wait": True}
    out = {"listed": listed, "runs": []}
    # The user confirmed items 1 and 3: Alpha and Gamma, resolved one call after the other.
    for title in ["Alpha", "Gamma"]:
        run = answer(await session.call_tool("todo_resolve", resolve(id_of[title])))
        team = (run["structured"] or {}).get("follow", {}).get("team")
        status = answer(await session.call_tool("status", {"team": team}))
        out["runs"].append({"id": id_of[title], "run": run, "status": status})
    before = files()
    out["gone"] = answer(await session.call_tool("todo_resolve", resolve(id_of["Alpha"])))
    out["unchanged"] = files() == before
    out["inbox"] = (FOLDER / "S" / "todo.md").read_text()
    return out


async def long(session: ClientSession) -> dict:
    text = "Read this log: " + "x" * (200 * 1024)
    added = answer(await session.call_tool("todo_add", {"text": text, "store": "S"}))
    listed = answer(await session.call_tool("todo_list", {"store": "S"}))
    inbox = (FOLDER / "S" / "todo.md").read_text()
    return {
        "added_error": added["isError"],
        "added_text": added["text"][:300],
        "listed_items": len((listed["structured"] or {}).get("items", [])),
        "whole_text_in_inbox": text in inbox,
    }


async def together(session: ClientSession) -> dict:
    a, b = await asyncio.gather(
        session.call_tool("batch_run", batch_args(True)),
        session.call_tool("batch_run", batch_args(True)),
    )
    instruction = FOLDER / "workers-output.instruction.md"
    return {
        "answers": [answer(a), answer(b)],
        "instruction": instruction.read_text() if instruction.exists() else None,
    }


async def warnings(session: ClientSession) -> dict:
    rows = FOLDER / "rows.csv"
    rows.write_text(rows.read_text() + ",\n,\n")
    return answer(await session.call_tool("batch_run", batch_args(True)))


async def background(session: ClientSession) -> dict:
    started = answer(await session.call_tool("batch_run", batch_args(False)))
    await both_teammates_run()
    print(json.dumps({"started": started}), flush=True)
    # Gone without closing anything: the server only sees its stdin close.
    os._exit(0)


def fetched(url: str) -> int:
    """The HTTP status of a GET of url (straight to it: no proxy of the environment)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def listens(url: str) -> bool:
    """Whether anything accepts a connection on url's port."""
    port = urllib.parse.urlsplit(url).port
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return True
    except OSError:
        return False


async def serve(session: ClientSession) -> dict:
    served = dict(batch_args(False), serve=True)
    started = answer(await session.call_tool("batch_run", served))
    url = (started["structured"] or {}).get("page_url", "")
    out = {"started": started}
    if not url:
        return out
    out["with_token"] = fetched(url)
    out["without_token"] = fetched(url.split("?")[0])
    (FOLDER / "go").write_text("")
    for _ in range(600):
        status = await session.call_tool("status", {"team": started["structured"]["workspace"]})
        if (dumped(status).get("structuredContent") or {}).get("state") != "running":
            break
        await asyncio.sleep(0.1)
    for _ in range(600):
        if not listens(url):
            break
        await asyncio.sleep(0.1)
    out["listens_after_end"] = listens(url)
    waited = answer(await session.call_tool("batch_run", dict(served, wait=True)))
    out["waited"] = waited
    waited_url = (waited["structured"] or {}).get("page_url", "")
    out["waited_listens"] = bool(waited_url) and listens(waited_url)
    return out


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


async def best_of(session: ClientSession) -> dict:
    out = {"refused": {}}
    for name, extra in [
        ("too_many", {"best_of": "9"}),
        ("a_number", {"best_of": 2}),
        ("one_runner", {"best_of": "claude"}),
        ("unknown_judge", {"best_of": "2", "judge": "fastest"}),
        ("stage_judge", {"best_of": "2", "judge": "stage pick"}),
    ]:
        call = session.call_tool("batch_run", dict(batch_args(True), **extra))
        out["refused"][name] = await refusal_or_error(call)
    out["files_after_refusals"] = files()
    judged = dict(batch_args(True), best_of="2", judge="score sh -c 'echo $RUNNER_CANDIDATE'")
    out["run"] = answer(await session.call_tool("batch_run", judged))
    out["status"] = answer(await session.call_tool("status", {"team": "workers-output.csv"}))
    return out


SCENARIOS = {
    "best_of": best_of,
    "arguments": arguments,
    "failed": failed,
    "ids": ids,
    "long": long,
    "together": together,
    "background": background,
    "serve": serve,
    "warnings": warnings,
}


async def main() -> None:
    server = StdioServerParameters(
        command=RUNNER,
        args=["mcp"],
        cwd=str(FOLDER),
        env={
            "HOME": str(FOLDER / "home"),
            "TMPDIR": str(FOLDER / "tmp"),
            "NO_COLOR": "1",
            # No repository above the test's folder counts (a stray /tmp/.git).
            "GIT_CEILING_DIRECTORIES": str(FOLDER.parent),
        },
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
            elif SCENARIO in SCENARIOS:
                out = await SCENARIOS[SCENARIO](session)
            elif SCENARIO == "progress":
                out = await progress(session)
            else:
                raise SystemExit(f"unknown scenario {SCENARIO}")
    print(json.dumps(out), flush=True)


asyncio.run(main())
