"""The engine plans on a snapshot and commits with its parent; when another writer's commit lands in
between, the store answers ``HeadMoved`` and the engine plans again on the new HEAD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass.store import contract
from soulpass.store.contract import Change, CommitOutcome, HeadMoved


def _race_once(acct: soulpass.Account, monkeypatch: pytest.MonkeyPatch, other: Any) -> list[CommitOutcome]:
    """The first commit ``acct`` tries runs ``other`` (another handle's write) just before it."""
    real = acct.store.commit
    outcomes: list[CommitOutcome] = []

    def commit(change: Change, *, parent: int, hook: Any = None) -> CommitOutcome:
        if not outcomes:
            other()
        outcomes.append(real(change, parent=parent, hook=hook))
        return outcomes[-1]

    monkeypatch.setattr(acct.store, "commit", commit)
    return outcomes


def test_an_archive_overtaken_by_another_archive_is_planned_again(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    mine, theirs = acct.create_sandbox("mine"), acct.create_sandbox("theirs")
    mine.add_fact("ann", "lives_in", "Paris", confidence=0.9)
    theirs.add_fact("ann", "lives_in", "Rome", confidence=0.9)
    elsewhere = soulpass.open(tmp_path, embedder="none").account("ann")
    outcomes = _race_once(acct, monkeypatch, lambda: elsewhere.sandbox(theirs.id).archive())

    result = mine.archive()

    assert [type(o) for o in outcomes] == [HeadMoved, contract.VersionWritten]
    assert outcomes[0] == HeadMoved(parent=0, head=1)
    assert isinstance(result, soulpass.Committed) and result.version == 2
    log = acct.log()
    assert [(e.version, e.source_sandbox) for e in log] == [(1, theirs.id), (2, mine.id)]
    assert log[1].parent == 1 and log[1].to_json()["rebased"]  # planned again on version 1, not on 0
    assert sorted((f.object, f.version) for f in acct.records("fact")) == [("Paris", 2), ("Rome", 1)]
    assert [f.object for f in acct.records("fact", at=1)] == ["Rome"]


def test_a_rollback_overtaken_by_an_archive_restores_the_target_on_the_new_head(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    sb = acct.create_sandbox("first")
    sb.add_turn("user", "the first thing I said")
    sb.archive()
    late = acct.create_sandbox("late")
    late.add_turn("user", "something said later")
    elsewhere = soulpass.open(tmp_path, embedder="none").account("ann")
    outcomes = _race_once(acct, monkeypatch, lambda: elsewhere.sandbox(late.id).archive())

    version = acct.rollback(1)

    assert isinstance(outcomes[0], HeadMoved) and len(outcomes) == 2
    assert version == 3 and acct.head() == 3
    assert [t.text_excerpt for t in acct.records("turn_user")] == ["the first thing I said"]
    assert acct.log()[-1].kind == "rollback" and acct.log()[-1].counts == acct.log()[0].counts
