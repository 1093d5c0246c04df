"""The files backend's own promises, beyond the contract suite: what a snapshot reads at HEAD,
what a bulk commit makes durable, recovery of sandbox folders, its lock and buffer tail."""

from __future__ import annotations

import errno
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import soulpass
from soulpass.errors import Corrupted
from soulpass.records import Episode
from soulpass.store import fsio
from soulpass.store.contract import Hook, PendingEvent
from soulpass.store.files import commit as commit_mod
from soulpass.store.files.account import AccountStore
from soulpass.store.files.layout import LOG_FILE, history_path
from soulpass.store.files.log_sums import SUMS_FILE
from soulpass.store.files.session_log import FileSessionLog
from soulpass.store.fsio import file_lock, write_many_durable


def _bulk_account(home: Path) -> AccountStore:
    acct = soulpass.open(home, embedder="none").create_account("alice")
    when = datetime(2026, 1, 2, tzinfo=UTC)
    acct.bulk_append([Episode(id=f"ep_temp_{n:06x}", created_at=when, text=f"e{n}") for n in range(5)])
    return acct.store


def test_the_head_entry_of_a_bulk_version_reads_its_id_lists_only_when_asked(tmp_path: Path) -> None:
    store = _bulk_account(tmp_path)
    entry = store.snapshot().entry()
    side = store.path / "log/added/00000001.json"
    side.rename(side.with_suffix(".moved"))
    assert (entry.kind, entry.counts) == ("bulk", {"episode": 5})  # the side file was not needed
    side.with_suffix(".moved").rename(side)
    assert entry.added == {"episode": tuple(f"EP_20260102_{n:03d}" for n in range(1, 6))}


def test_a_head_not_logged_yet_reads_its_header_from_the_version_file(tmp_path: Path) -> None:
    store = _bulk_account(tmp_path)
    (store.path / LOG_FILE).write_bytes(b"")  # as between VERSION.json and the log line of a commit
    (store.path / SUMS_FILE).unlink()  # whose checksum follows its line
    entry = store.snapshot().entry()
    assert (entry.version, entry.parent, entry.counts) == (1, 0, {"episode": 5})


