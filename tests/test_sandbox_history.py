"""Issue 41 item 2's last clause: what an archive leaves out "stays readable in the sandbox's history;
nothing excluded reaches master, index or vectors". On both backends (files, PostgreSQL), with a
deterministic embedder so the vectors are real: the kept sandbox is closed, never listed as open,
its history shows each event (the excluded one with its text, who and why), a crash between the
commit and the close leaves it readable after recovery, a migration leaves it behind, and deleting
it removes the excluded text for good."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass.consolidation.rules import ReviewRule, Rules
from soulpass.errors import Conflict, NotFound
from soulpass.migrate import migrate
from soulpass.store.contract import PendingEvent
from test_filtered_search import HashEmbedder

MARKER = "flowerpot7731"  # only the excluded fact holds it


@pytest.fixture(params=["files", "postgresql"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "files":
        yield tmp_path / "home"
        return
    from postgres_helpers import postgres_url

    yield from postgres_url(tmp_path)


def _open(home: Any) -> soulpass.Soulpass:
    return soulpass.open(home, embedder=HashEmbedder(), rules=Rules(review=ReviewRule(profile=True)))


def _session(acct: soulpass.Account) -> tuple[str, str, str]:
    """A sandbox with a turn, a fact holding MARKER and a profile change; its id, the fact's item id
    and the turn's."""
    sb = acct.create_sandbox("chat")
    sb.add_turn("user", "I moved to Lyon in May")
    sb.add_fact("Ann", "hides a key under", MARKER, confidence=0.95)
    sb.update_profile({"city": "Lyon"})
    items = {i.kind: i.id for i in acct.preview(sb.id).items}
    return sb.id, items["fact"], items["turn_user"]


def test_what_is_left_out_stays_readable_in_the_kept_sandbox_only(home: Any) -> None:
    sp = _open(home)
    acct = sp.create_account("ann")
    sid, fact, turn = _session(acct)
    assert isinstance(acct.archive(sid), soulpass.AwaitingReview)
    done = acct.approve(sid, exclude=[fact], by="owner", reason="not confirmed")
    assert isinstance(done, soulpass.Committed) and done.version == 1

    history = acct.sandbox_history(sid)
    assert (history.archived_as, history.excluded_by, history.excluded_reason) == (1, "owner", "not confirmed")
    by_id = {e.event_id: e for e in history.events}
    assert by_id[fact].outcome == "excluded" and MARKER in by_id[fact].text and by_id[fact].record_id is None
    (turn_id,) = acct.log()[-1].added["turn_user"]
    assert (by_id[turn].outcome, by_id[turn].record_id, by_id[turn].text) == ("archived", turn_id,
                                                                              "I moved to Lyon in May")
    assert [e.kind for e in history.excluded] == ["fact"]

    # closed: never open, no append, no sandbox read; awaits nothing
    assert acct.sandboxes() == [] and acct.awaiting_review() == []
    assert [i.sandbox_id for i in acct.kept_sandboxes()] == [sid]
    with pytest.raises(Conflict, match="archived"):
        acct.store.sandboxes.session_log(sid).append_many([PendingEvent("turn", {"text_excerpt": "late"})])
    with pytest.raises(Conflict, match="sandbox_history"):
        acct.sandbox(sid)
    with pytest.raises(Conflict, match="delete_sandbox_history"):
        acct.discard(sid)
    assert isinstance(acct.archive(sid), soulpass.AlreadyArchived)

    # nothing excluded in the master, the index's full text or its vectors
    assert list(acct.records("fact")) == [] and acct.user_profile().fields == {"city": "Lyon"}
    acct.index().catch_up()
    hits = acct.search(f"where does Ann hide a key {MARKER}", k=10)
    assert hits and all(MARKER not in h.text and h.kind != "fact" for h in hits)
    status = acct.index().status()
    assert "fact" not in status.in_force and status.vectors >= 1 and status.pending_embeddings == 0
    assert all(MARKER not in str(e.to_json()) for e in acct.log())  # the entry names ids, never the text

    # a fresh process (recovery run) still reads it; deleting it is for good
    again = _open(home).account("ann")
    assert again.sandbox_history(sid) == history
    again.delete_sandbox_history(sid)
    with pytest.raises(NotFound):
        again.sandbox_history(sid)
    assert again.kept_sandboxes() == [] and _open(home).account("ann").kept_sandboxes() == []


