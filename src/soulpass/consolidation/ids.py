"""Permanent ids for a version: the per-month counters, read from a snapshot, written back as documents."""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePosixPath

from soulpass.ids import PERMANENT_PREFIXES, permanent_id
from soulpass.store.contract import DocumentPut, Snapshot
from soulpass.store.keys import RECORD_DIRS, id_counter_key, record_path

__all__ = ["IdAllocator"]


class IdAllocator:
    """Allocates ids for version ``version`` from the per-month counters (``id_counter_key``) at ``master``."""

    def __init__(self, master: Snapshot, version: int) -> None:
        self.master, self.version = master, version
        self.months: dict[str, dict[str, dict[str, int]]] = {}
        self._checked: set[tuple[str, str]] = set()  # (day, kind) whose counter was checked against the records

    def allocate(self, kind: str, when: datetime) -> str:
        day = when.strftime("%Y%m%d")
        month = self.months.get(day[:6])
        if month is None:
            raw = self.master.document(id_counter_key(day[:6]))
            month = self.months[day[:6]] = {d: dict(c) for d, c in (raw or {}).get("days", {}).items()}
        prefix = PERMANENT_PREFIXES[kind]
        n = month.setdefault(day, {}).get(prefix, 0) + 1
        if (day, kind) not in self._checked and kind in RECORD_DIRS:  # journal entries are kept by title
            self._checked.add((day, kind))
            n = self._first_free(kind, day, n)
        month[day][prefix] = n
        return permanent_id(kind, day, n)

    def _first_free(self, kind: str, day: str, n: int) -> int:
        """``n``, or past the highest number of ``kind`` and ``day`` already stored when record
        ``n`` exists: a counter document lost or restored from an older copy never issues an id
        twice. One record looked up per day and kind in an archive."""
        if self.master.record(permanent_id(kind, day, n)) is None:
            return n
        stem = f"{PERMANENT_PREFIXES[kind]}_{day}_"
        taken = [PurePosixPath(key).stem[len(stem):] for key in self.master.keys(str(PurePosixPath(
            record_path(permanent_id(kind, day, n))).parent))]
        return max([n, *(int(t) + 1 for t in taken if t.isdigit())])

    def documents(self) -> list[DocumentPut]:
        """The counter documents this version writes (ids are never reused, not even by a rollback)."""
        return [DocumentPut(id_counter_key(m), {"version": self.version, "days": days})
                for m, days in sorted(self.months.items())]
