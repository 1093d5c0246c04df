"""The PostgreSQL backend beyond the contract suite (``tests/contract`` runs that on it): opening by
URL, migrations, account isolation, and the library end to end on a database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import soulpass
from postgres_helpers import postgres_url
from soulpass import Committed
from soulpass.errors import InvalidInput, NotFound
from soulpass.store.contract import Change, VersionEntry
from soulpass.store.location import StoreLocation, locate
from soulpass.store.open import FilesBackend, open_backend
from soulpass.store.postgres.url import is_url, local_root, masked, server_url


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield from postgres_url(tmp_path)


def test_a_location_is_a_url_or_a_folder(tmp_path: Path) -> None:
    url = "postgresql://me:secret@db.example:6543/mem?options=-csearch_path%3Dteam&soulpass_cache=/var/cache/sp"
    assert is_url(url) and is_url("postgres://h/db") and not is_url(str(tmp_path)) and not is_url(tmp_path)
    assert server_url(url) == "postgresql://me:secret@db.example:6543/mem?options=-csearch_path%3Dteam"
    assert masked(url).startswith("postgresql://me:***@db.example:6543/")
    assert local_root(url) == Path("/var/cache/sp")
    assert local_root("postgresql://h/mem").name == "h_5432_mem"
    assert isinstance(open_backend(tmp_path), FilesBackend)
    where = locate(url)  # what the layers above the store ask instead of parsing a URL
    assert (where.kind, where.name, where.masked_url, where.local) == ("postgresql", masked(url), masked(url),
                                                                      Path("/var/cache/sp"))
    assert locate(tmp_path) == StoreLocation("files", str(tmp_path), tmp_path) and locate(tmp_path).masked_url is None


def test_open_by_url_migrates_once(url: str) -> None:
    from soulpass.store.postgres.backend import PostgresBackend
    from soulpass.store.postgres.connections import database
    from soulpass.store.postgres.schema import STORE_MIGRATIONS, migrate

    backend = open_backend(url)
    assert isinstance(backend, PostgresBackend) and backend.accounts() == []
    with database(url).connection() as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")] == \
            [m.name for m in STORE_MIGRATIONS]
        assert migrate(conn, STORE_MIGRATIONS) == []
    with pytest.raises(NotFound):
        backend.open("nobody")


def test_each_owner_migrates_its_own_tables(url: str) -> None:
    """The store makes the store's tables on opening; the server's keys and the index make theirs
    when first used, through the same runner and record."""
    from soulpass.server.keyring import key_store
    from soulpass.store.postgres.connections import database

    def migrated() -> list[str]:
        with database(url).connection() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    sp = soulpass.open(url, embedder="none")
    acct = sp.create_account("ann")
    assert migrated() == ["0001_store", "0004_store_semantic_hash", "0005_account_deletions", "0007_kept_sandboxes"]
    assert key_store(sp).list() == []
    assert migrated() == ["0001_store", "0002_api_keys", "0004_store_semantic_hash", "0005_account_deletions",
                          "0006_api_key_roles", "0007_kept_sandboxes"]
    assert acct.search("anything") is not None
    assert migrated() == ["0001_store", "0002_api_keys", "0003_index", "0004_store_semantic_hash",
                          "0005_account_deletions", "0006_api_key_roles", "0007_kept_sandboxes",
                          "0008_index_search_reads"]
    db = sp.backend.database()
    assert db is not None and db.migrate([]) == []


def test_sandboxes_made_before_kept_sandboxes_are_not_kept(url: str) -> None:
    """Migration 0007_kept_sandboxes on a database whose store predates it: every sandbox row gains
    ``kept`` false, so an archived one whose removal was pending is still removed by recovery."""
    import psycopg

    from soulpass.store.postgres.schema import STORE_MIGRATIONS, migrate
    from soulpass.store.postgres.url import server_url

    before = [m for m in STORE_MIGRATIONS if m.name != "0007_kept_sandboxes"]
    with psycopg.connect(server_url(url), autocommit=True) as conn:
        migrate(conn, before)
        conn.execute("INSERT INTO accounts (name) VALUES ('ann')")
        conn.execute("INSERT INTO sandboxes (account_id, sandbox_id, name, parent_version, created_at, archived_as) "
                     "SELECT id, sid, sid, 0, now(), v FROM accounts, (VALUES ('sb_open', NULL::int), ('sb_done', 1)) "
                     "AS s (sid, v) WHERE name = 'ann'")
    store = soulpass.open(url, embedder="none").backend.open("ann")
    meta = store.sandboxes.get("sb_open")
    assert (meta.archived_as, meta.kept) == (None, False)
    store.recover()
    assert [m.sandbox_id for m in store.sandboxes.list()] == ["sb_open"]  # the archived one, not kept, removed


def test_accounts_are_isolated(url: str) -> None:
    """A rollback, a removal or a replacement scoped to one account never touches another."""
    sp = soulpass.open(url, embedder="none")
    backend = sp.backend
    alice, bob = backend.open("alice", create=True), backend.open("bob", create=True)
    bob_sandbox = bob.sandboxes.create("work", 0, "sb_same_id")
    alice.sandboxes.create("work", 0, "sb_same_id")
    alice.sandboxes.remove("sb_same_id")
    assert [s.sandbox_id for s in bob.sandboxes.list()] == [bob_sandbox.sandbox_id]
    files = list(bob.source_files())
    assert backend.restore("alice", files, replace=True) is True
    assert backend.accounts() == ["alice", "bob"] and bob.sandboxes.list() != []


def test_the_library_end_to_end(url: str) -> None:
    sp = soulpass.open(url, embedder="none")
    acct = sp.create_account("ann")
    sb = acct.create_sandbox("chat")
    sb.add_turn("user", "I adopted a grey cat called Miso")
    sb.add_turn("llm", "Miso is a lovely name")
    sb.add_fact("User", "has a cat named", "Miso", confidence=0.9)
    first = sb.archive()
    assert isinstance(first, Committed) and acct.head() == 1
    assert sp.account("ann").sandboxes() == []
    hits = acct.search("Miso cat", k=5)
    assert hits and any("Miso" in (h.text or "") for h in hits)
    second = acct.create_sandbox("later")
    second.add_fact("User", "has a cat named", "Tofu", confidence=0.9)
    assert isinstance(second.archive(), Committed)
    assert acct.rollback(1) == 3
    assert [e.kind for e in acct.log()] == ["archive", "archive", "rollback"]
    assert {f.object for f in acct.records("fact")} == {"Miso"}
    diff = acct.diff(1, 2)
    assert diff.added["fact"] and diff.from_version == 1 and diff.to_version == 2
    acct.close()


def test_what_jsonb_cannot_hold_is_refused_and_writes_nothing(url: str) -> None:
    from soulpass.records import Episode

    store = open_backend(url).open("alice", create=True)
    bad = Episode(id="EP_20260102_001", episode_id="EP_20260102_001", version=1,
                  created_at=datetime(2026, 1, 2, tzinfo=UTC), text="a NUL \x00 inside")
    entry = VersionEntry({"version": 1, "parent": 0, "kind": "archive", "added": {"episode": [bad.id]}})
    with pytest.raises(InvalidInput):
        store.commit(Change(entry, records=(bad,)), parent=0)
    assert store.head() == 0 and store.log() == [] and store.snapshot().record(bad.id) is None


def test_a_url_libpq_cannot_take_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match=r'me:\*\*\*@.*invalid URI query parameter: "colour"'):
        soulpass.open("postgresql://me:secret@127.0.0.1:5432/test?colour=blue", embedder="none")


def test_reads_take_no_transaction_and_a_failed_one_leaves_the_pool_usable(url: str) -> None:
    """``Database.reading``: each statement on its own (no BEGIN before it, so no transaction is
    open between two); an error is raised as it is, and the next read or commit works."""
    import psycopg

    from soulpass.store.postgres.connections import database

    soulpass.open(url, embedder="none").create_account("ann")
    db = database(url)
    with db.reading() as conn:
        conn.execute("SELECT 1")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # not INTRANS
    with pytest.raises(psycopg.errors.UndefinedTable), db.reading() as conn:
        conn.execute("SELECT * FROM no_such_table")
    with db.reading() as conn:
        assert conn.execute("SELECT name FROM accounts").fetchall() == [("ann",)]
    with db.connection() as conn:  # the pool's connections are transactional again
        conn.execute("SELECT 1")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
