"""The MCP server over streamable HTTP: every request needs a key, and the key decides the account."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import soulpass
from soulpass.mcp.server import http_app
from soulpass.server.keys import FileKeyStore, KeyStore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, KeyStore, soulpass.Soulpass]]:
    home = tmp_path / "home"
    sp = soulpass.open(home, embedder="none")
    for name in ("ann", "bob"):
        sp.create_account(name)
    keys = FileKeyStore(home)
    port = _free_port()
    failed_keys = getattr(request, "param", 0)  # the wrong-key limit; off unless a test asks for one
    app = http_app(sp, keys, failed_keys=failed_keys)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the MCP HTTP server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", keys, sp
    server.should_exit = True
    thread.join(timeout=10)


@asynccontextmanager
async def _client(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def test_keys_decide_the_account(served: tuple[str, KeyStore, soulpass.Soulpass]) -> None:
    url, keys, sp = served
    ann, bob, admin = keys.create("ann").secret, keys.create("bob").secret, keys.create(None).secret

    async def run() -> None:
        async with _client(url, {"Authorization": f"Bearer {ann}"}) as client:
            assert "remember" in {t.name for t in (await client.list_tools()).tools}
            made = _data(await client.call_tool("remember", {"what": "turn", "text": "ann's hidden note"}))
            hits = _data(await client.call_tool("rag_search", {"query": "hidden note"}))["hits"]
            assert [h["id"] for h in hits] == [made["id"]]
        async with _client(url, {"Authorization": f"Bearer {bob}"}) as client:
            hits = _data(await client.call_tool("rag_search", {"query": "hidden note"}))["hits"]
            assert hits == []  # bob's session sees nothing of ann's
            bad = await client.call_tool("remember", {"what": "turn", "text": "x", "sandbox_id": made["sandbox_id"]})
            assert bad.is_error and "ann" not in bad.content[0].text  # type: ignore[union-attr]
        async with _client(url, {"Authorization": f"Bearer {admin}", "X-Soulpass-Account": "ann"}) as client:
            assert _data(await client.call_tool("archive_session", {}))["status"] == "committed"

    anyio.run(run)
    assert sp.account("ann").head() == 1 and sp.account("bob").head() == 0
    assert [r.text for r in sp.account("ann").records("turn_user")] == ["ann's hidden note"]


def test_resources_show_the_keys_account(served: tuple[str, KeyStore, soulpass.Soulpass]) -> None:
    url, keys, sp = served
    acct = sp.account("ann")
    sb = acct.create_sandbox("s")
    sb.update_profile({"city": "Ghent"})
    acct.archive(sb.id)
    ann, bob = keys.create("ann").secret, keys.create("bob").secret

    async def read(key: str, uri: str) -> Any:
        async with _client(url, {"Authorization": f"Bearer {key}"}) as client:
            return json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]

    async def run() -> None:
        assert (await read(ann, "soulpass://identity"))["profile"]["fields"]["city"] == "Ghent"
        assert [v["version"] for v in await read(ann, "soulpass://log")] == [1]
        assert "Ghent" not in json.dumps(await read(bob, "soulpass://identity"))
        assert await read(bob, "soulpass://log") == []

    anyio.run(run)


ARGS: dict[str, dict[str, Any]] = {
    "rag_search": {"query": "hidden note"}, "remember": {"what": "turn", "text": "x"},
    "manage_clipboard": {"action": "show"}, "get_context": {"message": "hidden note"},
    "create_sandbox": {}, "archive_session": {"dry_run": True}, "preview_archive": {}, "discard_session": {},
    "approve_archive": {"sandbox_id": "sb_none_of_bobs"}, "memory_log": {},
    "import_memories": {"source": "jsonl", "content": "", "dry_run": True},
    "edit_memory": {"record_id": "TU_20200101_001", "fields": {"text_excerpt": "x"}},
    "memory_history": {"record_id": "TU_20200101_001"},
    "forget_memory": {"reason": "asked", "query": "hidden note", "dry_run": True},
    "export_account": {}, "delete_account": {"confirm": "ann"},  # acts for bob: refused, deletes nothing
    "get_memory": {"ref": "core"}, "list_memories": {"kind": "turn_user"}, "search_memory": {"query": "hidden note"},
    "memory_diff": {"a": 0, "b": 0}, "rollback_memory": {"version": 0},
    "add_journal_entry": {"text": "bob's own entry"}, "read_identity": {},
    "propose_core": {"section": "values", "value": "curiosity", "reason": "said so"},
    "update_profile": {"data": {"city": "Ghent"}},
}


def test_every_tool_keeps_to_the_keys_account(served: tuple[str, KeyStore, soulpass.Soulpass]) -> None:
    url, keys, sp = served
    ann, bob = keys.create("ann").secret, keys.create("bob").secret
    secret = "annsecret5521"
    sb = sp.account("ann").create_sandbox("mcp")
    sb.add_turn("user", f"the hidden note says {secret}")

    async def run() -> None:
        async with _client(url, {"Authorization": f"Bearer {bob}"}) as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            assert set(schemas) == set(ARGS), "a new tool: add its arguments to ARGS"
            for name, schema in sorted(schemas.items()):
                takes_sandbox = "sandbox_id" in schema.get("properties", {})
                for extra in ({"sandbox_id": sb.id}, {}) if takes_sandbox else ({},):
                    result = await client.call_tool(name, {**ARGS[name], **extra})
                    text = json.dumps([c.model_dump() for c in result.content])
                    assert secret not in text, (name, text)
                    if extra:  # ann's sandbox named with bob's key: not found in bob's account
                        assert result.is_error and not re.search(r"\bann\b", text), (name, text)
        async with _client(url, {"Authorization": f"Bearer {ann}"}) as client:
            hits = (await client.call_tool("rag_search", {"query": secret})).structured_content["hits"]
            assert secret in hits[0]["text"]

    anyio.run(run)
    assert sp.account("ann").head() == 0
    assert secret in sp.account("ann").sandbox(sb.id).buffer().model_dump_json()


@pytest.mark.parametrize("served", [5], indirect=True)
def test_failed_key_attempts_are_limited_per_address(served: tuple[str, KeyStore, soulpass.Soulpass]) -> None:
    """The same wrong-key limiter as REST and /ui (issue 38 item 6): 5 wrong keys, then 429 with
    Retry-After, even for a good key, for a while; a request with no key at all is not counted."""
    url, keys, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert [httpx2.post(url, json=body).status_code for _ in range(8)] == [401] * 8
    bad = {"Authorization": "Bearer sp_00000000_" + "x" * 43}
    codes = [httpx2.post(url, json=body, headers=bad).status_code for _ in range(7)]
    assert codes == [401] * 5 + [429] * 2
    good = {"Authorization": f"Bearer {keys.create('ann').secret}"}
    r = httpx2.post(url, json=body, headers=good)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert r.json()["error"] == "RateLimited" and "failed API key attempts" in r.json()["message"]


def test_no_key_is_401(served: tuple[str, KeyStore, soulpass.Soulpass]) -> None:
    url, keys, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer sp_00000000_" + "x" * 43}):
        r = httpx2.post(url, json=body, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    admin = keys.create(None).secret
    r = httpx2.post(url, json=body, headers={"Authorization": f"Bearer {admin}"})
    assert r.status_code == 400 and "X-Soulpass-Account" in r.text
