"""Permanent ids for a version: the per-month counters, read from a snapshot, written back as documents."""

from __future__ import annotations

from datetime import datetime

from soulpass.ids import PERMANENT_PREFIXES, permanent_id
from soulpass.store.contract import DocumentPut, Snapshot
from soulpass.store.keys import id_counter_key

__all__ = ["IdAllocator"]


class IdAllocator:
    """Allocates ids for version ``version`` from the per-month counters (``id_counter_key``) at ``master``."""

    def __init__(self, master: Snapshot, version: int) -> None:
        self.master, self.version = master, version
        self.months: dict[str, dict[str, dict[str, int]]] = {}

    def allocate(self, kind: str, when: datetime) -> str:
        day = when.strftime("%Y%m%d")
        month = self.months.get(day[:6])
        if month is None:
            raw = self.master.document(id_counter_key(day[:6]))
            month = self.months[day[:6]] = {d: dict(c) for d, c in (raw or {}).get("days", {}).items()}
        prefix = PERMANENT_PREFIXES[kind]
        n = month.setdefault(day, {}).get(prefix, 0) + 1
        month[day][prefix] = n
        return permanent_id(kind, day, n)

    def documents(self) -> list[DocumentPut]:
        """The counter documents this version writes (ids are never reused, not even by a rollback)."""
        return [DocumentPut(id_counter_key(m), {"version": self.version, "days": days})
                for m, days in sorted(self.months.items())]
