"""Deleting an account (issue 40 item 22): nothing of it is left, the other accounts are untouched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import soulpass
from server_world import World, build_world
from soulpass.cli.main import cli
from soulpass.errors import InvalidInput, NotFound
from soulpass.server.keys import FileKeyStore
from test_filtered_search import HashEmbedder


def _holding(root: Path, text: str) -> list[str]:
    """Every file under ``root`` whose bytes contain ``text`` (``grep -r -a -l``)."""
    needle = text.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


def _world_with_everything(tmp_path: Path) -> World:
    """ann and bob, each with an index built (searched), a backup in the home and an MCP export."""
    from soulpass.backup import backup
    from soulpass.mcp.tools import MemoryTools
    from soulpass.pool import AccountPool

    world = build_world(tmp_path / "home")
    for tenant in (world.ann, world.bob):
        acct = world.engine.account(tenant.name)
        assert acct.search(tenant.marker)  # the index holds the marker now
        acct.close()
        backup(world.engine, tenant.name)
        MemoryTools(AccountPool(world.engine)).export_account(tenant.name)
    return world


def test_cli_delete_leaves_no_byte_of_the_account(tmp_path: Path) -> None:
    world = _world_with_everything(tmp_path)
    home = world.home
    assert _holding(home, world.ann.marker)
    bob_before = _digests(home / "accounts" / "bob")
    run = CliRunner().invoke
    wrong = run(cli, ["--home", str(home), "account", "delete", "ann"], input="anne\n")
    assert wrong.exit_code != 0 and "nothing was deleted" in wrong.output
    assert "ann" in world.engine.accounts()
    missing = run(cli, ["--home", str(home), "account", "delete", "nobody", "--yes"])
    assert missing.exit_code == 3, missing.output

    done = run(cli, ["--home", str(home), "account", "delete", "ann", "--json"], input="ann\n")
    assert done.exit_code == 0, done.output
    out = json.loads(done.output[done.output.index("{"):])
    assert out["account"] == "ann" and out["keys_revoked"] == 2 and out["by"] == "cli"  # owner + agent

    assert _holding(home, world.ann.marker) == []
    assert world.engine.accounts() == ["bob"]
    assert _digests(home / "accounts" / "bob") == bob_before
    assert sorted(str(k.account) for k in FileKeyStore(home).list()) == ["None", "bob", "bob"]
    assert FileKeyStore(home).verify(world.ann.key) is None
    tomb = world.engine.deletions()
    assert [(t["account"], t["by"]) for t in tomb] == [("ann", "cli")] and tomb[0]["deleted_at"]
    assert set(tomb[0]) == {"account", "deleted_at", "by", "version", "keys_revoked"}  # no content
    with pytest.raises(NotFound):
        world.engine.account("ann")
    again = soulpass.open(home, embedder="none").create_account("ann")  # the name is free again
    assert again.head() == 0 and not again.search(world.ann.marker)


def test_library_delete_needs_the_name_typed_again(tmp_path: Path) -> None:
    sp = soulpass.open(tmp_path / "home", embedder="none")
    sp.create_account("ann")
    with pytest.raises(InvalidInput, match="typed again"):
        sp.delete_account("ann", confirm="yes")
    assert sp.accounts() == ["ann"]
    with pytest.raises(NotFound):
        sp.delete_account("bob", confirm="bob")
    done = sp.delete_account("ann", confirm="ann", by="tester")
    assert done.by == "tester" and sp.accounts() == [] and sp.deletions()[0]["by"] == "tester"


def test_rest_delete_by_owner_or_admin_only(world: World) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(world.app())
    ann = "/v1/accounts/ann"
    assert client.delete(ann, headers=world.bob.auth, params={"confirm": "ann"}).status_code == 403
    assert client.delete(ann, params={"confirm": "ann"}).status_code == 401
    assert client.delete(ann, headers=world.ann.agent_auth, params={"confirm": "ann"}).status_code == 403  # owner's
    bad = client.delete(ann, headers=world.ann.auth, params={"confirm": "bob"})
    assert bad.status_code == 422 and bad.json()["error"] == "InvalidInput", bad.text
    assert client.delete(ann, headers=world.ann.auth).status_code == 422  # no confirmation at all
    gone = client.delete(ann, headers=world.ann.auth, params={"confirm": "ann"})
    assert gone.status_code == 200, gone.text
    assert gone.json()["by"] == f"key {world.ann.key_id}" and gone.json()["keys_revoked"] == 2
    assert client.get(ann, headers=world.ann.auth).status_code == 401  # its keys went with it
    assert client.get(ann, headers=world.ann.agent_auth).status_code == 401
    assert client.get(ann, headers=world.admin).status_code == 404
    assert _holding(world.home, world.ann.marker) == []
    r = client.delete("/v1/accounts/bob", headers=world.admin, params={"confirm": "bob"})
    assert r.status_code == 200 and world.engine.accounts() == []


def test_mcp_tool_deletes_its_account(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from soulpass.mcp.server import build_server
    from test_mcp_stdio import _call

    world = build_world(tmp_path / "home")

    async def session() -> None:
        async with Client(build_server(world.engine, "ann"), read_timeout_seconds=60) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert listed["delete_account"].annotations.destructive_hint  # type: ignore[union-attr]
            bad = await client.call_tool("delete_account", {"confirm": "bob"})
            assert bad.is_error and "typed again" in bad.content[0].text  # type: ignore[union-attr]
            done = await _call(client, "delete_account", {"confirm": "ann"})
            assert done["account"] == "ann" and done["by"] == "mcp"

    anyio.run(session)
    assert world.engine.accounts() == ["bob"] and _holding(world.home, world.ann.marker) == []


def _vectors(url: str, account_id: int) -> int:
    """The account's rows in the vector tables kept in the database."""
    from soulpass.store.postgres.connections import database

    with database(url).connection() as conn:
        if conn.execute("SELECT to_regclass('index_vector_tables')").fetchone()[0] is None:
            return 0  # no index was ever kept in this database (the index migrates its tables when used)
        tables = [r[0] for r in conn.execute("SELECT name FROM index_vector_tables")]
        return sum(conn.execute(f"SELECT count(*) FROM {t} WHERE account_id = %s", (account_id,)).fetchone()[0]
                   for t in tables)


