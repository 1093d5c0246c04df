"""Document rules: ``latest_wins`` for states and profile, ``careful_merge`` for core memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from soulpass.consolidation.rules import CoreRule
from soulpass.records import CoreMemory, CoreProposal

__all__ = ["CoreMerge", "LatestWins", "latest_wins"]


@dataclass(frozen=True)
class LatestWins:
    data: dict[str, Any]
    key_times: dict[str, datetime]
    changed: tuple[str, ...]
    kept_master: tuple[str, ...]


def latest_wins(
    master_data: dict[str, Any],
    master_times: dict[str, datetime],
    deltas: list[tuple[datetime, dict[str, Any]]],
) -> LatestWins:
    """Apply deltas key by key; a key the master set later than the delta keeps the master's value."""
    data, times = dict(master_data), dict(master_times)
    changed: list[str] = []
    kept: list[str] = []
    for at, delta in sorted(deltas, key=lambda d: d[0]):
        for key, value in delta.items():
            if key in times and times[key] > at:
                if key not in kept:
                    kept.append(key)
                continue
            if (key not in data or data[key] != value) and key not in changed:
                changed.append(key)
            data[key], times[key] = value, at
    return LatestWins(data, times, tuple(changed), tuple(k for k in kept if k not in changed))


@dataclass
class CoreMerge:
    """Careful merge: only confident proposals, existing values kept, every decision logged."""

    rule: CoreRule
    head: CoreMemory
    parent: CoreMemory | None  # the core as the sandbox saw it; None when not rebased
    identity: dict[str, Any] = field(init=False)
    worldview: dict[str, Any] = field(init=False)
    values: list[str] = field(init=False)
    changes: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.identity = dict(self.head.identity)
        self.worldview = dict(self.head.worldview)
        self.values = list(self.head.values)

    def propose(self, p: CoreProposal, event_id: str) -> None:
        entry = {"section": p.section, "key": p.key, "value": p.value, "confidence": p.confidence,
                 "reason": p.reason, "event_id": event_id}
        if p.confidence < self.rule.min_confidence:
            self.rejected.append({**entry, "why": f"confidence {p.confidence} below {self.rule.min_confidence}"})
            return
        if p.section == "values":
            if p.value in self.values:
                return
            self.values.append(p.value)
            self.changes.append({**entry, "old": None, "new": p.value})
            return
        section = self.identity if p.section == "identity" else self.worldview
        assert p.key is not None
        old = section.get(p.key)
        if self.parent is not None:
            before = getattr(self.parent, p.section).get(p.key)
            master_now = getattr(self.head, p.section).get(p.key)
            if before != master_now and master_now != p.value:
                self.conflicts.append({
                    **entry, "type": "core_field_changed_on_both_sides", "kept": master_now,
                    "why": "master changed this field after the sandbox started; master's value kept"})
                return
        if old == p.value:
            return
        if old is not None and not self.rule.allow_overwrite:
            self.rejected.append({**entry, "why": f"existing value {old!r} preserved (allow_overwrite is off)"})
            return
        section[p.key] = p.value
        self.changes.append({**entry, "old": old, "new": p.value})

    def result(self) -> dict[str, Any]:
        return {"identity": self.identity, "values": self.values, "worldview": self.worldview}