def test_a_crash_between_the_commit_and_the_close_leaves_the_history_readable(home: Any) -> None:
    acct = _open(home).create_account("ann")
    sid, fact, _turn = _session(acct)

    def crash(step: str) -> None:
        if step == "committed":  # past the commit point, before the archive closes the sandbox
            raise _Crash(step)

    with pytest.raises(_Crash):
        acct.approve(sid, exclude=[fact], by="owner", reason="no", hook=crash)
    recovered = _open(home).account("ann")
    assert recovered.head() == 1 and recovered.sandboxes() == []
    history = recovered.sandbox_history(sid)
    assert [(e.kind, e.outcome) for e in history.events] == [("turn_user", "archived"), ("fact", "excluded"),
                                                             ("profile", "archived")]
    assert MARKER in history.excluded[0].text and history.excluded_reason == "no"
    assert isinstance(recovered.archive(sid), soulpass.AlreadyArchived)
    assert list(recovered.records("fact")) == []


def test_a_write_between_the_commit_point_and_the_marker_is_shown_late_never_lost(home: Any) -> None:
    """The files backend moves a commit's files into place after its commit point: a crash there
    leaves the sandbox without its ARCHIVED.json until recovery, and an append in that window is
    taken. The history shows it ``late`` (never archived, not excluded). PostgreSQL marks the
    sandbox in the commit's transaction: the append is refused."""
    acct = _open(home).create_account("ann")
    sid, fact, _turn = _session(acct)

    def crash(step: str) -> None:
        if step == "committed":
            raise _Crash(step)

    with pytest.raises(_Crash):
        acct.approve(sid, exclude=[fact], by="owner", reason="no", hook=crash)
    log = acct.store.sandboxes.session_log(sid)
    late = PendingEvent("turn", {"kind": "turn_user", "text_excerpt": "one more thing", "text": "one more thing"})
    if isinstance(home, Path):
        log.append_many([late])
    else:
        with pytest.raises(Conflict, match="archived"):
            log.append_many([late])
    history = _open(home).account("ann").sandbox_history(sid)
    outcomes = [(e.outcome, e.text) for e in history.events]
    assert outcomes[:3] == [("archived", "I moved to Lyon in May"), ("excluded", f"Ann hides a key under {MARKER}"),
                            ("archived", '{"city": "Lyon"}')]
    assert outcomes[3:] == ([("late", "one more thing")] if isinstance(home, Path) else [])


def test_an_archive_excluding_everything_commits_the_exclusion_and_keeps_the_sandbox(home: Any) -> None:
    acct = _open(home).create_account("ann")
    sb = acct.create_sandbox("chat")
    sb.add_fact("Ann", "hides a key under", MARKER, confidence=0.95)
    (item,) = acct.preview(sb.id).items
    done = acct.approve(sb.id, exclude=[item.id], by="owner", reason="all wrong")
    assert isinstance(done, soulpass.Committed) and done.version == 1  # the log keeps what was left out
    assert acct.log()[-1].to_json()["excluded"]["items"] == [{"id": item.id, "kind": "fact"}]
    assert [e.outcome for e in acct.sandbox_history(sb.id).events] == ["excluded"]


def test_an_archive_leaving_nothing_out_keeps_no_history(home: Any) -> None:
    acct = _open(home).create_account("ann")
    sb = acct.create_sandbox("chat")
    sb.add_turn("user", "hello")
    assert isinstance(acct.archive(sb.id), soulpass.Committed)
    assert acct.kept_sandboxes() == []
    with pytest.raises(NotFound):
        acct.sandbox_history(sb.id)
    open_one = acct.create_sandbox("open")
    with pytest.raises(Conflict, match="open"):
        acct.sandbox_history(open_one.id)


def test_a_migration_leaves_a_kept_sandbox_behind_and_says_so(home: Any, tmp_path: Path) -> None:
    src = _open(home)
    acct = src.create_account("ann")
    sid, fact, _turn = _session(acct)
    acct.approve(sid, exclude=[fact], by="owner", reason="no")
    dst = soulpass.open(tmp_path / "dst", embedder="none")
    (moved,) = migrate(src, dst, ["ann"])  # kept is not open: nothing refused
    assert moved.kept_behind == (sid,) and moved.to_dict()["kept_behind"] == [sid]
    there = dst.account("ann")
    assert there.head() == 1 and there.kept_sandboxes() == [] and there.sandboxes() == []
    assert src.account("ann").sandbox_history(sid).excluded[0].event_id == fact


class _Crash(Exception):
    pass
