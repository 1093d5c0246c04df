"""What a commit reports is what happened (issue 38, items 1-3).

HEAD comes from the version log: a missing or wrong ``VERSION.json`` (a derived file) is rebuilt
from it on open and reported, never read as version 0, and no id is issued twice. A failure past
the commit point is ``Committed`` with a warning; a retry in the same process (library and a
running REST server) never asks again for a lock it holds, so it never hangs; the server reads
the version it reported. An account whose recovery cannot write still opens and reads.
"""

from __future__ import annotations

import errno
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import soulpass
from fault_helpers import AFTER, BEFORE, TURNS, Faults
from fault_helpers import content as _content
from fault_helpers import template as _template
from soulpass.engine import Account
from soulpass.integrity import audit
from soulpass.store.files import commit as commit_module
from soulpass.store.files.layout import LOG_FILE

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from server_world import World

RETRY_TIMEOUT = 60.0  # seconds: a retry that takes longer has hung on a lock


def _open(home: Path) -> soulpass.Soulpass:
    return soulpass.open(home, embedder="none")


def _archive_turns(acct: Account, name: str, *texts: str) -> int:
    sb = acct.create_sandbox(name)
    for text in texts:
        sb.add_turn("user", text)
    result = sb.archive()
    assert isinstance(result, soulpass.Committed), result
    return result.version


