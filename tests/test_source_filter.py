"""The ``source`` search filter: what one importer or tool brought in (its tag ``source:<source>``),
on the home folder and PostgreSQL, in a sandbox's buffer, and through the CLI, REST and MCP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

import soulpass
from postgres_helpers import postgres_url
from server_world import UNLIMITED
from soulpass.cli.main import cli
from soulpass.engine import Account, Soulpass
from soulpass.importers.sources import import_from
from soulpass.mcp.server import build_server
from soulpass.server.app import create_app
from soulpass.server.keys import FileKeyStore
from test_importers import chatgpt_export, mem0_export
from test_mcp_stdio import _call

QUERY = "Lisbon"


def _fill(sp: Soulpass, tmp_path: Path) -> Account:
    """Lisbon from ChatGPT (turns), from Mem0 (a sensory record and a fact) and from a journal entry
    that no importer wrote."""
    acct = sp.create_account("ann")
    import_from(acct, "chatgpt", chatgpt_export(tmp_path / "conversations.json"))
    import_from(acct, "mem0", mem0_export(tmp_path / "mem0.json"))
    sb = acct.create_sandbox("notes")
    sb.add_journal("Lisbon again next spring: book the flat early.", title="Lisbon")
    sb.archive()
    return acct


@pytest.fixture(params=["files", "postgres"])
def acct(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Account]:
    if request.param == "files":
        yield _fill(soulpass.open(tmp_path / "home", embedder="none"), tmp_path)
        return
    for url in postgres_url(tmp_path):
        account = _fill(soulpass.open(url, embedder="none"), tmp_path)
        yield account
        account.close()


def _sources(hits: Any) -> list[tuple[str, ...]]:
    return [tuple(t for t in h.row.tags if t.startswith("source:")) for h in hits]


def test_a_search_by_source_finds_only_that_sources_records(acct: Account) -> None:
    every = acct.search(QUERY, 20)
    assert {s for tags in _sources(every) for s in tags} == {"source:chatgpt", "source:mem0"}
    assert () in _sources(every)  # the journal entry, which no importer wrote
    for source in ("chatgpt", "mem0"):
        hits = acct.search(QUERY, 20, source=source)
        assert hits and all(tags == (f"source:{source}",) for tags in _sources(hits)), source
        expected = {h.id for h, tags in zip(every, _sources(every), strict=True) if f"source:{source}" in tags}
        assert {h.id for h in hits} == expected
        # The same rows, in the same order, as the tag it reads; the search without it is unchanged.
        assert [h.id for h in hits] == [h.id for h in acct.search(QUERY, 20, tags=[f"source:{source}"])]
    assert list(acct.search(QUERY, 20, source="claude")) == []
    assert [h.id for h in acct.search(QUERY, 20, source=None)] == [h.id for h in every]


def test_a_sandbox_search_by_source_passes_its_buffer_rows_by_their_tag(tmp_path: Path) -> None:
    acct = _fill(soulpass.open(tmp_path / "home", embedder="none"), tmp_path)
    sb = acct.create_sandbox("live")
    tagged = sb.add_journal("Lisbon trams at dawn.", title="trams", tags=["source:chatgpt"])
    plain = sb.add_journal("Lisbon bakeries at noon.", title="bakeries")
    ids = [h.id for h in sb.search(QUERY, 20, source="chatgpt")]
    assert tagged in ids and plain not in ids
    assert all(tags == ("source:chatgpt",) for tags in _sources(sb.search(QUERY, 20, source="chatgpt")))
    assert plain in [h.id for h in sb.search(QUERY, 20)]


def _cli(home: Path) -> list[str]:
    result = CliRunner().invoke(cli, ["--home", str(home), "search", QUERY, "--account", "ann", "-k", "20",
                                      "--source", "mem0", "--json"], env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""})
    assert result.exit_code == 0, result.output
    return [h["id"] for h in json.loads(result.output)]


def _rest(home: Path, sp: Soulpass) -> list[str]:
    key = FileKeyStore(home).create("ann").secret
    client = TestClient(create_app(sp, limits=UNLIMITED))
    got = client.post("/v1/accounts/ann/search", json={"query": QUERY, "k": 20, "source": "mem0"},
                      headers={"Authorization": f"Bearer {key}"})
    assert got.status_code == 200, got.text
    return [h["id"] for h in got.json()["hits"]]


def _mcp(home: Path, sp: Soulpass) -> list[str]:
    found: list[str] = []

    async def session() -> None:
        async with Client(build_server(sp, "ann"), read_timeout_seconds=60) as client:
            result = await _call(client, "search_memory", {"query": QUERY, "k": 20, "source": "mem0"})
            found.extend(h["id"] for h in result["hits"])

    anyio.run(session)
    return found


@pytest.mark.parametrize("interface", ["cli", "rest", "mcp"])
def test_each_interface_passes_the_source_on(interface: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    sp = soulpass.open(home, embedder="none")
    acct = _fill(sp, tmp_path)
    expected = [h.id for h in acct.search(QUERY, 20, source="mem0")]
    assert expected and len(expected) < len(acct.search(QUERY, 20))
    mem0 = {r.id for kind in ("sensory", "fact") for r in acct.records(kind) if "source:mem0" in r.tags}
    got = _cli(home) if interface == "cli" else _rest(home, sp) if interface == "rest" else _mcp(home, sp)
    # The CLI opens the home with its default embedder: vectors may find more of Mem0's records.
    assert set(expected) <= set(got) <= mem0
