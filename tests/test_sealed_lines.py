"""Damaged lines never lose data silently (issue 38 item 4).

Each corruption of a session buffer, the version log and the ``history/`` copies — a flipped byte,
a truncated tail, garbage, a deleted, duplicated or swapped line, a line with its checksum stripped —
is either healed with nothing lost or refused with ``Corrupted`` naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.integrity import audit
from soulpass.store.files.layout import LOG_FILE
from soulpass.store.files.log_sums import SUMS_FILE
from soulpass.store.sealed_lines import START, ChainCheck, seal, unsealed

Damage = Callable[[list[bytes]], list[bytes]]


def _flip(lines: list[bytes]) -> list[bytes]:
    return [lines[0], lines[1].replace(b"turn 1", b"turn X").replace(b'"turn_user": 2', b'"turn_user": 9'),
            *lines[2:]]


def _strip(lines: list[bytes]) -> list[bytes]:
    return [lines[0], unsealed(lines[1]), *lines[2:]]


def _strip_first(lines: list[bytes]) -> list[bytes]:
    return [unsealed(lines[0]), *lines[1:]]


DAMAGES: dict[str, tuple[Damage, str]] = {
    "flip": (_flip, r":2 is damaged"),
    "garbage": (lambda ls: [ls[0], b"\x00\xffnot json at all", *ls[2:]], r":2 has no sequence number"),
    "delete": (lambda ls: [ls[0], *ls[2:]], r":2 carries sequence number 3 where 2 was due: line\(s\) 2 are missing"),
    "duplicate": (lambda ls: [ls[0], ls[1], ls[1], *ls[2:]], r":3 carries sequence number 2 where 3 was due"),
    "swap": (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], r":2 carries sequence number 3 where 2 was due"),
    "strip": (_strip, r":2 has no sequence number or checksum although the lines before it have"),
    # the first line reads as an old one: log.sums catches it, else the next line's chain breaks
    "strip_first": (_strip_first, r":[12] is damaged"),
}


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


# --- the session buffer --------------------------------------------------------------------


def _buffered(home: Path, turns: int = 5) -> tuple[soulpass.Account, soulpass.Sandbox, Path]:
    acct = soulpass.open(home, embedder="none").create_account("ann")
    sb = acct.create_sandbox("s")
    for i in range(turns):
        sb.add_turn("user", f"turn {i} about the harbour")
    return acct, sb, home / f"accounts/ann/sandboxes/{sb.id}/session_buffer.jsonl"


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_a_damaged_buffer_is_refused_by_archive_naming_the_line(tmp_path: Path, case: str) -> None:
    acct, sb, path = _buffered(tmp_path)
    good = _lines(path)
    damage, message = DAMAGES[case]
    _write(path, damage(good))
    with pytest.raises(soulpass.Corrupted, match=r"session_buffer\.jsonl" + message) as caught:
        acct.archive(sb.id)
    assert caught.value.details["path"] == str(path)
    assert acct.head() == 0 and not list(acct.records("turn_user"))  # nothing committed, not 4 of 5
    named = [f.subject for f in audit(acct.sp, "ann").findings if f.check == "buffer_damaged"]
    assert named == [f"sandboxes/{sb.id}/session_buffer.jsonl:{caught.value.details['line']}"]
    _write(path, good)  # repaired: every turn is archived
    result = acct.archive(sb.id)
    assert isinstance(result, Committed) and len(list(acct.records("turn_user"))) == 5


def test_a_torn_append_keeps_every_whole_line_and_the_buffer_goes_on(tmp_path: Path) -> None:
    """A torn tail is an append that never returned (never acknowledged): the whole lines stay,
    the next append cuts the fragment and continues the sequence."""
    acct, sb, path = _buffered(tmp_path)
    path.write_bytes(path.read_bytes() + b'{"event_id": "torn by a cra')
    assert len(sb.buffer().new_turns) == 5
    sb.add_turn("user", "after the crash")
    texts = [t["text_excerpt"] for t in sb.buffer().new_turns]
    assert texts[-1] == "after the crash" and len(texts) == 6
    assert isinstance(acct.archive(sb.id), Committed) and len(list(acct.records("turn_user"))) == 6


@pytest.mark.parametrize("damage", ["delete the last line", "cut the last line"])
def test_an_acknowledged_last_line_lost_is_refused_not_taken_for_a_torn_append(tmp_path: Path, damage: str) -> None:
    acct, sb, path = _buffered(tmp_path)
    data = path.read_bytes()
    cut = data[:data.rstrip(b"\n").rfind(b"\n") + 1]
    path.write_bytes(cut if damage == "delete the last line" else data[:-20])
    with pytest.raises(soulpass.Corrupted, match=r"session_buffer\.jsonl:5 is missing: 5 lines were appended"):
        acct.archive(sb.id)
    with pytest.raises(soulpass.Corrupted, match=r"session_buffer\.jsonl:5 is missing"):
        sb.add_turn("user", "never glued over the loss")  # an append refuses too: it would hide the loss
    path.write_bytes(data)
    assert isinstance(acct.archive(sb.id), Committed) and len(list(acct.records("turn_user"))) == 5


def test_every_buffer_line_is_sealed_in_sequence(tmp_path: Path) -> None:
    _acct, _sb, path = _buffered(tmp_path, 3)
    check = ChainCheck(path, "session buffer", "")
    for n, raw in enumerate(_lines(path), 1):
        assert b'"seq":%d,"chain":"' % n in raw
        check.open(raw, n, n)


# --- the version log -----------------------------------------------------------------------


def _versions(home: Path, n: int = 4) -> tuple[soulpass.Soulpass, soulpass.Account, Path]:
    sp = soulpass.open(home, embedder="none")
    acct = sp.create_account("ann")
    for i in range(n):
        sb = acct.create_sandbox(f"v{i}")
        sb.add_turn("user", f"turn {i}")
        sb.add_fact("ann", "likes", f"tea number {i}", confidence=0.9)
        sb.archive()
    return sp, acct, home / "accounts/ann" / LOG_FILE


@pytest.mark.parametrize("sums", ["with log.sums", "without log.sums"])
@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_a_damaged_log_is_corrupted_naming_the_line(tmp_path: Path, case: str, sums: str) -> None:
    sp, _acct, path = _versions(tmp_path)
    good = _lines(path)
    damage, message = DAMAGES[case]
    _write(path, damage(good))
    if sums == "without log.sums":
        (path.parent.parent / SUMS_FILE).unlink()
    acct = sp.account("ann")
    with pytest.raises(soulpass.Corrupted, match=r"versions\.jsonl" + message):
        acct.log()
    report = audit(sp, "ann")
    assert any(f.check == "log_damaged" and f.subject.startswith(LOG_FILE) for f in report.findings), report.findings


def test_a_deleted_last_log_line_is_detected_and_no_gap_is_made(tmp_path: Path) -> None:
    sp, acct, path = _versions(tmp_path)
    _write(path, _lines(path)[:-1])
    with pytest.raises(soulpass.Corrupted, match=r"versions\.jsonl:4 is missing: log\.sums covers version 4"):
        acct.log()
    sb = acct.create_sandbox("after")
    sb.add_turn("user", "one more")
    with pytest.raises(soulpass.Corrupted, match=r"ends at version 3 but HEAD is 4|versions\.jsonl:4 is missing"):
        sb.archive()  # never version 5 after 3: the gap would be permanent
    (path.parent.parent / SUMS_FILE).unlink()  # even without the witness beside the log
    with pytest.raises(soulpass.Corrupted, match=r"ends at version 3 but HEAD is 4"):
        sb.archive()
    assert any(f.check == "version_drift" for f in audit(sp, "ann").findings)


@pytest.mark.parametrize("damage", ["flip", "garbage", "delete", "truncate"])
def test_a_damaged_log_sums_leaves_a_sealed_log_readable(tmp_path: Path, damage: str) -> None:
    """``log.sums`` is a witness beside the log, not its truth: damaged, the sealed log still reads
    whole, and the next commit goes on."""
    _sp, acct, path = _versions(tmp_path)
    sums = path.parent.parent / SUMS_FILE
    data = sums.read_bytes()
    if damage == "flip":
        sums.write_bytes(data.replace(b"2 ", b"2 f", 1)[: len(data)])
    elif damage == "garbage":
        sums.write_bytes(b"\x00\xff garbage\n" + data[:20])
    elif damage == "delete":
        sums.unlink()
    else:
        sums.write_bytes(data[: len(data) // 2])
    assert [e.version for e in acct.log()] == [1, 2, 3, 4]
    sb = acct.create_sandbox("after")
    sb.add_turn("user", "one more")
    assert isinstance(sb.archive(), Committed) and [e.version for e in acct.log()] == [1, 2, 3, 4, 5]


def test_a_log_torn_mid_line_is_healed(tmp_path: Path) -> None:
    _sp, acct, path = _versions(tmp_path)
    path.write_bytes(path.read_bytes()[:-30])  # the last append cut short, no txn behind it
    acct = soulpass.open(tmp_path, embedder="none").account("ann")
    assert [e.version for e in acct.log()] == [1, 2, 3, 4]  # re-derived from VERSION.json
    sb = acct.create_sandbox("after")
    sb.add_turn("user", "one more")
    assert isinstance(sb.archive(), Committed) and [e.version for e in acct.log()] == [1, 2, 3, 4, 5]


def test_audit_reports_every_damaged_line_not_only_the_first(tmp_path: Path) -> None:
    sp, _acct, path = _versions(tmp_path, 5)
    lines = _lines(path)
    lines[1] = lines[1].replace(b'"turn_user": 2', b'"turn_user": 7')
    lines[3] = lines[3].replace(b'"turn_user": 4', b'"turn_user": 8')
    _write(path, lines)
    damaged = [f.subject for f in audit(sp, "ann").findings if f.check == "log_damaged"]
    assert damaged == [f"{LOG_FILE}:2", f"{LOG_FILE}:4"]


def test_log_entries_read_without_their_seal(tmp_path: Path) -> None:
    _sp, acct, path = _versions(tmp_path, 2)
    assert all("chain" not in e.to_json() and "seq" not in e.to_json() for e in acct.log())
    assert all(b'"seq":%d,"chain":"' % n in raw for n, raw in enumerate(_lines(path), 1))


# --- history copies ------------------------------------------------------------------------


def test_audit_checks_every_history_copy_against_the_log(tmp_path: Path) -> None:
    sp, acct, _path = _versions(tmp_path)
    account = tmp_path / "accounts/ann"
    copies = sorted((account / "history").rglob("*.json"))
    assert len(copies) >= 3
    assert not [f for f in audit(sp, "ann").findings if f.check.startswith("history")]
    flipped = copies[0].read_bytes().replace(b"\"edge_count\": 1", b"\"edge_count\": 7", 1)  # still parses
    assert flipped != copies[0].read_bytes()
    copies[0].write_bytes(flipped)
    copies[1].write_bytes(b"garbage")
    copies[2].unlink()
    report = audit(sp, "ann")
    found = {(f.check, f.subject) for f in report.findings if f.check.startswith("history")}
    rel = [str(c.relative_to(account)) for c in copies[:3]]
    assert found == {("history_damaged", rel[0]), ("history_damaged", rel[1]), ("history_missing", rel[2])}
    assert acct.head() == 4


def test_a_forget_keeps_the_history_digests_true(tmp_path: Path) -> None:
    sp, acct, _path = _versions(tmp_path)
    fact = next(iter(acct.records("fact")))
    acct.forget([fact.id])
    report = audit(sp, "ann")
    assert not [f for f in report.findings if f.check.startswith(("history", "log"))], report.findings


# --- the format ------------------------------------------------------------------------------


def test_an_unsealed_prefix_reads_and_sealed_lines_follow_it(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    old = [b'{"a": 1}', b'{"a": 2}']
    from soulpass.store.sealed_lines import link_of

    new = seal(b'{"a": 3}', 3, link_of(old[-1]))
    check = ChainCheck(path, "file", "")
    assert [check.open(raw, n, n) for n, raw in enumerate([*old, new], 1)] == [*old, b'{"a": 3}']
    check = ChainCheck(path, "file", "")
    check.open(seal(b'{"a": 1}', 1, START), 1, 1)
    with pytest.raises(soulpass.Corrupted, match=r"f\.jsonl:2 has no sequence number"):
        check.open(b'{"a": 2}', 2, 2)
