"""The MasterStore contract, for every backend: commits, conflicts, snapshots, log and changes."""

from __future__ import annotations

from typing import Any

import pytest
from contract_backends import Backend
from contract_changes import (
    CLIPBOARD,
    JOURNAL,
    SHARD,
    change,
    clipboard,
    core,
    episode,
    fact,
    journal,
    record_key,
    shard,
    state,
)

from soulpass.errors import InvalidInput, NotFound
from soulpass.prose import JournalEntry
from soulpass.records import CoreMemory, Record, StateBlob
from soulpass.store.contract import Change, HeadMoved, MasterStore, Snapshot, Supersession, VersionWritten
from soulpass.store.keys import CORE_MEMORY, STATE_DIR, state_path

STATE = state_path("ire")
DOC_KEYS = (CORE_MEMORY, STATE, CLIPBOARD, SHARD, JOURNAL)


def history() -> list[Change]:
    """Three versions: everything put, then replaced and superseded, then retired."""
    old = fact(1, 1, "coffee")
    new = fact(2, 2, "tea", supersedes=("SF_20260102_001",))
    return [
        change(1, records=(episode(1, 1), old),
               documents=(core(1, "Ada"), state(1, "calm"), clipboard(1, "a"), shard(1, {"e": 1}),
                          journal(1, "first thought"))),
        change(2, records=(episode(2, 2), old.model_copy(update={"superseded_by": new.id, "valid_to_version": 2,
                                                                "version": 2}), new),
               documents=(core(2, "Eve"), clipboard(2, "a", "b")), replaced=(record_key(old), CORE_MEMORY, CLIPBOARD),
               superseded=[{"fact": old.id, "by": new.id}]),
        change(3, records=(episode(3, 3),), documents=(core(3, "Zoe"),), replaced=(CORE_MEMORY,),
               retires=(STATE, JOURNAL)),
    ]


def expected(changes: list[Change], version: int) -> dict[str, Any]:
    """What a snapshot at ``version`` must hold: the last put of each record and document."""
    records: dict[str, Record] = {}
    docs: dict[str, Any] = {}
    for ch in changes[:version]:
        records.update({r.id: r for r in ch.records})
        docs.update({d.key: d.body for d in ch.documents})
        for key in ch.retires:
            docs.pop(key, None)
    return {"records": records, "docs": docs}


def seen(snap: Snapshot) -> dict[str, Any]:
    records = {r.id: r for kind in ("episode", "fact") for r in snap.records(kind)}
    docs: dict[str, Any] = {}
    for key in DOC_KEYS:
        raw = snap.document(key)
        if raw is None:
            continue
        if key == CORE_MEMORY:
            docs[key] = CoreMemory.model_validate(raw)
        elif key == STATE:
            docs[key] = StateBlob.model_validate(raw)
        elif key == JOURNAL:
            docs[key] = JournalEntry.model_validate(raw)
        else:
            docs[key] = {k: v for k, v in raw.items() if k != "text"}
    return {"records": records, "docs": docs}


def commit_all(store: MasterStore, changes: list[Change]) -> None:
    for ch in changes:
        assert store.commit(ch, parent=ch.parent) == VersionWritten(ch.version)


def test_an_empty_store_is_at_version_zero(backend: Backend) -> None:
    store = backend.master("alice")
    snap = store.snapshot()
    assert (store.head(), snap.version, snap.entry().version, snap.entry().parent) == (0, 0, 0, None)
    assert list(snap.records("episode")) == [] and snap.document(CORE_MEMORY) is None
    assert list(store.log()) == [] and list(store.changes(0)) == []


def test_every_version_reads_back_as_committed(backend: Backend) -> None:
    store, changes = backend.master("alice"), history()
    commit_all(store, changes)
    assert store.head() == 3
    for v in range(4):
        snap = store.snapshot(v)
        assert snap.version == v
        assert seen(snap) == expected(changes, v), f"version {v}"
    with pytest.raises(NotFound):
        store.snapshot(4)


def test_a_snapshot_reads_records_and_documents_by_name(backend: Backend) -> None:
    store, changes = backend.master("alice"), history()
    commit_all(store, changes)
    old, now = store.snapshot(1), store.snapshot()
    assert old.record("SF_20260102_001") == changes[0].records[1]
    assert now.record("SF_20260102_001") == changes[1].records[1]  # superseded: rewritten at 2
    assert old.record("EP_20260102_003") is None and now.record("EP_20260102_003") == changes[2].records[0]
    assert list(old.keys(STATE_DIR)) == [STATE] and list(now.keys(STATE_DIR)) == []
    assert list(old.keys("core/04_Journal")) == [JOURNAL] and list(now.keys("core/04_Journal")) == []
    assert list(now.keys("core/06_Clipboard")) == [CLIPBOARD]
    assert now.entry().version == 3 and now.entry().retired == (STATE, JOURNAL)


def test_a_commit_on_a_moved_head_is_refused_and_writes_nothing(backend: Backend) -> None:
    store = backend.master("alice")
    first, rival = change(1, records=(episode(1, 1),)), change(1, records=(episode(1, 7),))
    assert store.commit(first, parent=0) == VersionWritten(1)
    assert store.commit(rival, parent=0) == HeadMoved(parent=0, head=1)
    assert store.head() == 1 and store.snapshot().record("EP_20260102_007") is None
    with pytest.raises(InvalidInput):  # a change must be planned on the parent it names
        store.commit(change(2, records=(episode(2, 8),)), parent=1 + 1)


