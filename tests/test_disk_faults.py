"""A full disk in the middle of a write: nothing half-written stays, and the account goes on.

The faults are injected where the files backend writes: ``os.pwrite`` of the version-log append
and ``os.write`` of a session-buffer append write part of what they were given, then fail with
ENOSPC, as a filling disk does.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass.errors import BackendUnavailable
from soulpass.store.files import commit as commit_module
from soulpass.store.files import session_log as session_log_module


def _filling_disk(real: Callable[..., int], room: int) -> Callable[..., int]:
    """``real`` (os.write or os.pwrite) on a disk with ``room`` bytes left: a short write, then ENOSPC."""
    left = [room]

    def write(fd: int, data: Any, *offset: int) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        part = bytes(data[:left[0]])
        left[0] -= len(part)
        return int(real(fd, part, *offset))

    return write


def _sandbox_with_turns(acct: soulpass.Account, n: int) -> soulpass.Sandbox:
    sb = acct.create_sandbox("chat")
    for i in range(n):
        sb.add_turn("user", f"message {i} about the harbour and the boats")
    return sb


def test_a_log_append_cut_short_after_the_commit_point_is_committed_and_recovery_finishes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    _sandbox_with_turns(acct, 3).archive()
    sb = _sandbox_with_turns(acct, 5)
    with monkeypatch.context() as m:
        m.setattr(commit_module.os, "pwrite", _filling_disk(os.pwrite, 40))
        result = sb.archive()  # past the commit point: committed, its last steps left to recovery
    assert isinstance(result, soulpass.Committed) and result.version == 2
    assert result.warning is not None and "recovery finishes it" in result.warning
    log = tmp_path / "accounts/ann/log/versions.jsonl"
    assert log.read_bytes().endswith(b"\n")  # no torn line left behind
    assert [e.version for e in acct.log()] == [1]  # its line is still to come: the txn holds it
    again = soulpass.open(tmp_path, embedder="none").account("ann")  # recovery appends it
    assert again.head() == 2 and [e.version for e in again.log()] == [1, 2]
    assert len(list(again.records("turn_user"))) == 8
    assert isinstance(sb.archive(), soulpass.AlreadyArchived)
    assert isinstance(_sandbox_with_turns(again, 1).archive(), soulpass.Committed)  # the next archive works
    assert [e.version for e in again.log()] == [1, 2, 3]


def test_a_torn_log_tail_left_by_an_older_release_is_cut_and_its_version_rederived(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    _sandbox_with_turns(acct, 2).archive()
    _sandbox_with_turns(acct, 2).archive()
    log = tmp_path / "accounts/ann/log/versions.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0] + lines[1][:25])  # version 2's line torn, its txn long gone (the old bug)
    again = soulpass.open(tmp_path, embedder="none").account("ann")  # the open repairs it, under the lock
    log_again = again.log()
    assert log.read_bytes().startswith(lines[0]) and log.read_bytes().endswith(b"\n")
    assert [e.version for e in log_again] == [1, 2] and log_again[1].to_json()["rederived"]
    assert log_again[1].counts["turn_user"] == 4 and again.head() == 2
    assert isinstance(_sandbox_with_turns(again, 1).archive(), soulpass.Committed)
    assert [e.version for e in again.log()] == [1, 2, 3]


def test_a_batch_cut_short_by_a_full_disk_leaves_nothing_in_the_buffer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    sb = _sandbox_with_turns(acct, 2)
    episode = {"episode_id": "ep_harbour",  # the seed's form: an episode with its 30 turns inline
               **{f"turn_{i + 1}": {"speaker": "user", "text": f"turn {i} " * 20} for i in range(30)}}
    before = sb.buffer()
    with monkeypatch.context() as m:
        m.setattr(session_log_module.os, "write", _filling_disk(os.write, 3000))
        with pytest.raises(BackendUnavailable, match="nothing was written"):
            sb.write_episode(episode)
    assert sb.buffer() == before  # not one of the 31 events stayed
    sb.write_episode(episode)  # the disk has room again: the retry stores the batch once
    result = sb.archive()
    assert isinstance(result, soulpass.Committed)
    assert len(list(acct.records("turn_user"))) == 32 and len(list(acct.records("episode"))) == 1


@pytest.mark.parametrize("garbage", [b"", b"\x00\x00\x00", b"[1, 2]", b'{"version": "two"}'])
def test_a_damaged_version_file_is_rebuilt_from_the_log(tmp_path: Path, garbage: bytes) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    _sandbox_with_turns(acct, 2).archive()
    _sandbox_with_turns(acct, 1).archive()
    header = tmp_path / "accounts/ann/core/VERSION.json"
    good = header.read_bytes()
    header.write_bytes(garbage)
    assert acct.head() == 2  # readers take HEAD's header from the log meanwhile
    again = soulpass.open(tmp_path, embedder="none").account("ann")  # the open rewrites it, under the lock
    assert header.read_bytes() == good and again.head() == 2
    assert isinstance(_sandbox_with_turns(again, 1).archive(), soulpass.Committed) and again.head() == 3


def test_a_damaged_middle_line_of_a_buffer_is_an_error_naming_it(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    sb = _sandbox_with_turns(acct, 3)
    path = tmp_path / f"accounts/ann/sandboxes/{sb.id}/session_buffer.jsonl"
    lines = path.read_bytes().split(b"\n")
    assert all(b'"chain":"' in line for line in lines if line)  # every line carries its checksum
    flipped = lines[1].replace(b"message 1", b"message X")  # still valid JSON: only the checksum can tell
    assert flipped != lines[1]
    path.write_bytes(b"\n".join([lines[0], flipped, *lines[2:]]))
    with pytest.raises(soulpass.Corrupted, match=r"session_buffer\.jsonl:2 is damaged"):
        acct.archive(sb.id)
    assert acct.head() == 0  # nothing committed, nothing silently dropped
    path.write_bytes(b"\n".join([lines[0], b'{"not an event"', *lines[2:]]))
    with pytest.raises(soulpass.Corrupted, match=r"session_buffer\.jsonl:2 has no sequence number or checksum"):
        sb.buffer()
    path.write_bytes(b"\n".join(lines))
    assert isinstance(acct.archive(sb.id), soulpass.Committed)


def test_a_torn_buffer_tail_is_cut_by_the_next_append_and_old_lines_still_read(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    sb = _sandbox_with_turns(acct, 1)
    path = tmp_path / f"accounts/ann/sandboxes/{sb.id}/session_buffer.jsonl"
    first = path.read_bytes()
    legacy = first.split(b',"seq":')[0] + b"}\n"  # a line written before the checksums
    path.write_bytes(legacy + b'{"event_id": "torn')  # and an append cut short by a crash
    sb.add_turn("user", "after the crash")
    assert path.read_bytes().startswith(legacy) and b"torn" not in path.read_bytes()
    assert [t["text_excerpt"] for t in sb.buffer().new_turns] == ["message 0 about the harbour and the boats",
                                                                  "after the crash"]


def test_one_unreadable_record_file_does_not_hide_its_kind(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from soulpass.integrity import audit

    sp = soulpass.open(tmp_path, embedder="none")
    acct = sp.create_account("ann")
    _sandbox_with_turns(acct, 3).archive()
    ids = sorted(r.id for r in acct.records("turn_user"))
    bad = next((tmp_path / "accounts/ann/core").rglob(f"{ids[1]}.json"))
    bad.write_bytes(b"\x00garbage")
    with caplog.at_level("WARNING"):
        listed = sorted(r.id for r in acct.records("turn_user"))
    assert listed == [ids[0], ids[2]] and ids[1] in caplog.text
    report = audit(sp, "ann")
    assert not report.ok and any(ids[1] in f"{f.subject} {f.detail}" for f in report.findings), report.findings


def test_a_damaged_catalog_is_rebuilt_and_search_answers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from soulpass.index.catalog import catalog_path

    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    _sandbox_with_turns(acct, 3).archive()
    assert acct.search("message 2")
    acct.close()
    catalog_path(acct.store).write_bytes(b"this is not a database" * 100)
    again = soulpass.open(tmp_path, embedder="none").account("ann")
    with caplog.at_level("WARNING"):
        hits = again.search("message 2")
    assert "message 2" in hits[0].text and "rebuilt" in caplog.text


def test_a_log_line_damaged_but_still_json_is_an_error_naming_it(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    for n in range(3):
        _sandbox_with_turns(acct, n + 1).archive()
    log = tmp_path / "accounts/ann/log/versions.jsonl"
    sums = tmp_path / "accounts/ann/log.sums"
    assert len(sums.read_bytes().splitlines()) == 3  # one checksum per version, outside the log itself
    lines = log.read_bytes().split(b"\n")
    damaged = lines[1].replace(b'"timestamp": "2', b'"timestamp": "1')  # still valid JSON
    assert damaged != lines[1]
    log.write_bytes(b"\n".join([lines[0], damaged, *lines[2:]]))
    with pytest.raises(soulpass.Corrupted, match=r"versions\.jsonl:2 is damaged"):
        soulpass.open(tmp_path, embedder="none").account("ann").log()
    log.write_bytes(b"\n".join(lines))
    sums.unlink()  # a log restored without its checksums (a passport, a backup) reads as before
    again = soulpass.open(tmp_path, embedder="none").account("ann")
    assert [e.version for e in again.log()] == [1, 2, 3]
    _sandbox_with_turns(again, 1).archive()  # the next commit covers every version again
    assert len(sums.read_bytes().splitlines()) == 4
