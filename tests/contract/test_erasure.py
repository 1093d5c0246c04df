"""Erasure (``AccountBackend.forget``): every copy of a key, current and history, becomes its
placeholder; the rest of the account, its log and its other versions read as before."""

from __future__ import annotations

from contract_backends import Backend
from contract_changes import record_key
from test_master_store import commit_all, history, seen

from soulpass.store.redact import FORGOTTEN, Erasure

OLD = "SF_20260102_001"  # the fact "coffee", written by version 1, superseded (rewritten) by version 2


def _source(backend: Backend, name: str) -> list[tuple[str, bytes]]:
    store = backend.engine().backend.open(name)
    with store.exclusive():
        return list(store.source_files())


def test_forget_rewrites_every_copy_and_nothing_else(backend: Backend) -> None:
    changes = history()
    commit_all(backend.master("alice"), changes)
    old = next(r for r in changes[0].records if r.id == OLD)
    store = backend.engine().backend.open("alice")
    before = {v: seen(store.snapshot(v)) for v in range(4)}
    log = [e.fields for e in store.log()]
    assert store.forget([record_key(old)], Erasure(frozenset([OLD]))) == {record_key(old): [1, 2]}
    assert all(b"coffee" not in data for _key, data in _source(backend, "alice"))
    reopened = backend.engine().backend.open("alice")
    for version in range(1, 4):
        copy = reopened.snapshot(version).record(OLD)
        assert copy is not None and copy.object == FORGOTTEN and copy.version == min(version, 2)
        now, then = seen(reopened.snapshot(version)), before[version]
        assert now["records"].pop(OLD) != then["records"].pop(OLD)
        assert now == then
    assert [e.fields for e in reopened.log()] == log and reopened.audit() == []
    first = _source(backend, "alice")
    assert reopened.forget([record_key(old)], Erasure(frozenset([OLD]))) == {record_key(old): [1, 2]}  # idempotent
    assert _source(backend, "alice") == first
