"""A sandbox its archive keeps (``SandboxClose.keep``: items were left out), for every backend: marked
archived and kept in the commit itself, closed to appends, its log readable, never removed by recovery
(after a crash at any commit step as after a clean commit), and removed only when asked."""

from __future__ import annotations

from typing import cast

import pytest
from contract_backends import Backend
from contract_changes import change, episode

from soulpass.errors import Conflict, NotFound
from soulpass.store.contract import AccountBackend, PendingEvent, VersionWritten


def turn(text: str) -> PendingEvent:
    return PendingEvent("turn", {"kind": "turn_user", "text_excerpt": text}, agent="user")


def _account(backend: Backend, name: str) -> AccountBackend:
    return cast(AccountBackend, backend.master(name))  # every backend's master is its whole account


def test_a_kept_sandbox_stays_closed_and_readable(backend: Backend) -> None:
    log = backend.session_log("alice", "sb_kept")
    log.append_many([turn("kept"), turn("left out")])
    store = _account(backend, "alice")
    assert store.commit(change(1, records=(episode(1, 1),), closes="sb_kept", keep=True, source_sandbox="sb_kept"),
                        parent=0) == VersionWritten(1)
    with pytest.raises(Conflict, match="archived"):
        log.append_many([turn("too late")])
    reopened = cast(AccountBackend, backend.reopen("alice"))
    reopened.recover()
    meta = reopened.sandboxes.get("sb_kept")
    assert (meta.archived_as, meta.kept) == (1, True)
    assert [m.sandbox_id for m in reopened.sandboxes.list()] == ["sb_kept"]
    kept_log = reopened.sandboxes.session_log("sb_kept")
    assert [e.data["text_excerpt"] for e in kept_log.events()] == ["kept", "left out"]
    with kept_log.exclusive():
        reopened.sandboxes.remove("sb_kept")
    with pytest.raises(NotFound):
        reopened.sandboxes.get("sb_kept")


def test_an_archived_sandbox_not_kept_is_removed_by_recovery(backend: Backend) -> None:
    backend.session_log("alice", "sb_gone").append_many([turn("hi")])
    store = _account(backend, "alice")
    assert store.commit(change(1, records=(episode(1, 1),), closes="sb_gone"), parent=0) == VersionWritten(1)
    assert store.sandboxes.get("sb_gone").kept is False
    reopened = cast(AccountBackend, backend.reopen("alice"))
    reopened.recover()
    with pytest.raises(NotFound):
        reopened.sandboxes.get("sb_gone")


def test_a_crash_at_any_commit_step_leaves_the_sandbox_open_or_kept(backend: Backend) -> None:
    """Crash the keeping commit at its 1st, 2nd ... hook call: after recovery the version is there
    and the sandbox kept with its whole log, or the version is not and the sandbox is open as before."""
    crashed: list[str] = []
    for n in range(100):
        account, sid = f"keep{n}", f"sb_keep{n}"
        backend.session_log(account, sid).append_many([turn("one"), turn("two")])
        store = _account(backend, account)
        calls: list[str] = []

        def hook(step: str, n: int = n, calls: list[str] = calls) -> None:
            calls.append(step)
            if len(calls) > n:
                raise _Crash(step)

        try:
            store.commit(change(1, records=(episode(1, 1),), closes=sid, keep=True, source_sandbox=sid),
                         parent=0, hook=hook)
            step = None
        except _Crash as crash:
            step = str(crash)
        reopened = cast(AccountBackend, backend.reopen(account))
        reopened.recover()
        meta = reopened.sandboxes.get(sid)  # never removed, whichever way it went
        if reopened.head() == 1:
            assert (meta.archived_as, meta.kept) == (1, True), f"crash at call {n} ({step})"
            with pytest.raises(Conflict):
                reopened.sandboxes.session_log(sid).append_many([turn("late")])
        else:
            assert (meta.archived_as, meta.kept) == (None, False), f"crash at call {n} ({step})"
        assert [e.data["text_excerpt"] for e in reopened.sandboxes.session_log(sid).events()][:2] == ["one", "two"]
        if step is None:
            break
        crashed.append(step)
    assert crashed and set(crashed) == set(calls)  # every step this commit reaches, crashed at once


class _Crash(Exception):
    pass
