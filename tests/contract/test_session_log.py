"""The SessionLog contract, for every backend: all-or-nothing appends, cursors, exclusion, close."""

from __future__ import annotations

import threading

import pytest
from contract_backends import Backend

from soulpass.errors import Conflict, InvalidInput
from soulpass.store.contract import PendingEvent


def turn(text: str) -> PendingEvent:
    return PendingEvent("turn", {"kind": "turn_user", "text_excerpt": text}, agent="user")


def test_appends_come_back_in_order(backend: Backend) -> None:
    log = backend.session_log("alice", "sb_contract_order")
    first = log.append_many([turn("one"), turn("two")])
    log.append_many([turn("three")])
    events = log.events()
    assert [e.data["text_excerpt"] for e in events] == ["one", "two", "three"]
    assert [e.event_id for e in events[:2]] == [e.event_id for e in first]
    assert events[0].agent == "user" and events[0].at.tzinfo is not None


def test_events_after_a_cursor(backend: Backend) -> None:
    log = backend.session_log("alice", "sb_contract_cursor")
    log.append_many([turn("one"), turn("two")])
    cursor = len(log.events())
    log.append_many([turn("three")])
    assert [e.data["text_excerpt"] for e in log.events(after=cursor)] == ["three"]
    assert log.events(after=3) == []


@pytest.mark.parametrize("bad", [PendingEvent("no_such_type", {}), PendingEvent("turn", {"x": "y" * 70_000}),
                                 PendingEvent("turn", {1: "not a string key"})])
def test_a_batch_with_one_bad_event_writes_nothing(backend: Backend, bad: PendingEvent) -> None:
    log = backend.session_log("alice", "sb_contract_atomic")
    log.append_many([turn("before")])
    with pytest.raises(InvalidInput):
        log.append_many([turn("good"), bad, turn("also good")])
    assert [e.data["text_excerpt"] for e in log.events()] == ["before"]


def test_the_exclusive_section_holds_appends_back(backend: Backend) -> None:
    log = backend.session_log("alice", "sb_contract_exclusive")
    done = threading.Event()

    def append() -> None:
        log.append_many([turn("from another writer")])
        done.set()

    with log.exclusive():
        writer = threading.Thread(target=append)
        writer.start()
        assert not done.wait(0.3), "an append ran inside the exclusive section"
        assert log.events() == []
    writer.join(5)
    assert done.is_set() and len(log.events()) == 1


def test_a_closed_log_takes_no_more_events(backend: Backend) -> None:
    log = backend.session_log("alice", "sb_contract_closed")
    log.append_many([turn("last")])
    with log.exclusive():
        log.close(archived_as=None)
    with pytest.raises(Conflict):
        log.append_many([turn("after close")])
    assert log.events() == []
