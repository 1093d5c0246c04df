"""An agent's day over MCP, with the official client, checking every answer (issue 16 "Done when").

    python examples/mcp_agent_day.py --home /tmp/day --transport stdio
    python examples/mcp_agent_day.py --home /tmp/day --transport http

It starts ``soulpass mcp`` itself (stdio, or streamable HTTP on a free port with a new API key) on a
fresh account, then: creates a session, remembers a turn and a fact, finds them at once, builds a
context, archives, edits the turn, reads the log, diffs, rolls back, and reads the clipboard and
core memory resources. Prints one line per step; exits 1 at the first wrong answer.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ACCOUNT = "day"


def soulpass(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", "from soulpass.cli.main import main; main()", "--home", str(home), *args]


class Wrong(Exception):
    """An answer that is not what the step expects."""


def check(ok: bool, step: str, got: Any) -> None:
    if not ok:
        raise Wrong(f"{step}: unexpected answer {json.dumps(got, default=str)[:600]}")
    print(f"ok  {step}")


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise Wrong(f"{tool} failed: {result.content}")
    data = result.structured_content
    if data is None:
        raise Wrong(f"{tool} gave no structured content")
    return data["result"] if set(data) == {"result"} else data


async def day(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    check({"create_sandbox", "remember", "search_memory", "get_context", "edit_memory", "memory_log",
           "memory_diff", "rollback_memory"} <= names, "the tools are listed", sorted(names))
    sb = await call(client, "create_sandbox", {"name": "morning"})
    turn = await call(client, "remember", {"what": "turn", "text": "I moved to Lyon in May, near the river"})
    check(turn["sandbox_id"] == sb["sandbox_id"], "remember writes into the created sandbox", turn)
    fact = await call(client, "remember", {"what": "fact", "subject": "Ann", "predicate": "lives_in",
                                           "object": "Lyon", "text": "", "confidence": 0.95})
    check(fact["sandbox_id"] == sb["sandbox_id"], "a fact goes to the same session", fact)
    found = await call(client, "search_memory", {"query": "where does Ann live now?"})
    check(any("Lyon" in h["text"] for h in found["hits"]), "search finds what was just remembered", found)
    context = await call(client, "get_context", {"message": "Where do I live?", "budget_tokens": 1500})
    check("Lyon" in context["text"] and "No matching" not in context["text"], "context holds it, no noise",
          context)
    await call(client, "manage_clipboard", {"action": "add", "item": "ask about the new flat"})
    pinned = await client.read_resource("soulpass://clipboard/agent")
    check("ask about the new flat" in str(pinned.contents[0]), "the clipboard resource shows the pin", pinned)
    done = await call(client, "archive_session", {})
    check(done["status"] == "committed" and done["version"] == 1, "archive commits version 1", done)
    turns = await call(client, "list_memories", {"kind": "turn_user"})
    check(turns["total"] == 1 and "Lyon" in turns["items"][0]["text_excerpt"], "list shows the turn", turns)
    rid = turns["items"][0]["id"]
    edited = await call(client, "edit_memory", {"record_id": rid, "fields": {"text_excerpt": "I moved to Lyon "
                                                "in June, near the river"}, "reason": "the user corrected it"})
    check(edited["version"] == 2, "edit writes version 2", edited)
    log = await call(client, "memory_log", {"limit": 5})
    check([e["version"] for e in log] == [2, 1] and log[0]["kind"] == "edit", "the log shows the edit", log)
    diff = await call(client, "memory_diff", {"a": 1, "b": 2})
    check(rid in json.dumps(diff), "the diff names the edited turn", diff)
    got = await call(client, "get_memory", {"ref": rid})
    check("June" in got["text_excerpt"], "get shows the edited text", got)
    back = await call(client, "rollback_memory", {"version": 1})
    check(back["version"] == 3, "rollback writes version 3", back)
    got = await call(client, "get_memory", {"ref": rid})
    check("May" in got["text_excerpt"], "after the rollback the turn reads as before", got)
    old = await call(client, "get_memory", {"ref": rid, "at": 2})
    check("June" in old["text_excerpt"], "version 2 still reads as edited", old)
    core = await client.read_resource("soulpass://memory/core")
    check('"kind": "core_memory"' in str(core.contents[0]), "the core memory resource reads", core)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def connect(home: Path, transport: str) -> AsyncIterator[Client]:
    env = {**os.environ, "SOULPASS_HOME": "", "SOULPASS_ACCOUNT": ""}
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=soulpass(home, "mcp", "--account", ACCOUNT,
                                                                             "--embedder", "none")[1:], env=env)
        async with Client(params, read_timeout_seconds=60) as client:
            yield client
        return
    key = subprocess.run(soulpass(home, "key", "create", ACCOUNT), check=True, capture_output=True,
                         env=env).stdout.decode().split()[0]
    port = free_port()
    server = subprocess.Popen(soulpass(home, "mcp", "--transport", "http", "--port", str(port), "--embedder", "none"),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise Wrong("the HTTP server did not start") from None
                time.sleep(0.1)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            yield client
    finally:
        server.terminate()
        server.wait(timeout=30)


async def run(home: Path, transport: str) -> None:
    async with connect(home, transport) as client:
        await day(client)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="A home folder (the account 'day' is made there)")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    args = parser.parse_args()
    subprocess.run(soulpass(args.home, "account", "create", ACCOUNT), check=True, capture_output=True,
                   env={**os.environ, "SOULPASS_HOME": ""})
    try:
        anyio.run(run, args.home, args.transport)
    except Wrong as exc:
        print(f"WRONG {exc}", file=sys.stderr)
        return 1
    print(f"an agent's day over {args.transport}: every answer right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
