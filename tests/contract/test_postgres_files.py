"""PostgreSQL against the files backend: the same history exports to the same plain files, both
ways, and concurrent commits on PostgreSQL lose nothing."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_changes import change, episode
from test_master_store import commit_all, history

from postgres_helpers import postgres_url
from soulpass.store.contract import HeadMoved, VersionWritten
from soulpass.store.open import open_backend


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield from postgres_url(tmp_path)


def _export(backend_home: Path | str, name: str) -> list[tuple[str, bytes]]:
    store = open_backend(backend_home).open(name)
    with store.exclusive():
        return list(store.source_files())


def test_the_same_history_exports_the_same_files_both_ways(url: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    home = tmp_path / "home"
    for location in (home, url):
        store = open_backend(location).open("alice", create=True)
        commit_all(store, history())
        many = tuple(episode(4, n) for n in range(10, 40))
        assert store.commit(change(4, records=many, bulk=True), parent=3) == VersionWritten(4)
    from_files, from_postgres = _export(home, "alice"), _export(url, "alice")
    assert any(k.startswith("log/added/") for k, _ in from_files)  # the bulk lists, set apart
    assert from_postgres == from_files
    open_backend(url).restore("bob", from_files)
    open_backend(home).restore("carol", from_postgres)
    assert _export(url, "bob") == _export(home, "carol") == from_files


def test_concurrent_commits_all_land(url: str) -> None:
    """Eight writers re-plan on ``HeadMoved`` until their change lands: every one is a version."""
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        store = open_backend(url).open("alice", create=True)
        try:
            while True:
                head = store.head()
                outcome = store.commit(change(head + 1, records=(episode(head + 1, 100 + n),)), parent=head)
                if not isinstance(outcome, HeadMoved):
                    return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    store = open_backend(url).open("alice")
    assert store.head() == 8 and [e.version for e in store.log()] == list(range(1, 9))
    assert sorted(r.id for r in store.snapshot().records("episode")) == \
        [f"EP_20260102_{100 + n:03d}" for n in range(8)]