def test_a_snapshot_whose_header_moved_on_finds_its_line_in_the_log(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot taken between a commit's VERSION.json and its log line, read after that line and
    a later commit landed (seen with four writers under load): its line is read from the log then,
    not reported missing. A version the log never gets is still ``Corrupted``."""
    _bulk_account(tmp_path)
    acct = soulpass.open(tmp_path, embedder="none").account("alice")
    for n in range(2):
        sandbox = acct.create_sandbox(f"s{n}")
        sandbox.add_turn("user", f"turn {n}")
        sandbox.archive()
    store = AccountStore(tmp_path, "alice")
    snap = store.snapshot(2)
    full, reads = store.log(), []

    def log_as_the_race_saw_it(expand_after: int | None = None) -> list[dict[str, object]]:
        reads.append(expand_after)
        return [e for e in full if e["version"] != 2] if len(reads) == 1 else full  # line 2 came after

    monkeypatch.setattr(store, "log", log_as_the_race_saw_it)
    monkeypatch.setattr("soulpass.store.files.account.last_log_line", lambda _log: b"")  # not HEAD's line
    entry = snap.entry()
    assert (entry.version, entry.parent, len(reads)) == (2, 1, 2)
    monkeypatch.setattr(store, "log", lambda expand_after=None: [e for e in full if e["version"] != 2])
    with pytest.raises(Corrupted, match="version 2 has no line"):
        snap.entry()


@pytest.mark.parametrize("n", [3, 200])  # one after another, and from several threads
@pytest.mark.parametrize("flush", ["syncfs", "fsync each"])
def test_a_bulk_write_is_made_durable_by_one_flush_and_never_by_the_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, flush: str) -> None:
    synced: list[str] = []
    flushed: list[str] = []
    real_fsync, real_syncfs = os.fsync, fsio.syncfs

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def syncfs(fd: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_syncfs(fd)

    def no_sync() -> None:
        raise AssertionError("os.sync() flushes every file system of the machine")

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(fsio, "syncfs", syncfs)
    monkeypatch.setattr(os, "sync", no_sync)
    if flush == "fsync each":  # a system without syncfs(2)
        monkeypatch.setattr(fsio, "_libc_syncfs", False)
    files = [(tmp_path / ("a" if i % 2 else "b/c") / f"{i}.json", b"%d" % i) for i in range(n)]
    write_many_durable(tmp_path, files)
    if flush == "syncfs":
        assert flushed == [str(tmp_path)] and synced == []  # one flush, whatever the number of files
    else:
        assert flushed == []
        assert {str(p) for p, _ in files} <= set(synced)
        assert {str(tmp_path / "a"), str(tmp_path / "b" / "c"), str(tmp_path / "b"), str(tmp_path)} <= set(synced)
    assert [p.read_bytes() for p, _ in files] == [b"%d" % i for i in range(n)]


def test_a_failed_flush_is_an_error_and_names_the_disk_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(fd: int) -> int:
        import ctypes

        ctypes.set_errno(errno.EIO)
        return -1

    assert fsio._has_syncfs()  # Linux: the real call is there
    monkeypatch.setattr(fsio, "_libc_syncfs", failing)
    with pytest.raises(OSError, match="syncfs: Input/output error") as err:
        write_many_durable(tmp_path, [(tmp_path / "x.json", b"1")])
    assert err.value.errno == errno.EIO


class _StopAt(Exception):
    pass


def _stop_at(step: str) -> Hook:
    def hook(name: str) -> None:
        if name == step:
            raise _StopAt(name)

    return hook


def test_a_txn_is_one_pack_file_and_one_an_earlier_release_committed_is_redone(tmp_path: Path) -> None:
    """The commit point is ``txn/<N>/COMMITTED``: the manifest line and every file's bytes, plus the
    old copy of each replaced ``core/`` file. An earlier release's txn (``manifest.json``, ``files/``,
    a COMMITTED holding the version number) left by a crash is still redone after an upgrade."""
    acct = soulpass.open(tmp_path, embedder="none").create_account("alice")
    first = acct.create_sandbox("first")
    first.update_state("ire", {"valence": 0.1})
    first.archive()
    second = acct.create_sandbox("second")
    second.add_turn("user", "kept across the upgrade")
    second.update_state("ire", {"valence": 0.9})
    with pytest.raises(_StopAt):
        second.archive(hook=_stop_at("committed"))  # stopped right after the commit point
    path = acct.store.path
    txn = path / "txn" / "00000002"
    assert sorted(p.name for p in txn.iterdir()) == ["COMMITTED"]
    pack = commit_mod._read_pack(txn)
    assert pack.manifest["version"] == 2
    assert {rel for rel, _ in pack.history} == {rel for rel, _ in pack.writes if rel.startswith("core/")} - {
        rel for rel, _ in pack.writes if not (path / rel).exists()}
    # The same txn as an earlier release wrote it.
    for rel, data in pack.writes:
        (txn / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (txn / "files" / rel).write_bytes(data)
    legacy = {k: v for k, v in pack.manifest.items() if k != "history"}
    (txn / "manifest.json").write_bytes(fsio.dump_json({**legacy, "writes": [rel for rel, _ in pack.writes]}))
    (txn / "COMMITTED").write_bytes(b"2\n")
    state_rel = next(rel for rel, _ in pack.history)
    old_state = (path / state_rel).read_bytes()

    reopened = soulpass.open(tmp_path, embedder="none").account("alice")
    assert reopened.head() == 2 and not txn.exists()
    assert [t.text_excerpt for t in reopened.records("turn_user")] == ["kept across the upgrade"]
    assert (path / history_path(state_rel, 2)).read_bytes() == old_state  # version 1's copy kept
    assert (path / state_rel).read_bytes() != old_state


def test_a_damaged_txn_pack_is_an_error_naming_it(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("alice")
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "a turn")
    with pytest.raises(_StopAt):
        sb.archive(hook=_stop_at("committed"))
    committed = acct.store.path / "txn" / "00000001" / "COMMITTED"
    committed.write_bytes(committed.read_bytes()[:-5])  # bytes lost from its end
    with pytest.raises(Corrupted, match="does not hold the bytes its manifest lists") as err:
        soulpass.open(tmp_path, embedder="none").account("alice").head()
    assert "00000001/COMMITTED" in str(err.value)


def test_opening_an_account_deletes_nothing_and_recovery_sweeps_finished_sandboxes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("alice")
    done, live = acct.create_sandbox("done"), acct.create_sandbox("live")
    done.add_turn("user", "archived, then the process died")
    live.add_turn("user", "still open")
    with monkeypatch.context() as m:  # a crash between the commit point and the folder's removal
        m.setattr("soulpass.sessions.sandbox.SandboxInfo.remove", lambda info: None)
        assert isinstance(done.archive(), soulpass.Committed)
    sandboxes = acct.store.path / "sandboxes"
    trash = sandboxes / ".trash-gone-1234abcd"  # a removal cut short
    trash.mkdir()
    (trash / "session_buffer.jsonl").write_text("{}\n")
    before = sorted(p.name for p in sandboxes.iterdir())
    assert {done.id, live.id, trash.name} <= set(before)

    reopened = soulpass.open(tmp_path, embedder="none").account("alice")  # no I/O beyond opening
    assert sorted(p.name for p in sandboxes.iterdir()) == before
    assert [s.sandbox_id for s in reopened.sandboxes()] == [live.id]  # the archived one is not live

    swept = reopened.store.recover()
    assert sorted(swept) == sorted([f"deleted {trash.name}", f"removed archived sandbox {done.id}"])
    assert sorted(p.name for p in sandboxes.iterdir()) == [live.id]
    assert reopened.store.recover() == []  # idempotent
    assert [t["text_excerpt"] for t in reopened.sandbox(live.id).buffer().new_turns] == ["still open"]


def test_a_non_blocking_file_lock_refuses_at_once_while_another_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    with file_lock(path), pytest.raises(BlockingIOError), file_lock(path, blocking=False):
        pass  # pragma: no cover - never entered
    with file_lock(path, blocking=False):  # free again
        pass


def test_the_buffer_tail_reads_whole_lines_once_and_starts_over_on_a_new_file(tmp_path: Path) -> None:
    folder = tmp_path / "sb"
    folder.mkdir()
    (folder / "metadata.json").write_text("{}")
    log = FileSessionLog(folder)
    tail = log.tail()
    assert tail.events() == []
    log.append_many([PendingEvent("turn", {"n": 1}, None)])
    with log.path.open("ab") as f:
        f.write(b'{"torn')  # a line still being written is not read yet
    assert [e.data for e in tail.events()] == [{"n": 1}]
    log.append_many([PendingEvent("turn", {"n": 2}, None)])  # after a newline: the torn line is skipped
    assert [e.data for e in tail.events()] == [{"n": 1}, {"n": 2}] == [e.data for e in log.events()]
    offset = tail.offset
    assert [e.data for e in tail.events()] == [{"n": 1}, {"n": 2}] and tail.offset == offset  # nothing new
    replacement = folder / "new.jsonl"
    replacement.write_bytes(log.path.read_bytes().split(b"\n", 1)[0] + b"\n")
    replacement.replace(log.path)
    assert [e.data for e in tail.events()] == [{"n": 1}]
