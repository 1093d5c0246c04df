"""The contract's values: typed views over what the version log holds."""

from __future__ import annotations

from datetime import UTC, datetime

from soulpass.store.contract import Change, Supersession, VersionEntry


def test_version_entry_reads_its_fields() -> None:
    entry = VersionEntry({"version": 3, "parent": 2, "kind": "archive", "timestamp": "2026-01-02T03:04:05+00:00",
                          "source_sandbox": "sb_1", "counts": {"fact": "2"},
                          "added": {"fact": ["SF_20260102_001"]}, "restored": {"fact": ["SF_20260101_001"]},
                          "written": ["core/10_state/ire_state.json"], "retired": [],
                          "superseded": [{"fact": "SF_20260101_002", "by": "SF_20260102_001"}]})
    assert (entry.version, entry.parent, entry.kind, entry.source_sandbox) == (3, 2, "archive", "sb_1")
    assert entry.timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert entry.counts == {"fact": 2}
    assert entry.added == {"fact": ("SF_20260102_001", "SF_20260101_001")}
    assert entry.written == ("core/10_state/ire_state.json",) and entry.retired == ()
    assert entry.superseded == (Supersession("SF_20260101_002", "SF_20260102_001"),)


def test_version_zero_entry_is_empty() -> None:
    entry = VersionEntry({"version": 0, "parent": None, "counts": {}})
    assert (entry.version, entry.parent, entry.kind, entry.timestamp, entry.added) == (0, None, "", None, {})


def test_a_change_is_planned_on_its_parent() -> None:
    change = Change(VersionEntry({"version": 5, "parent": 4}))
    assert (change.version, change.parent, change.records, change.closes) == (5, 4, (), None)