def _issued_ids(acct: Account) -> list[str]:
    """Every permanent id the log says a version added, in order (a repeat is an id issued twice)."""
    out: list[str] = []
    for entry in acct.store.log():
        for ids in entry.added.values():
            out += list(ids)
    return out


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` on a thread of its own; fails the test (instead of hanging it) past ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s: a lock is waited for twice"
    if "error" in box:
        raise box["error"]
    return box["result"]


# --- 1. HEAD comes from the log ----------------------------------------------------------------


def test_a_missing_version_file_is_rebuilt_from_the_log_and_no_id_is_reused(tmp_path: Path) -> None:
    sp = _open(tmp_path)
    acct = sp.create_account("a")
    for i in range(4):
        _archive_turns(acct, f"v{i}", f"turn {i}")
    (tmp_path / "accounts/a/core/VERSION.json").unlink()
    again = _open(tmp_path).account("a")
    assert again.head() == 4 and [e.version for e in again.log()] == [1, 2, 3, 4]
    assert (tmp_path / "accounts/a/core/VERSION.json").exists()  # rebuilt by the open
    assert "header_rebuilt" not in audit(_open(tmp_path), "a").checks()  # a later open finds nothing to rebuild
    found = again.store.audit()
    assert [f.check for f in found] == ["header_rebuilt"] and "missing" in found[0].detail  # reported
    assert _archive_turns(again, "v4", "turn 4") == 5
    ids = _issued_ids(again)
    assert len(ids) == len(set(ids)) == 5  # five turns, five ids, none issued twice
    assert {t.text_excerpt for t in again.records("turn_user")} == {f"turn {i}" for i in range(5)}


@pytest.mark.parametrize("wrong", [b'{"version": 2, "parent": 1, "counts": {}}\n',
                                   b'{"version": 9, "parent": 8, "counts": {}}\n', b"", b"\x00garbage"])
def test_a_wrong_version_file_is_rebuilt_from_the_log(tmp_path: Path, wrong: bytes) -> None:
    acct = _open(tmp_path).create_account("a")
    for i in range(4):
        _archive_turns(acct, f"v{i}", f"turn {i}")
    header = tmp_path / "accounts/a/core/VERSION.json"
    good = header.read_bytes()
    header.write_bytes(wrong)
    again = _open(tmp_path).account("a")
    assert header.read_bytes() == good and again.head() == 4
    assert any(f.check == "header_rebuilt" for f in again.store.audit())
    assert _archive_turns(again, "v4", "turn 4") == 5
    ids = _issued_ids(again)
    assert len(ids) == len(set(ids)) == 5


def test_a_version_file_deleted_under_an_open_handle_is_not_version_0(tmp_path: Path) -> None:
    acct = _open(tmp_path).create_account("a")
    for i in range(3):
        _archive_turns(acct, f"v{i}", f"turn {i}")
    (tmp_path / "accounts/a/core/VERSION.json").unlink()
    assert acct.head() == 3  # read from the log's last entry meanwhile
    assert _archive_turns(acct, "v3", "turn 3") == 4  # the commit's recovery rebuilds it first
    ids = _issued_ids(acct)
    assert len(ids) == len(set(ids)) == 4


# The derived files of a files account: each can be deleted and is made again from the rest.
# ``core/VERSION.json`` (from the log's last line), ``index/`` (from the store), ``log.sums`` (the
# log lines' checksums, covered again at the next commit), ``record_tags.jsonl`` (the tags each record
# carries, rebuilt at the next commit) and the lock files. The log, ``core/``,
# ``history/`` and ``txn/`` are the truth and not in this list. The id counters (``log/ids/``)
# are versioned documents, not derived, but a lost one is recounted from the records: no id is
# issued twice without them either.
DERIVED = ["core/VERSION.json", "index", "log.sums", "record_tags.jsonl", ".lock", "sandboxes/{sid}/.buffer.lock",
           "log/ids"]


@pytest.mark.parametrize("derived", DERIVED)
def test_deleting_a_derived_file_loses_nothing_and_reissues_no_id(tmp_path: Path, derived: str) -> None:
    sp = _open(tmp_path)
    acct = sp.create_account("a")
    for i in range(3):
        _archive_turns(acct, f"v{i}", f"turn {i}", f"more {i}")
    assert acct.search("turn 1")  # the index exists
    sb = acct.create_sandbox("open")
    sb.add_turn("user", "acknowledged but not archived")
    acct.close()
    path = tmp_path / "accounts/a" / derived.format(sid=sb.id)
    assert path.exists(), path
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    again = _open(tmp_path).account("a")
    assert again.head() == 3
    result = again.archive(sb.id)
    assert isinstance(result, soulpass.Committed) and result.version == 4
    assert _archive_turns(again, "after", "after the deletion") == 5
    want = {f"turn {i}" for i in range(3)} | {f"more {i}" for i in range(3)}
    want |= {"acknowledged but not archived", "after the deletion"}
    assert {t.text_excerpt for t in again.records("turn_user")} == want  # nothing acknowledged is lost
    ids = _issued_ids(again)
    assert len(ids) == len(set(ids)) == len(want)  # no id issued twice
    assert [e.version for e in again.log()] == [1, 2, 3, 4, 5]
    assert "after the deletion" in again.search("after the deletion")[0].text
    again.close()
    assert audit(_open(tmp_path), "a").ok


# --- 2 and 3. a failure past the commit point: Committed, and a retry that never hangs ---------


class FullDisk:
    """A disk that fills up at the commit point: from the first step past it (the files put in
    place) every file write fails with ENOSPC until :meth:`free` (the session buffer's appends,
    before it, still work). Written files go through ``fsio._write``; the log append through
    ``os.pwrite`` of the commit module."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from soulpass.store import fsio

        self.full = False
        self.failures = 0
        real_apply, real_write, real_pwrite = commit_module.apply_txn, fsio._write, commit_module.os.pwrite

        def apply_txn(*args: Any, **kwargs: Any) -> None:
            self.full = self.full or self.failures == 0  # the first time past the commit point: the disk fills
            real_apply(*args, **kwargs)

        def write(*args: Any, **kwargs: Any) -> None:
            self._check()
            real_write(*args, **kwargs)

        def pwrite(*args: Any) -> int:
            self._check()
            return int(real_pwrite(*args))

        monkeypatch.setattr(commit_module, "apply_txn", apply_txn)
        monkeypatch.setattr(fsio, "_write", write)
        monkeypatch.setattr(commit_module.os, "pwrite", pwrite)

    def _check(self) -> None:
        if self.full:
            self.failures += 1
            raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def free(self) -> None:
        self.full = False


@dataclass
class FullAfterCommit:
    """An archive (the fault helpers' template: version 1, a sandbox of three turns and a fact)
    made on a disk that filled up at its commit point."""

    home: Path
    sandbox_id: str
    acct: Account
    disk: FullDisk
    result: object


@pytest.fixture
def full_after_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FullAfterCommit:
    home, sid = _template(tmp_path)
    acct = _open(home).account("ann")
    sb = acct.sandbox(sid)
    disk = FullDisk(monkeypatch)
    result = acct.archive(sid)
    with pytest.raises((soulpass.Conflict, soulpass.NotFound)):  # archived: never acknowledged, then swept away
        sb.add_turn("user", "written after the archive")
    return FullAfterCommit(home, sid, acct, disk, result)


def test_a_full_disk_past_the_commit_point_is_committed_and_a_retry_does_not_hang(
        full_after_commit: FullAfterCommit) -> None:
    home, sid, acct, result = (full_after_commit.home, full_after_commit.sandbox_id, full_after_commit.acct,
                               full_after_commit.result)
    assert full_after_commit.disk.failures >= 2  # the step past the commit point, and the try again at once
    assert isinstance(result, soulpass.Committed) and result.version == 2
    assert result.warning is not None and "committed" in result.warning and "recovery" in result.warning
    assert acct.head() == 1  # the disk is still full: nothing past the commit point is in place yet
    assert _open(home).account("ann").head() == 1  # and another process opens it all the same (read-only)
    full_after_commit.disk.free()
    # The same process retries the same archive: it holds the sandbox's lock while the commit's
    # recovery sweeps that sandbox; before, this asked for the lock again and hung forever.
    again = _within(RETRY_TIMEOUT, lambda: acct.archive(sid))
    assert isinstance(again, soulpass.AlreadyArchived) and again.version == 2
    assert acct.head() == 2 and _content(acct) == AFTER
    assert not (home / "accounts/ann/sandboxes" / sid).exists()
    assert _archive_turns(acct, "next", "life goes on") == 3
    ids = _issued_ids(acct)
    assert len(ids) == len(set(ids))


def test_the_handle_that_committed_reads_its_version_once_the_disk_has_room(
        full_after_commit: FullAfterCommit) -> None:
    acct = full_after_commit.acct
    assert isinstance(full_after_commit.result, soulpass.Committed) and full_after_commit.result.warning is not None
    assert acct.head() == 1
    full_after_commit.disk.free()
    assert acct.head() == 2 and _content(acct) == AFTER  # recovery ran at the read: read-your-writes
    assert [e.version for e in acct.log()] == [1, 2]


def _calls_of_an_archive(tmp_path: Path) -> tuple[Path, str, int, int]:
    """The template, its sandbox, the number of the call that commits an archive of it (the
    rename of the journal to COMMITTED), and how many calls the archive makes in all."""
    template, sid = _template(tmp_path)
    shutil.copytree(template, tmp_path / "count")
    marks: dict[str, int] = {}
    with Faults().installed() as faults:
        _open(tmp_path / "count").account("ann").archive(sid, hook=lambda step: marks.setdefault(step, faults.calls))
    return template, sid, marks["txn_written"] + 1, faults.calls


def test_every_step_past_the_commit_point_can_fail_and_the_archive_is_committed(tmp_path: Path) -> None:
    template, sid, commit_point, calls = _calls_of_an_archive(tmp_path)
    for mode in ("enospc", "eio", "short"):
        for k in range(commit_point + 1, calls + 1):  # its folders' fsyncs onwards
            home = tmp_path / f"{mode}-{k}"
            shutil.copytree(template, home)
            acct = _open(home).account("ann")
            with Faults(fail_at=k, mode=mode).installed():
                result = acct.archive(sid)
            assert isinstance(result, soulpass.Committed) and result.version == 2, (mode, k, result)
            again = _within(RETRY_TIMEOUT, lambda a=acct: a.archive(sid))  # type: ignore[misc]
            assert isinstance(again, soulpass.AlreadyArchived) and again.version == 2, (mode, k, again)
            assert acct.head() == 2 and _content(acct) == AFTER, (mode, k)
            assert _archive_turns(acct, "next", "life goes on") == 3
            acct.close()
            shutil.rmtree(home)


def test_a_failure_before_the_commit_point_writes_nothing_and_says_so(tmp_path: Path) -> None:
    template, sid, commit_point, _calls = _calls_of_an_archive(tmp_path)
    for k in range(1, commit_point + 1):
        home = tmp_path / f"run-{k}"
        shutil.copytree(template, home)
        acct = _open(home).account("ann")
        with Faults(fail_at=k, mode="enospc").installed(), \
                pytest.raises(soulpass.StorageFull, match="was not committed"):
            acct.archive(sid)
        assert acct.head() == 1 and _content(acct) == BEFORE
        assert not any((home / "accounts/ann/txn").iterdir())  # nothing of it kept
        assert [t["text_excerpt"] for t in acct.sandbox(sid).buffer().new_turns] == TURNS
        acct.close()
        shutil.rmtree(home)


def test_an_account_whose_recovery_cannot_write_still_opens_and_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, sid = _template(tmp_path)
    disk = FullDisk(monkeypatch)
    assert isinstance(_open(home).account("ann").archive(sid), soulpass.Committed)
    assert (home / "accounts/ann/txn").is_dir() and any((home / "accounts/ann/txn").iterdir())
    reader = _open(home).account("ann")  # recovery fails: still opens
    assert reader.head() == 1 and _content(reader) == BEFORE
    assert [r.text_excerpt for r in reader.records("turn_user")] == ["an earlier turn"]
    assert "recovery_pending" in {f.check for f in reader.store.audit()}
    with pytest.raises(soulpass.StorageFull):  # a write must recover first, and cannot: nothing written
        _archive_turns(reader, "blocked", "not yet")
    disk.free()
    assert "redone 00000002" in reader.store.recover()
    assert "recovery_pending" not in {f.check for f in reader.store.audit()}  # it ran whole since
    later = _open(home).account("ann")
    assert later.head() == 2 and _content(later) == AFTER


# --- over a running REST server -------------------------------------------------------------


def test_a_retry_over_a_running_rest_server_never_hangs_and_reads_its_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from server_world import build_world, serving

    world = build_world(tmp_path)
    h, base = world.ann.auth, "/v1/accounts/ann"
    with serving(world.app(), RETRY_TIMEOUT) as url, httpx.Client(base_url=url, timeout=RETRY_TIMEOUT) as client:
        head = client.get(base, headers=h).json()["version"]
        disk = FullDisk(monkeypatch)
        archived = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/archive", headers=h, json={})
        assert archived.status_code == 200, archived.text
        body = archived.json()
        assert body["status"] == "committed" and body["version"] == head + 1 and "recovery" in body["warning"]
        disk.free()
        retry = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/archive", headers=h, json={})
        assert retry.status_code == 200, retry.text
        assert retry.json() == {"status": "already_archived", "version": head + 1, "summary": None, "warning": None,
                                "items": None, "needs_review": None}
        assert client.get(base, headers=h).json()["version"] == head + 1  # the server reads what it reported
        found = client.post(f"{base}/search", headers=h, json={"query": world.ann.marker})
        assert found.status_code == 200
        sb = client.post(f"{base}/sandboxes", headers=h, json={"name": "next"}).json()["sandbox_id"]
        client.post(f"{base}/sandboxes/{sb}/turns", headers=h, json={"text": "life goes on"})
        nxt = client.post(f"{base}/sandboxes/{sb}/archive", headers=h, json={}).json()
        assert nxt["status"] == "committed" and nxt["version"] == head + 2 and nxt["warning"] is None
    log = (tmp_path / "accounts/ann" / LOG_FILE).read_bytes().splitlines()
    assert len(log) == head + 2


def test_mcp_reports_a_commit_past_a_full_disk_as_success(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from soulpass.mcp.tools import MemoryTools
    from soulpass.pool import AccountPool

    home, sid = _template(tmp_path)
    tools = MemoryTools(AccountPool(_open(home)))
    FullDisk(monkeypatch)
    out = tools.archive_session("ann", sandbox_id=sid)
    assert out["status"] == "committed" and out["version"] == 2 and "recovery" in out["warning"]


def test_the_process_lock_is_reentrant_for_its_thread_and_exclusive_between_threads(tmp_path: Path) -> None:
    from soulpass.store.fsio import resource_lock

    path = tmp_path / "x.lock"
    order: list[str] = []
    with resource_lock(path), resource_lock(path):  # the same thread enters again at once
        other = threading.Thread(target=lambda: _hold(path, order))
        other.start()
        time.sleep(0.1)
        order.append("first released")
    other.join(RETRY_TIMEOUT)
    assert order == ["first released", "second held"]
    with resource_lock(path), pytest.raises(BlockingIOError):
        _within(RETRY_TIMEOUT, lambda: _try(path))


def _hold(path: Path, order: list[str]) -> None:
    from soulpass.store.fsio import resource_lock

    with resource_lock(path):
        order.append("second held")


def _try(path: Path) -> None:
    from soulpass.store.fsio import resource_lock

    with resource_lock(path, blocking=False):
        pass



def test_a_full_disk_before_the_commit_point_is_a_507_that_says_nothing_was_committed(
        client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    h, base = world.ann.auth, "/v1/accounts/ann"
    head = client.get(base, headers=h).json()["version"]

    def no_room(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    monkeypatch.setattr(commit_module, "_write_pack", no_room)
    refused = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/archive", headers=h, json={})
    assert refused.status_code == 507, refused.text
    assert f"version {head + 1} was not committed" in refused.json()["message"]
    monkeypatch.undo()
    assert client.get(base, headers=h).json()["version"] == head
    done = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/archive", headers=h, json={}).json()
    assert done["status"] == "committed" and done["version"] == head + 1 and done["warning"] is None
