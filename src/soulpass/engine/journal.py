"""The verbatim journal of an account: add entries, look them up fast, and find recurring insights.

Entries are prose records (:class:`soulpass.prose.JournalEntry`) written through a sandbox and
archived like every other record; the catalog holds a row per entry (id, path, tags, time,
semantic hash), so lookups by tag, time range and semantic hash are index lookups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from soulpass.consolidation.outcomes import Committed, Unchanged
from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import check_record_id
from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.contract import IndexCatalog
from soulpass.prose import ENTRY_TYPES, TYPE_OF_FOLDER, JournalEntry
from soulpass.store.contract import AccountBackend
from soulpass.store.keys import JOURNAL_DIR

if TYPE_CHECKING:
    from soulpass.engine.account import Account

__all__ = ["Journal", "JournalItem", "PatternGroup", "Patterns"]

JOURNAL = ("journal",)
NEAR_THRESHOLD = 0.85  # cosine of MiniLM embeddings of two core insights that say the same thing


@dataclass(frozen=True)
class JournalItem:
    """One entry as the index knows it (no file read): what a lookup returns."""

    id: str
    type: str
    path: str
    timestamp: datetime | None
    tags: tuple[str, ...]
    semantic_hash: str
    version: int

    @classmethod
    def from_row(cls, row: CatalogRow) -> JournalItem:
        folder = row.path.split("/")[2] if row.path.startswith(JOURNAL_DIR + "/") else ""
        return cls(id=row.id, type=TYPE_OF_FOLDER.get(folder, "journal"), path=row.path,
                   timestamp=row.event_time, tags=row.tags, semantic_hash=row.semantic_hash, version=row.version)


@dataclass(frozen=True)
class PatternGroup:
    """Entries that state one insight: by identical semantic hash, or by embedding similarity."""

    how: str  # "identical_hash" | "similar"
    insight: str
    similarity: float  # 1.0 for identical hashes, else the lowest pairwise cosine inside the group
    entries: tuple[dict[str, Any], ...]  # id, timestamp, path, core_insight, semantic_hash, by date

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "insight": self.insight, "similarity": round(self.similarity, 4),
                "entries": list(self.entries)}


@dataclass(frozen=True)
class Patterns:
    identical: tuple[PatternGroup, ...]
    similar: tuple[PatternGroup, ...]
    threshold: float
    entries: int
    embedder: str | None = None
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries, "threshold": self.threshold, "embedder": self.embedder,
                "identical_hash": [g.to_json() for g in self.identical],
                "similar": [g.to_json() for g in self.similar], "notes": list(self.notes)}


class Journal:
    """``account.journal()``: the prose records of one account."""

    def __init__(self, account: Account) -> None:
        self.account = account

    # --- writing -------------------------------------------------------------------------

    def add(self, text: str, *, type: str = "journal", title: str = "", tags: Iterable[str] = (),
            core_insight: str = "", brief_summary: str = "", timestamp: datetime | None = None,
            agent: str | None = None) -> dict[str, Any]:
        """One step: open a sandbox, write the entry, archive. Returns ``{"version", "id", "path",
        "duplicate_of", "repeats"}``: an exact repeat is not stored and names the original."""
        sb = self.account.create_sandbox("journal")
        try:
            temp = sb.add_journal(text, type=type, title=title, tags=tags, core_insight=core_insight,
                                  brief_summary=brief_summary, timestamp=timestamp, agent=agent)
        except BaseException:
            sb.discard()
            raise
        match sb.archive():
            case Committed(plan=plan) | Unchanged(plan=plan):
                pass
            case _:  # pragma: no cover - a fresh sandbox cannot have been archived already
                raise InvalidInput("the journal sandbox was archived elsewhere")
        added = next((a for a in plan.journal if a["temp_id"] == temp), None)
        dup = next((d for d in plan.duplicates if d.get("entry") == temp), None)
        rep = next((r for r in plan.journal_repeats if added and r["entry"] == added["id"]), None)
        return {"version": plan.version if added else self.account.head(),
                "id": added["id"] if added else (dup or {}).get("duplicate_of"),
                "path": added["path"] if added else (dup or {}).get("path"),
                "stored": added is not None,
                "duplicate_of": dup["duplicate_of"] if dup else None,
                "repeats": rep["repeats"] if rep else None}

    # --- reading -------------------------------------------------------------------------

    def _catalog(self) -> IndexCatalog[AccountBackend]:
        return self.account.index().catalog

    def find(self, *, tags: Iterable[str] = (), since: datetime | None = None, until: datetime | None = None,
             semantic_hash: str | None = None, type: str | None = None, at: int | None = None) -> list[JournalItem]:
        """Entries by tag (any of), time range ``[since, until)``, semantic hash and type, oldest
        first; index lookups only (the files are not read)."""
        if type is not None and type not in ENTRY_TYPES:
            raise InvalidInput(f"type must be one of {', '.join(ENTRY_TYPES)}, not {type!r}", field="type")
        if at is not None:
            self.account.check_version(at)
        filters = Filters(kinds=JOURNAL, tags=tuple(tags), since=since, until=until, as_of_version=at)
        cat = self._catalog()
        if semantic_hash is not None:
            rows = cat.with_semantic_hash([semantic_hash], filters)
        else:
            rows = cat.get(cat.ids_matching(filters), as_of_version=at)
        items = [JournalItem.from_row(r) for r in rows]
        if type is not None:
            items = [i for i in items if i.type == type]
        return sorted(items, key=lambda i: (i.timestamp or datetime.min, i.id))

    def get(self, entry_id: str, at: int | None = None) -> tuple[JournalEntry, str]:
        """The entry with this id (as of version ``at``, default HEAD) and its account-relative path."""
        check_record_id(entry_id, "journal entry id")
        version = self.account.check_version(at)
        rows = self._catalog().get([entry_id], as_of_version=at)
        row = rows[0] if rows else None
        if row is None or row.kind != "journal" or not row.in_force_at(version):
            raise NotFound(f"journal entry {entry_id} does not exist at version {version}", id=entry_id)
        raw = self.account.store.snapshot(version).document(row.path)
        if raw is None:
            raise NotFound(f"{row.path} is missing from disk (see `soulpass audit`)", id=entry_id, path=row.path)
        return JournalEntry.model_validate(raw), row.path

    def read(self, relpath: str) -> JournalEntry:
        raw = self.account.store.snapshot().document(relpath)
        if raw is None:
            raise NotFound(f"{relpath} does not exist", path=relpath)
        return JournalEntry.model_validate(raw)

    def entries(self) -> list[tuple[JournalEntry, str]]:
        """Every entry in force with its path, oldest first (reads every file)."""
        return [(self.read(i.path), i.path) for i in self.find()]

    # --- patterns --------------------------------------------------------------------------

    def patterns(self, threshold: float = NEAR_THRESHOLD, *, similar: bool = True) -> Patterns:
        """Recurring insights over time: groups of identical semantic hashes, and groups whose core
        insights' embeddings are at least ``threshold`` similar (needs an embedder)."""
        if not 0.0 < threshold <= 1.0:
            raise InvalidInput(f"threshold must be in (0, 1], not {threshold}", field="threshold")
        entries = self.entries()
        info = [_entry_info(e, p) for e, p in entries]
        by_hash: dict[str, list[int]] = defaultdict(list)
        for n, (e, _p) in enumerate(entries):
            by_hash[e.semantic_hash].append(n)
        identical = [PatternGroup("identical_hash", entries[idx[0]][0].core_text(), 1.0,
                                  tuple(info[i] for i in idx))
                     for idx in by_hash.values() if len(idx) > 1]
        notes: list[str] = []
        groups: list[PatternGroup] = []
        embedder = self.account.sp.embedder() if similar else None
        if similar and embedder is None:
            notes.append("no embedder (install the 'embed' extra): near-duplicates not searched")
        if embedder is not None and len(by_hash) > 1:
            reps = [idx[0] for idx in by_hash.values()]  # one entry per distinct hash
            vectors = np.asarray(embedder.embed_batch([entries[i][0].core_text() for i in reps]), dtype=np.float32)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            sims = vectors @ vectors.T
            for comp in _components(sims, threshold):
                members = [i for r in comp for i in by_hash[entries[reps[r]][0].semantic_hash]]
                low = float(min(sims[a, b] for a in comp for b in comp if a < b))
                members.sort(key=lambda i: (entries[i][0].created_at, entries[i][0].id))
                groups.append(PatternGroup("similar", entries[members[0]][0].core_text(), low,
                                           tuple(info[i] for i in members)))
        key = _group_key
        return Patterns(identical=tuple(sorted(identical, key=key)), similar=tuple(sorted(groups, key=key)),
                        threshold=threshold, entries=len(entries),
                        embedder=embedder.model_id if embedder else None, notes=tuple(notes))


def _group_key(g: PatternGroup) -> tuple[str, str]:
    return (str(g.entries[0]["timestamp"]), str(g.entries[0]["id"]))


def _entry_info(entry: JournalEntry, path: str) -> dict[str, Any]:
    return {"id": entry.id, "timestamp": entry.created_at.isoformat(), "type": entry.type, "path": path,
            "core_insight": entry.core_text(), "semantic_hash": entry.semantic_hash}


def _components(sims: Any, threshold: float) -> list[list[int]]:
    """Connected groups (size > 1) of the graph "cosine >= threshold", by union-find."""
    n = sims.shape[0]
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rows, cols = np.nonzero(np.triu(sims >= threshold, k=1))
    for a, b in zip(rows.tolist(), cols.tolist(), strict=True):
        parent[root(a)] = root(b)
    comps: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        comps[root(i)].append(i)
    return [sorted(c) for c in comps.values() if len(c) > 1]
