"""A snapshot's lookups, for every backend: what a commit is planned with instead of an index
(``with_semantic_hash`` for journal dedupe, ``tags_carried`` for importers)."""

from __future__ import annotations

import contextlib

from contract_backends import Backend
from contract_changes import at, change, episode, fact

from soulpass.prose import JournalEntry
from soulpass.records import semantic_hash
from soulpass.store.contract import DocumentPut, Hook, MasterStore, VersionWritten
from soulpass.store.keys import JOURNAL_DIR, journal_path, record_path

FIRST = journal_path("reflections", "2026-01-02", "Thought", 1)
AGAIN = journal_path("reflections", "2026-01-02", "Thought", 2)
OTHER = journal_path("journal", "2026-01-02", "Other", 1)
SAME, ELSE = semantic_hash("the same thought"), semantic_hash("something else")


def entry(version: int, n: int, text: str, key: str) -> DocumentPut:
    return DocumentPut(key, JournalEntry(id=f"JE_20260102_{n:03d}", text=text, type="reflection", title="Thought",
                                         version=version, created_at=at(version)))


def journal_history(store: MasterStore) -> None:
    """v1: one entry; v2: its repeat (later) and another; v3: the first retired."""
    for ch in (change(1, documents=(entry(1, 1, "the same thought", FIRST),)),
               change(2, documents=(entry(2, 2, "The same  thought!", AGAIN), entry(2, 3, "something else", OTHER))),
               change(3, retires=(FIRST,))):
        assert store.commit(ch, parent=ch.parent) == VersionWritten(ch.version)


def test_entries_with_a_semantic_hash_at_each_version(backend: Backend) -> None:
    store = backend.master("alice")
    journal_history(store)
    hashes = {SAME, ELSE, semantic_hash("never written")}
    assert store.snapshot(0).with_semantic_hash(JOURNAL_DIR, hashes) == {}
    assert store.snapshot(1).with_semantic_hash(JOURNAL_DIR, hashes) == {SAME: [("JE_20260102_001", FIRST)]}
    assert store.snapshot(2).with_semantic_hash(JOURNAL_DIR, hashes) == {
        SAME: [("JE_20260102_001", FIRST), ("JE_20260102_002", AGAIN)],  # oldest first
        ELSE: [("JE_20260102_003", OTHER)]}
    assert store.snapshot(3).with_semantic_hash(JOURNAL_DIR, [SAME]) == {SAME: [("JE_20260102_002", AGAIN)]}


def test_a_hash_lookup_reads_only_its_folder_and_takes_any_text(backend: Backend) -> None:
    store = backend.master("alice")
    journal_history(store)
    assert store.snapshot().with_semantic_hash("core/05_Core_Memory", {SAME, ELSE}) == {}
    assert store.snapshot().with_semantic_hash(JOURNAL_DIR, {"not a hash", ""}) == {}
    assert store.snapshot().with_semantic_hash(JOURNAL_DIR, set()) == {}


def test_tags_carried_by_records_at_each_version(backend: Backend) -> None:
    store = backend.master("alice")
    tagged = episode(1, 1).model_copy(update={"tags": ("import:abc", "café", 'say "hi"')})
    old = fact(1, 1, "coffee", tags=("import:old",))
    new = fact(2, 2, "tea", supersedes=(old.id,))
    rewritten = old.model_copy(update={"superseded_by": new.id, "valid_to_version": 2, "version": 2, "tags": ()})
    for ch in (change(1, records=(tagged, old)),
               change(2, records=(episode(2, 2).model_copy(update={"tags": ("import:abd",)}), rewritten, new),
                      replaced=(record_path(old.id),), superseded=[{"fact": old.id, "by": new.id}])):
        assert store.commit(ch, parent=ch.parent) == VersionWritten(ch.version)
    wanted = {"import:abc", "import:abd", "import:old", "import:zzz"}
    assert store.snapshot(0).tags_carried(wanted) == frozenset()
    assert store.snapshot(1).tags_carried(wanted) == {"import:abc", "import:old"}
    assert store.snapshot(2).tags_carried(wanted) == {"import:abc", "import:abd"}  # the old copy's tag is gone
    assert store.snapshot(2).tags_carried({"café", 'say "hi"', "import:abd", "x"}) == {"café", 'say "hi"',
                                                                                      "import:abd"}
    assert store.snapshot(2).tags_carried(set()) == frozenset()


def test_tags_carried_after_a_crash_at_every_commit_step(backend: Backend) -> None:
    """A commit killed at its n-th step, then the next commit: each version's lookup says what its
    records carry (the files backend's note of tags is behind after the kill, rebuilt next)."""
    changes = [change(v, records=(episode(v, v).model_copy(update={"tags": (f"import:{v}",)}),)) for v in (1, 2, 3)]
    wanted = {"import:1", "import:2", "import:3"}
    for n in range(len(backend.crash_points) + 2):
        store = backend.master(f"tags{n}")
        store.commit(changes[0], parent=0)
        with contextlib.suppress(RuntimeError):
            store.commit(changes[1], parent=1, hook=_killed_at(n + 1))
        reopened = backend.reopen(f"tags{n}")
        head = reopened.head()
        assert reopened.snapshot().tags_carried(wanted) == {f"import:{v}" for v in range(1, head + 1)}
        if head == 1:
            reopened.commit(changes[1], parent=1)
        reopened.commit(changes[2], parent=2)
        for v in range(4):
            assert reopened.snapshot(v).tags_carried(wanted) == {f"import:{k}" for k in range(1, v + 1)}, (n, v)


def _killed_at(n: int) -> Hook:
    """A hook that raises at its ``n``-th call, as a kill would stop the commit there."""
    calls = 0

    def hook(step: str) -> None:
        nonlocal calls
        calls += 1
        if calls == n:
            raise RuntimeError(f"killed at {step}")

    return hook
