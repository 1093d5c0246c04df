"""What backups, exports and audits ask of every backend: an account's source files out
(``source_files``, read in ``exclusive``), back in (``Backend.restore``), and its copies in force."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contract_backends import Backend
from test_master_store import DOC_KEYS, commit_all, history, seen

from soulpass.errors import Conflict, Corrupted, InvalidInput
from soulpass.store.contract import StoredCopy, UnreadableCopy
from soulpass.store.keys import CORE_MEMORY, SOURCE_FOLDERS


def _exported(backend: Backend, name: str) -> tuple[int, list[tuple[str, bytes]]]:
    store = backend.engine().backend.open(name)
    with store.exclusive():
        return store.head(), list(store.source_files())


def test_an_account_restored_from_its_source_files_reads_the_same(backend: Backend) -> None:
    commit_all(backend.master("alice"), history())
    head, files = _exported(backend, "alice")
    assert [k for k, _ in files] == sorted(k for k, _ in files)
    assert {k.split("/")[0] for k, _ in files} <= set(SOURCE_FOLDERS)
    stores = backend.engine().backend
    assert stores.restore("bob", iter(files)) is False
    alice, bob = stores.open("alice"), stores.open("bob")
    assert bob.head() == head == 3 and "bob" in stores.accounts()
    for version in range(head + 1):
        assert seen(bob.snapshot(version)) == seen(alice.snapshot(version))
    assert [e.fields for e in bob.log()] == [e.fields for e in alice.log()]
    assert _exported(backend, "bob") == (head, files)


def test_restore_replaces_only_when_asked_and_all_at_once(backend: Backend) -> None:
    commit_all(backend.master("alice"), history())
    _, files = _exported(backend, "alice")
    stores = backend.engine().backend
    with pytest.raises(Conflict):
        stores.restore("alice", files)

    def failing() -> Iterator[tuple[str, bytes]]:
        yield files[0]
        raise Corrupted("a check of the files failed")

    with pytest.raises(Corrupted):
        stores.restore("alice", failing(), replace=True)
    with pytest.raises(InvalidInput):
        stores.restore("carol", [("../elsewhere.json", b"{}")])
    assert stores.accounts() == ["alice"]
    assert _exported(backend, "alice")[1] == files  # untouched
    assert stores.restore("alice", files, replace=True) is True


def test_the_copies_in_force_and_a_clean_audit(backend: Backend) -> None:
    commit_all(backend.master("alice"), history())
    store = backend.engine().backend.open("alice")
    copies = {c.key: c for c in store.current_copies()}
    assert list(copies) == sorted(copies)
    assert set(DOC_KEYS) - set(copies) == set(DOC_KEYS) - set(seen(store.snapshot())["docs"])
    core = copies[CORE_MEMORY]
    assert isinstance(core, StoredCopy) and core.body["identity"] == {"name": "Zoe"}
    assert not any(isinstance(c, UnreadableCopy) for c in copies.values())
    assert store.audit() == []