def _dump(url: str) -> str:
    """Every row of the test's own schema, as ``pg_dump`` writes them (only that schema: another
    run's schemas in the same database may come and go meanwhile)."""
    from soulpass.store.postgres.connections import database
    from soulpass.store.postgres.url import server_url

    with database(url).connection() as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "5"}
    done = subprocess.run(["pg_dump", "--data-only", f"--schema={schema}", server_url(url)], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("index", ["database", "local"])
def test_delete_on_postgresql_leaves_no_row(tmp_path: Path, index: str) -> None:
    from postgres_helpers import postgres_url

    for base in postgres_url(tmp_path):
        url = f"{base}&soulpass_index={index}"
        sp = soulpass.open(url, embedder=HashEmbedder())
        from soulpass.server.keyring import key_store

        keys = key_store(sp)
        markers = {"ann": "annmarker7731", "bob": "bobmarker4409"}
        for name, marker in markers.items():
            acct = sp.create_account(name)
            sb = acct.create_sandbox("s")
            sb.add_turn("user", f"my locker code is {marker}")
            sb.add_journal(f"I hid the {marker}.", title="hiding")
            sb.archive()
            acct.create_sandbox("live").add_turn("user", f"still {marker}")
            assert acct.search(marker)
            acct.close()
            keys.create(name)
        assert markers["ann"] in _dump(url)
        bob_before = list(sp.account("bob").store.source_files())
        cache = tmp_path / "pg"
        if index == "local":
            assert _holding(cache, markers["ann"])  # the local cache held it

        ann_id = sp.account("ann").store._id
        assert _vectors(url, ann_id) > 0 or index == "local"
        done = sp.delete_account("ann", confirm="ann", by="tester", keys=keys)
        assert _vectors(url, ann_id) == 0
        assert done.keys_revoked == 1
        dump = _dump(url)
        assert markers["ann"] not in dump and markers["bob"] in dump
        assert _holding(cache, markers["ann"]) == []
        assert list(sp.account("bob").store.source_files()) == bob_before
        assert [k.account for k in keys.list()] == ["bob"]
        assert [(t["account"], t["by"]) for t in sp.deletions()] == [("ann", "tester")]
        assert sp.accounts() == ["bob"]