def test_log_since(backend: Backend) -> None:
    store = backend.master("alice")
    commit_all(store, history())
    assert [e.version for e in store.log()] == [1, 2, 3]
    assert [e.version for e in store.log(since=1)] == [2, 3]
    assert list(store.log(since=3)) == []
    second = store.log(since=1)[0]
    assert (second.parent, second.kind, second.added) == (1, "archive", {"episode": ("EP_20260102_002",),
                                                                           "fact": ("SF_20260102_002",)})
    assert second.superseded == (Supersession("SF_20260102_001", "SF_20260102_002"),)
    assert second.timestamp is not None and second.timestamp.tzinfo is not None


def test_changes_name_what_each_version_put_and_retired(backend: Backend) -> None:
    store, changes = backend.master("alice"), history()
    commit_all(store, changes)
    got = list(store.changes(since=1))
    assert [c.entry.version for c in got] == [2, 3]
    v2, v3 = got
    assert {p.key for p in v2.puts} == {record_key(r) for r in changes[1].records} | {CORE_MEMORY, CLIPBOARD}
    assert all(int(p.body["version"]) == 2 and p.data for p in v2.puts)  # the copies version 2 wrote
    assert v2.retired == () and v2.unreadable == ()
    assert {p.key for p in v3.puts} == {record_key(changes[2].records[0]), CORE_MEMORY}
    assert sorted(v3.retired) == sorted((STATE, JOURNAL))


def test_copies_replaced_later_are_still_the_ones_that_version_wrote(backend: Backend) -> None:
    store = backend.master("alice")
    commit_all(store, history())
    (v1,) = [c for c in store.changes(since=0) if c.entry.version == 1]
    bodies = {p.key: p.body for p in v1.puts}
    assert CoreMemory.model_validate(bodies[CORE_MEMORY]).identity == {"name": "Ada"}  # HEAD says Eve
    assert bodies[JOURNAL]["text"] == "first thought"  # retired at 3


def test_a_bulk_change_reads_back_like_any_other(backend: Backend) -> None:
    store = backend.master("alice")
    many = tuple(episode(1, n) for n in range(1, 30))
    assert store.commit(change(1, records=many, bulk=True), parent=0) == VersionWritten(1)
    assert [r.id for r in store.snapshot().records("episode")] == [r.id for r in many]
    assert {p.key for c in store.changes(0) for p in c.puts} == {record_key(r) for r in many}


def test_a_commit_closes_its_sandbox(backend: Backend) -> None:
    store, log = backend.master("alice"), backend.session_log("alice", "sb_contract_close")
    from soulpass.store.contract import PendingEvent

    log.append_many([PendingEvent("turn", {"text_excerpt": "hi"})])
    assert store.commit(change(1, records=(episode(1, 1),), closes="sb_contract_close",
                               source_sandbox="sb_contract_close"), parent=0) == VersionWritten(1)
    with pytest.raises(Exception, match="archived"):
        log.append_many([PendingEvent("turn", {"text_excerpt": "too late"})])
    assert store.log()[0].source_sandbox == "sb_contract_close"


def test_a_commit_passes_every_crash_point(backend: Backend) -> None:
    changes = history()
    store = backend.master("alice")
    commit_all(store, changes[:2])
    calls: list[str] = []
    assert store.commit(changes[2], parent=2, hook=calls.append) == VersionWritten(3)
    assert set(calls) == set(backend.crash_points)


def test_a_crash_at_any_commit_step_leaves_one_version_or_the_next(backend: Backend) -> None:
    """Crash the commit of version 3 at its 1st, 2nd, ... hook call until one completes: a reopened
    store always holds version 2 or 3 exactly, and a discarded commit can be made again."""
    changes = history()
    crashed_at: list[str] = []
    for n in range(100):
        account = f"crash{n}"
        commit_all(backend.master(account), changes[:2])
        step = _commit_crashing_at(backend.master(account), changes[2], n)
        reopened = backend.reopen(account)
        head = reopened.head()
        assert head in (2, 3), f"crash at call {n} ({step})"
        for v in range(head + 1):
            assert seen(reopened.snapshot(v)) == expected(changes, v), f"crash at call {n} ({step}), version {v}"
        if head == 2:
            assert reopened.commit(changes[2], parent=2) == VersionWritten(3)
        assert seen(reopened.snapshot(3)) == expected(changes, 3)
        assert [e.version for e in reopened.log()] == [1, 2, 3]
        if step is None:
            break
        crashed_at.append(step)
    assert set(crashed_at) == set(backend.crash_points)


def _commit_crashing_at(store: MasterStore, change: Change, n: int) -> str | None:
    """Commit ``change``, raising at the ``n``-th hook call; the step crashed at, or None."""
    calls = 0

    def hook(step: str) -> None:
        nonlocal calls
        calls += 1
        if calls > n:
            raise _Crash(step)

    try:
        store.commit(change, parent=change.parent, hook=hook)
    except _Crash as crash:
        return str(crash)
    return None


class _Crash(Exception):
    pass
