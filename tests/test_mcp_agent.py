"""MCP an agent can live in (issue 16, item 1): writes go where the agent said, sessions archive
by themselves, the tools a memory needs with described parameters and hints, resources, a quiet
context, and an agent's whole day with the official client over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import soulpass
from soulpass.engine import Soulpass
from soulpass.errors import InvalidInput
from soulpass.mcp.server import TOOL_NAMES, build_server
from soulpass.mcp.sessions import AutoArchive, SessionKeeper
from soulpass.pool import AccountPool
from test_mcp_stdio import _call, _server

ROOT = Path(__file__).resolve().parents[1]
READ_ONLY = {"preview_archive", "memory_log", "memory_history", "get_memory", "list_memories", "search_memory",
             "memory_diff", "read_identity"}
DESTRUCTIVE = {"rollback_memory", "discard_session", "forget_memory", "delete_account"}
IDEMPOTENT = {"get_context", "archive_session", "approve_archive", "discard_session", "export_account",
              "import_memories", "forget_memory", "add_journal_entry", "update_profile"}


@pytest.fixture
def engine(tmp_path: Path) -> Soulpass:
    sp = soulpass.open(tmp_path / "home", embedder="none")
    sp.create_account("ann")
    return sp


def _run(engine: Soulpass, body: Any, policy: AutoArchive | None = None) -> None:
    async def session() -> None:
        async with Client(build_server(engine, "ann", policy), read_timeout_seconds=60) as client:
            await body(client)

    anyio.run(session)


def test_every_parameter_is_described_and_hints_are_set(engine: Soulpass) -> None:
    async def body(client: Client) -> None:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(TOOL_NAMES) == set(listed)
        for name, tool in listed.items():
            for param, schema in tool.input_schema.get("properties", {}).items():
                assert schema.get("description"), f"{name}.{param} has no description"
            hints = tool.annotations  # every hint stated: a client's defaults assume the worst
            assert hints is not None and hints.read_only_hint == (name in READ_ONLY), name
            assert hints.open_world_hint is False, name
            if name not in READ_ONLY:
                assert hints.destructive_hint == (name in DESTRUCTIVE), name
                assert hints.idempotent_hint == (name in IDEMPOTENT), name
            assert tool.output_schema is not None, f"{name} has no structured output"
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"soulpass://clipboard/{agent}", "soulpass://memory/{document}"} <= templates

    _run(engine, body)


def test_writes_go_to_the_session_the_agent_made_and_are_found_at_once(engine: Soulpass) -> None:
    async def body(client: Client) -> None:
        made = await _call(client, "create_sandbox", {"name": "planning"})
        turn = await _call(client, "remember", {"what": "turn", "text": "the boat trip is on the ninth"})
        assert turn["sandbox_id"] == made["sandbox_id"]  # not a new session named "mcp"
        found = await _call(client, "search_memory", {"query": "boat trip"})
        assert found["sandbox_id"] == made["sandbox_id"] and turn["id"] in [h["id"] for h in found["hits"]]
        other = await _call(client, "create_sandbox", {"name": "mcp"})
        note = await _call(client, "remember", {"what": "journal", "text": "a note", "tags": ["boats"]})
        assert note["sandbox_id"] == other["sandbox_id"]
        named = await _call(client, "remember", {"what": "turn", "text": "back to planning",
                                                 "sandbox_id": made["sandbox_id"]})
        again = await _call(client, "remember", {"what": "turn", "text": "still planning"})
        assert named["sandbox_id"] == again["sandbox_id"] == made["sandbox_id"]  # naming one makes it current
        assert (await _call(client, "search_memory", {"query": "boat trip", "at": 0}))["hits"] == []

    _run(engine, body)
    assert sorted(i.name for i in engine.account("ann").sandboxes()) == ["mcp", "planning"]


def test_a_session_archives_itself_every_n_writes(engine: Soulpass) -> None:
    async def body(client: Client) -> None:
        first = await _call(client, "remember", {"what": "turn", "text": "one"})
        assert "auto_archived" not in first
        second = await _call(client, "remember", {"what": "turn", "text": "two"})
        assert second["auto_archived"]["status"] == "committed" and second["auto_archived"]["version"] == 1
        third = await _call(client, "remember", {"what": "turn", "text": "three"})
        assert third["sandbox_id"] != first["sandbox_id"]  # a new session after the archive

    _run(engine, body, AutoArchive(every=2, idle=None))
    acct = engine.account("ann")
    assert acct.head() == 1 and sorted(r.text_excerpt for r in acct.records("turn_user")) == ["one", "two"]


def test_idle_sessions_are_archived_and_empty_ones_commit_nothing(engine: Soulpass) -> None:
    now = [0.0]
    keeper = SessionKeeper(AccountPool(engine), AutoArchive(idle=60), clock=lambda: now[0])
    acct = engine.account("ann")
    busy, quiet = acct.create_sandbox("busy"), acct.create_sandbox("quiet")
    busy.add_turn("user", "written before going idle")
    keeper.wrote("ann", busy.id)
    keeper.wrote("ann", quiet.id)  # a write that stored nothing new: its archive commits no version
    now[0] = 59
    assert keeper.archive_idle() == []
    now[0] = 61
    done = {r["sandbox_id"]: r for r in keeper.archive_idle()}
    assert done[busy.id]["status"] == "committed" and done[quiet.id]["status"] == "unchanged"
    assert acct.head() == 1 and acct.sandboxes() == []
    assert keeper.archive_idle() == [] and keeper.close() == []


def test_policy_is_checked() -> None:
    with pytest.raises(InvalidInput, match="N >= 1"):
        AutoArchive(every=0)
    with pytest.raises(InvalidInput, match="positive"):
        AutoArchive(idle=-1)
    assert AutoArchive.from_env({"SOULPASS_MCP_ARCHIVE_EVERY": "5", "SOULPASS_MCP_ARCHIVE_IDLE": "0",
                                 "SOULPASS_MCP_ARCHIVE_ON_CLOSE": "0"}) == AutoArchive(5, None, False)


def test_the_stdio_server_archives_on_close(tmp_path: Path) -> None:
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann")

    async def session() -> None:
        async with Client(_server(home, "ann"), read_timeout_seconds=60) as client:
            await _call(client, "remember", {"what": "turn", "text": "kept although nobody archived"})

    anyio.run(session)
    acct = soulpass.open(home, embedder="none").account("ann")
    assert acct.head() == 1 and [r.text_excerpt for r in acct.records("turn_user")] == [
        "kept although nobody archived"]


def test_reading_tools_resources_and_a_quiet_context(engine: Soulpass) -> None:
    async def body(client: Client) -> None:
        nothing = await _call(client, "rag_search", {"query": "submarines"})
        assert nothing["hits"] == []
        context = await _call(client, "get_context", {"message": "hello"})
        assert "No matching" not in context["text"] and "rag_search" not in context["text"]
        for n in range(3):
            await _call(client, "remember", {"what": "turn", "text": f"turn number {n}"})
        await _call(client, "propose_core", {"section": "values", "value": "honesty", "reason": "stated",
                                             "confidence": 0.95})
        await _call(client, "update_profile", {"data": {"city": "Ghent"}})
        assert (await _call(client, "archive_session", {}))["version"] == 1
        page = await _call(client, "list_memories", {"kind": "turn_user", "limit": 2})
        assert [t["text_excerpt"] for t in page["items"]] == ["turn number 2", "turn number 1"]
        assert page["total"] == 3 and page["next_offset"] == 2
        rest = await _call(client, "list_memories", {"kind": "turn_user", "limit": 2, "offset": 2})
        assert [t["text_excerpt"] for t in rest["items"]] == ["turn number 0"] and rest["next_offset"] is None
        ident = await _call(client, "read_identity", {})
        assert ident["profile"]["fields"]["city"] == "Ghent"
        entry = await _call(client, "add_journal_entry", {"text": "A quiet day.", "tags": ["calm"]})
        assert entry["version"] == 2 and entry["stored"]
        shown = await _call(client, "get_memory", {"ref": entry["id"]})
        assert shown["text"] == "A quiet day."
        diff = await _call(client, "memory_diff", {"a": 1, "b": 2})
        assert entry["path"] in json.dumps(diff)
        profile = await client.read_resource("soulpass://memory/profile")
        assert "Ghent" in profile.contents[0].text  # type: ignore[union-attr]
        bad = await client.call_tool("get_memory", {"ref": "TU_20200101_001"})
        assert bad.is_error and "TU_20200101_001" in bad.content[0].text  # type: ignore[union-attr]

    _run(engine, body)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_agents_day_with_the_official_client(tmp_path: Path, transport: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "mcp_agent_day.py"), "--home",
                           str(tmp_path / "home"), "--transport", transport], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every answer right" in done.stdout and "WRONG" not in done.stderr


def test_remember_validates_in_one_line_and_stores_who_spoke(engine: Soulpass) -> None:
    """A fact by subject/predicate/object needs no ``text``; a bad argument is one ``InvalidInput``
    line (no pydantic dump, no URL); a user's turn is not filed under a placeholder agent."""

    async def body(client: Client) -> None:
        spo = await _call(client, "remember", {"what": "fact", "subject": "Ilse", "predicate": "lives_in",
                                               "object": "Ghent"})
        assert spo["id"].startswith("sf_temp_")
        for args, field in (({"what": "fact", "confidence": 2.0, "text": "Ilse rows"}, "confidence"),
                            ({"what": "poem", "text": "x"}, "what"),
                            ({"what": "turn"}, "text"),
                            ({"what": "fact", "subject": "Ilse"}, "subject")):
            bad = await client.call_tool("remember", args)
            text = bad.content[0].text  # type: ignore[union-attr]
            assert bad.is_error and "InvalidInput: " in text and field in text, (args, text)
            assert "\n" not in text and "http" not in text and "pydantic" not in text, text
        await _call(client, "remember", {"what": "turn", "text": "I moved to Ghent"})
        await _call(client, "remember", {"what": "turn", "text": "Ghent suits you", "speaker": "eva"})
        await _call(client, "remember", {"what": "turn", "text": "Thanks, eva", "agent": "eva"})
        await _call(client, "archive_session", {})

    _run(engine, body)
    acct = engine.account("ann")
    agents = {r.text_excerpt: r.agent for r in [*acct.records("turn_user"), *acct.records("turn_llm")]}
    assert agents == {"I moved to Ghent": None, "Ghent suits you": "eva", "Thanks, eva": "eva"}
    (fact,) = list(acct.records("fact"))
    assert (fact.subject, fact.predicate, fact.object) == ("Ilse", "lives_in", "Ghent")


def test_docs_table_has_one_row_per_tool() -> None:
    """docs/mcp.md's tool table: every tool exactly once, inside the table, and nothing else."""
    import re

    text = (ROOT / "docs" / "mcp.md").read_text()
    table = text[text.index("| tool | arguments | does |"):]
    table = table[:table.index("\n\n")]
    rows = re.findall(r"^\| `(\w+)`", table, flags=re.M)
    assert sorted(rows) == sorted(TOOL_NAMES), set(rows) ^ set(TOOL_NAMES)
    outside = text.replace(table, "")
    assert not re.search(r"^\| `(" + "|".join(TOOL_NAMES) + r")`", outside, flags=re.M)
