"""The MCP server over stdio, driven by the official ``mcp`` Python client: list tools, remember,
rag_search finds it, manage_clipboard changes what get_context returns, archive and log."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import soulpass
from soulpass.mcp.server import TOOL_NAMES


def _server(home: Path, account: str) -> StdioServerParameters:
    code = "from soulpass.cli.main import main; main()"
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "--home", str(home), "mcp", "--account", account, "--embedder", "none"],
        env={"SOULPASS_HOME": "", "SOULPASS_ACCOUNT": "", "PATH": "/usr/bin:/bin",
             "PYTHONPATH": os.environ.get("PYTHONPATH", "")},  # the sources under test, not the installed ones
    )


async def _call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {result.content}"
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


def test_mcp_over_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann")

    async def session() -> None:
        async with Client(_server(home, "ann"), read_timeout_seconds=60) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert set(TOOL_NAMES) <= tools

            made = await _call(client, "remember", {"what": "turn", "text": "My sister Ilse lives in Ghent"})
            assert made["id"].startswith("tu_temp_")
            sid = made["sandbox_id"]
            fact = await _call(client, "remember", {"what": "fact", "text": "Ilse likes rowing",
                                                    "confidence": 0.95})
            assert fact["id"].startswith("sf_temp_") and fact["sandbox_id"] == sid
            journal = await _call(client, "remember", {"what": "journal", "title": "Family",
                                                       "text": "Thought about Ilse and Ghent today."})
            assert journal["sandbox_id"] == sid

            found = await _call(client, "rag_search", {"query": "Where does Ilse live?"})
            assert "Ghent" in found["hits"][0]["text"], found
            assert made["id"] in [h["id"] for h in found["hits"]]

            said = await _call(client, "remember", {"what": "turn", "agent": "eva", "speaker": "eva",
                                                    "text": "I will water the ferns on Sunday"})
            assert said["id"].startswith("tl_temp_")
            before = await _call(client, "get_context", {"message": "plan the weekend", "agent": "eva"})
            assert "water the ferns" in before["text"]  # the agent's own log is in its context
            assert "bring the blue umbrella" not in before["text"]
            pinned = await _call(client, "manage_clipboard", {"action": "add", "agent": "eva",
                                                              "item": "bring the blue umbrella"})
            assert pinned["items"] == ["bring the blue umbrella"]
            after = await _call(client, "get_context", {"message": "plan the weekend", "agent": "eva"})
            assert "bring the blue umbrella" in after["text"]
            await _call(client, "manage_clipboard", {"action": "clear", "agent": "eva"})
            cleared = await _call(client, "get_context", {"message": "plan the weekend", "agent": "eva"})
            assert "bring the blue umbrella" not in cleared["text"]

            bad = await client.call_tool("remember", {"what": "turn", "text": "x", "sandbox_id": "../../etc"})
            assert bad.is_error and "sandbox id" in bad.content[0].text  # type: ignore[union-attr]
            assert str(home) not in bad.content[0].text  # type: ignore[union-attr]

            done = await _call(client, "archive_session", {})
            assert done["status"] == "committed" and done["version"] == 1 and done["sandbox_id"] == sid
            log = await _call(client, "memory_log", {})
            assert log[0]["version"] == 1 and log[0]["source_sandbox"] == sid

            other = await _call(client, "create_sandbox", {"name": "scratch"})
            await _call(client, "remember", {"what": "turn", "text": "throw me away", "sandbox_id":
                                             other["sandbox_id"]})
            gone = await _call(client, "discard_session", {"sandbox_id": other["sandbox_id"]})
            assert gone["status"] == "discarded"

    anyio.run(session)
    acct = soulpass.open(home, embedder="none").account("ann")
    assert acct.head() == 1
    texts = [r.text for r in acct.records("turn_user")]
    assert texts == ["My sister Ilse lives in Ghent"]
    assert acct.sandboxes() == []


def test_resources_and_the_prompt_over_stdio(tmp_path: Path) -> None:
    """The account's identity and recent log are listed resources a client reads; the prompt
    ``use_memory`` tells an agent how to use its memory; every tool carries its hints."""
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann")

    async def session() -> None:
        async with Client(_server(home, "ann"), read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            assert all(t.annotations is not None and t.annotations.read_only_hint is not None for t in tools)
            await _call(client, "update_profile", {"data": {"name": "Ann", "city": "Ghent"}})
            await _call(client, "remember", {"what": "turn", "text": "I started rowing"})
            assert (await _call(client, "archive_session", {}))["version"] == 1

            listed = {str(r.uri): r for r in (await client.list_resources()).resources}
            assert {"soulpass://identity", "soulpass://log"} <= set(listed)
            assert all(listed[u].description and listed[u].mime_type == "application/json"
                       for u in ("soulpass://identity", "soulpass://log"))
            identity = json.loads((await client.read_resource("soulpass://identity")).contents[0].text)  # type: ignore[union-attr]
            assert identity["version"] == 1 and identity["profile"]["fields"]["city"] == "Ghent"
            log = json.loads((await client.read_resource("soulpass://log")).contents[0].text)  # type: ignore[union-attr]
            assert [v["version"] for v in log] == [1] and log[0]["added"]["turn_user"] == 1

            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert "use_memory" in prompts and prompts["use_memory"].description
            got = await client.get_prompt("use_memory", {"agent": "eva"})
            text = got.messages[0].content.text  # type: ignore[union-attr]
            assert 'agent "eva"' in text
            for tool in ("get_context", "search_memory", "remember", "archive_session", "forget_memory"):
                assert f"`{tool}`" in text and tool in {t.name for t in tools}, tool

    anyio.run(session)
