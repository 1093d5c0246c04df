"""A home written by the release before the store contract (commit f9fd048) opens unchanged.

``data/legacy_home_f9fd048.tar.gz`` holds the home (six versions: archives with facts, states,
core memory, a clipboard and a journal entry; a rebase; a rollback; a bulk append; a journal
import; one open sandbox) and ``expected.json``, what that release read back at every version.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass import Committed
from soulpass.records import TurnUser
from soulpass.store.files.account import AccountStore
from soulpass.store.files.master import FilesMasterStore
from soulpass.store.keys import RECORD_DIRS

ARCHIVE = Path(__file__).parent / "data" / "legacy_home_f9fd048.tar.gz"


@pytest.fixture
def legacy(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "home", json.loads((tmp_path / "expected.json").read_text(encoding="utf-8"))


def read_version(acct: soulpass.Account, v: int) -> dict[str, Any]:
    """What ``expect.py`` recorded with the old release, read with this one."""
    return {
        "records": {k: [r.model_dump(mode="json") for r in acct.records(k, v)] for k in RECORD_DIRS},
        **{ref: acct.show(ref, v).model_dump(mode="json") for ref in ("core", "profile", "gks")},
        "states": {n: s.model_dump(mode="json") for n, s in acct.states(v).items()},
        # ``documents`` (what a range did to core memory, states ...) is new since that release (issue 16)
        "diff_from_0": {k: d for k, d in acct.diff(0, v).to_json().items() if k != "documents"},
    }


def test_every_version_reads_as_the_old_release_read_it(legacy: tuple[Path, dict[str, Any]]) -> None:
    home, expected = legacy
    acct = soulpass.open(home, embedder="none").account("alice")
    assert acct.head() == expected["head"] == 6
    assert [e.to_json() for e in acct.log()] == expected["log"]
    for v in range(acct.head() + 1):
        assert read_version(acct, v) == expected["versions"][str(v)], f"version {v}"


def test_the_contract_reads_every_version(legacy: tuple[Path, dict[str, Any]]) -> None:
    home, expected = legacy
    store = FilesMasterStore(AccountStore(home, "alice"))
    log = store.log()
    assert [e.fields["timestamp"] for e in log] == [e["timestamp"] for e in expected["log"]]
    assert log[4].kind == "bulk" and log[4].added == {"episode": ("EP_20250304_001",), "fact": ("SF_20250304_001",)}
    for v in range(store.head() + 1):
        snap = store.snapshot(v)
        for kind in RECORD_DIRS:
            got = [r.model_dump(mode="json") for r in snap.records(kind)]
            assert got == expected["versions"][str(v)]["records"][kind], f"{kind} at version {v}"
    changes = list(store.changes(since=0))
    assert [c.entry.version for c in changes] == [1, 2, 3, 4, 5, 6]
    assert all(not c.unreadable for c in changes)


def test_archiving_on_top_of_an_old_home(legacy: tuple[Path, dict[str, Any]]) -> None:
    home, expected = legacy
    acct = soulpass.open(home, embedder="none").account("alice")
    (open_sandbox,) = acct.sandboxes()
    sb = acct.sandbox(open_sandbox.sandbox_id)
    sb.add_fact("User", "owns", "a boat", confidence=0.9)
    result = sb.archive()
    assert isinstance(result, Committed) and result.version == 7
    assert result.plan.parent_version == 6 and not result.plan.rebased  # opened at HEAD by the old release
    assert {f.object for f in acct.records("fact")} >= {"a boat", "a bike"}
    last = list(acct.records("turn_user", 7))[-1]
    assert isinstance(last, TurnUser) and last.text_excerpt == "still talking"
    for v in range(7):  # the old versions are untouched
        assert read_version(acct, v) == expected["versions"][str(v)], f"version {v}"
    hits = acct.search("boat", k=3)
    assert [h.id for h in hits][:1] == result.plan.added["fact"]  # the index caught up from the old log


def test_old_unsealed_lines_read_and_sealed_lines_follow_them(legacy: tuple[Path, dict[str, Any]]) -> None:
    """Issue 38: the old release's log and buffer lines carry no sequence or chain; they still read,
    a change to one is still caught by ``log.sums``, and what this release appends is sealed."""
    home, _expected = legacy
    acct = soulpass.open(home, embedder="none").account("alice")
    (open_sandbox,) = acct.sandboxes()
    sb = acct.sandbox(open_sandbox.sandbox_id)
    buffer = home / f"accounts/alice/sandboxes/{sb.id}/session_buffer.jsonl"
    old_lines = buffer.read_bytes().splitlines()
    assert not any(b'"chain":"' in line for line in old_lines)
    sb.add_fact("User", "owns", "a boat", confidence=0.9)
    new_line = buffer.read_bytes().splitlines()[-1]
    assert b'"seq":%d,"chain":"' % (len(old_lines) + 1) in new_line
    assert isinstance(sb.archive(), Committed)
    log = home / "accounts/alice/log/versions.jsonl"
    lines = log.read_bytes().splitlines()
    assert [b'"chain":"' in line for line in lines] == [False] * 6 + [True]
    assert [e.version for e in acct.log()] == list(range(1, 8))
    lines[2] = lines[2].replace(b'"parent": 2', b'"parent": 1')  # an old line changed in place
    log.write_bytes(b"".join(line + b"\n" for line in lines))
    with pytest.raises(soulpass.Corrupted, match=r"versions\.jsonl:3"):
        acct.log()
