"""A PostgreSQL account keeps everything in its database (issue 37): a new user's first steps on a
``postgresql://`` home (account, journal entries, a ChatGPT import, an archive, a search) leave no
catalog, and no local file at all, under the user's home folder or the process's cache."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import soulpass
from postgres_helpers import postgres_url
from soulpass.importers import import_from
from test_importers import chatgpt_export


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The machine's PostgreSQL (a schema of the test's own), with the default local cache: under
    ``~/.cache/soulpass/postgres``, ``~`` being a folder of this test."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user" / ".cache"))
    for with_cache in postgres_url(tmp_path):
        plain = re.sub(r"&soulpass_cache=[^&]*", "", with_cache)
        try:
            yield plain
        finally:
            from soulpass.store.postgres.connections import close_database

            close_database(plain)


def test_a_new_users_first_steps_write_no_local_file(url: str, tmp_path: Path) -> None:
    (tmp_path / "user").mkdir()
    (tmp_path / "exports").mkdir()
    export = chatgpt_export(tmp_path / "exports" / "conversations.json")
    sp = soulpass.open(url, embedder="none")
    acct = sp.create_account("ann")
    journal = acct.journal()
    first = journal.add("Moved to Lisbon; the light here is different.", tags=["move"])
    second = journal.add("Tiles everywhere. Azulejos, they are called.")
    assert first["stored"] and second["stored"]
    assert journal.add("Moved to Lisbon; the light here is different.")["duplicate_of"] == first["id"]
    summary = import_from(acct, "chatgpt", export)
    assert summary.imported["turn"] == 6
    assert import_from(acct, "chatgpt", export).duplicates["turn"] == 6  # "already imported?": the store
    sb = acct.create_sandbox("chat")
    sb.write_turn({"kind": "turn_user", "text_excerpt": "The tram to Belém is yellow."})
    sb.archive()
    assert [h.id for h in acct.search("azulejos tiles", k=5)]
    assert acct.search("yellow tram")[0].kind == "turn_user"
    acct.close()
    assert list(tmp_path.rglob("catalog.sqlite*")) == []
    assert [p for p in (tmp_path / "user").rglob("*") if p.is_file()] == []
