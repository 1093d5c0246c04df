"""``soulpass migrate``: files -> PostgreSQL -> files keeps every version byte for byte."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import soulpass
from postgres_helpers import postgres_url
from soulpass.cli.main import cli
from soulpass.errors import Conflict, NotFound
from soulpass.migrate import migrate, tree_digest


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield from postgres_url(tmp_path)


def _history(sp: soulpass.Soulpass, name: str) -> soulpass.Account:
    """An account with archives, a superseded fact, a state, a journal entry and a rollback."""
    acct = sp.create_account(name)
    for n, city in enumerate(("Paris", "Lyon", "Nice")):
        sb = acct.create_sandbox(f"s{n}")
        sb.add_turn("user", f"I moved to {city} this year")
        sb.add_fact("User", "lives in", city, confidence=0.9)
        sb.update_state("ire", {"mood": city.lower()})
        sb.archive()
    acct.journal().add("Tides follow the moon.", core_insight="the moon drives tides", tags=("sea",))
    acct.rollback(2)
    return acct


def _files(account: Path) -> dict[str, bytes]:
    """Every file of the plain-file form on disk (empty folders a retirement left behind aside)."""
    return {p.relative_to(account).as_posix(): p.read_bytes() for part in ("core", "log", "history")
            for p in sorted((account / part).rglob("*")) if p.is_file()}


def _source_digest(sp: soulpass.Soulpass, name: str) -> str:
    store = sp.backend.open(name)
    with store.exclusive():
        return tree_digest(store.source_files())


def test_files_to_postgres_to_files_is_the_same_account(tmp_path: Path, url: str) -> None:
    first = soulpass.open(tmp_path / "a", embedder="none")
    acct = _history(first, "ann")
    want = _source_digest(first, "ann")
    db, back = soulpass.open(url, embedder="none"), soulpass.open(tmp_path / "b", embedder="none")

    there = migrate(first, db)
    again = migrate(db, back, ["ann"])

    assert [m.account for m in there] == ["ann"] and there[0].version == acct.head() == 5
    assert there[0].digest == again[0].digest == want == _source_digest(db, "ann")
    assert _files(tmp_path / "a/accounts/ann") == _files(tmp_path / "b/accounts/ann")  # the very same files
    copy = db.account("ann")
    assert copy.log() == acct.log() and copy.show("state:ire", at=3) == acct.show("state:ire", at=3)
    hits = copy.search("moved to Lyon")  # the index is derived there on first use
    assert hits and "Lyon" in copy.record(hits[0].id).text


def test_nothing_is_written_when_an_account_cannot_go(tmp_path: Path) -> None:
    src, dst = soulpass.open(tmp_path / "a", embedder="none"), soulpass.open(tmp_path / "b", embedder="none")
    _history(src, "ann")
    dst.create_account("ann")
    with pytest.raises(NotFound, match="no account bob"):
        migrate(src, dst, ["ann", "bob"])
    with pytest.raises(Conflict, match="already has account ann"):
        migrate(src, dst)
    assert dst.account("ann").head() == 0  # untouched
    src.account("ann").create_sandbox("open").add_turn("user", "not archived yet")
    with pytest.raises(Conflict, match="open sandboxes"):
        migrate(src, dst, replace=True)
    assert dst.account("ann").head() == 0
    src.account("ann").discard(src.account("ann").sandboxes()[0].sandbox_id)
    assert migrate(src, dst, replace=True)[0].replaced and dst.account("ann").head() == 5


def test_the_command_prints_json_with_the_digests(tmp_path: Path) -> None:
    src = soulpass.open(tmp_path / "a", embedder="none")
    _history(src, "ann")
    out = CliRunner().invoke(cli, ["migrate", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["accounts"][0]["account"] == "ann" and doc["accounts"][0]["digest"] == _source_digest(src, "ann")
    refused = CliRunner().invoke(cli, ["migrate", str(tmp_path / "a"), str(tmp_path / "b")])
    assert refused.exit_code != 0 and "already has account ann" in refused.output


def test_migrate_carries_the_api_keys_and_says_so(tmp_path: Path, url: str) -> None:
    """Issue 40 item 10: a server moved to PostgreSQL rejected every key it had accepted."""
    from soulpass.server.keyring import key_store

    src = soulpass.open(tmp_path / "a", embedder="none")
    for name in ("ann", "bob"):
        sb = src.create_account(name).create_sandbox("s")
        sb.add_turn("user", f"{name} says hello")
        sb.archive()
    keys = key_store(src)
    ann, bob, admin = keys.create("ann", "laptop"), keys.create("bob"), keys.create(None, "ops")
    out = CliRunner().invoke(cli, ["migrate", str(tmp_path / "a"), url, "-a", "ann"])
    assert out.exit_code == 0, out.output
    assert "API keys: 2 carried" in out.output
    there = key_store(soulpass.open(url, embedder="none"))
    assert there.verify(ann.secret) == ann.key and there.verify(admin.secret) == admin.key
    assert there.verify(bob.secret) is None  # bob stayed behind, and so did his key
    back = CliRunner().invoke(cli, ["migrate", url, str(tmp_path / "b"), "--json"])
    assert back.exit_code == 0, back.output
    assert sorted(json.loads(back.output)["keys"]["carried"]) == sorted([ann.key.key_id, admin.key.key_id])
    assert key_store(soulpass.open(tmp_path / "b", embedder="none")).verify(ann.secret) == ann.key
    again = CliRunner().invoke(cli, ["migrate", str(tmp_path / "a"), str(tmp_path / "b"), "-a", "bob", "--json"])
    keys_b = json.loads(again.output)["keys"]
    assert keys_b == {"carried": [bob.key.key_id], "already_there": [admin.key.key_id]}


def test_an_account_at_version_zero_migrates_both_ways(tmp_path: Path, url: str) -> None:
    src = soulpass.open(tmp_path / "a", embedder="none")
    src.create_account("empty")
    db, back = soulpass.open(url, embedder="none"), soulpass.open(tmp_path / "b", embedder="none")

    assert migrate(src, db)[0].version == 0
    assert migrate(db, back)[0].version == 0

    assert "empty" in back.accounts() and back.account("empty").head() == 0
    assert back.account("empty").create_sandbox("s").add_turn("user", "first words")  # usable
