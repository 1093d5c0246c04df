"""Planning prose records into a version: permanent ids, file paths, and the semantic-hash check.

Pure: the master is only read (a snapshot, which also finds the entries already stored with a
semantic hash), so ``archive --dry-run`` shows what would be stored, repeated or skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from soulpass.consolidation.ids import IdAllocator
from soulpass.consolidation.rules import JournalRule
from soulpass.errors import Corrupted
from soulpass.prose import FOLDER_OF_TYPE, JournalEntry, slug
from soulpass.store.contract import Change, DocumentPut, Snapshot, VersionEntry
from soulpass.store.keys import JOURNAL_DIR, journal_path

__all__ = ["JournalPlan", "plan_journal", "plan_journal_import"]


@dataclass
class JournalPlan:
    """What the entries of one version become: files, ids and the repeats found."""

    documents: list[DocumentPut] = field(default_factory=list)  # the entries, under their paths
    added: list[dict[str, str]] = field(default_factory=list)  # {"id", "path", "temp_id"}
    duplicates: list[dict[str, Any]] = field(default_factory=list)  # not stored: linked to the original
    repeats: list[dict[str, Any]] = field(default_factory=list)  # stored: a recurring insight
    id_map: dict[str, str] = field(default_factory=dict)

    @property
    def paths(self) -> list[str]:
        return [a["path"] for a in self.added]


def plan_journal(master: Snapshot, entries: Iterable[JournalEntry], *, version: int, ids: IdAllocator,
                 rule: JournalRule, session_id: str | None = None) -> JournalPlan:
    """Entries (temporary or imported ids) -> permanent ids, paths and file bytes for ``version``.

    Oldest first; an entry is checked against the master's entries with its semantic hash and the
    entries before it.
    """
    plan = JournalPlan()
    taken: set[str] = set()
    planned: dict[str, list[tuple[str, str, str]]] = {}  # hash -> (id, path, text) in this plan
    ordered = sorted(entries, key=lambda e: (e.created_at, e.id))
    stored = master.with_semantic_hash(JOURNAL_DIR, {e.semantic_hash for e in ordered}) if ordered else {}
    for entry in ordered:
        earlier = _earlier(master, stored.get(entry.semantic_hash, ()), planned, entry.semantic_hash)
        same_text = next((e for e in earlier if e[2] == entry.text), None)
        if earlier and (rule.on_repeat == "skip_hash" or (rule.on_repeat == "skip_exact" and same_text)):
            first = same_text or earlier[0]
            plan.duplicates.append({"entry": entry.id, "duplicate_of": first[0], "path": first[1],
                                    "semantic_hash": entry.semantic_hash,
                                    "why": "same text and semantic hash" if same_text else "same semantic hash"})
            plan.id_map[entry.id] = first[0]
            continue
        new_id = ids.allocate("journal", entry.created_at)
        path = _free_path(master, taken, entry)
        taken.add(path)
        update: dict[str, Any] = {"id": new_id, "version": version}
        if session_id is not None:
            update["session_id"] = session_id
        if earlier:
            update["repeats"] = earlier[0][0]
            plan.repeats.append({"entry": new_id, "repeats": earlier[0][0], "path": path,
                                 "semantic_hash": entry.semantic_hash})
        final = entry.model_copy(update=update)
        plan.documents.append(DocumentPut(path, final))
        plan.added.append({"id": new_id, "path": path, "temp_id": entry.id})
        plan.id_map[entry.id] = new_id
        planned.setdefault(entry.semantic_hash, []).append((new_id, path, entry.text))
    return plan


def _earlier(master: Snapshot, stored: Iterable[tuple[str, str]], planned: dict[str, list[tuple[str, str, str]]],
             shash: str) -> list[tuple[str, str, str]]:
    out = []
    for rid, path in stored:
        raw = master.document(path)
        if raw is not None:
            out.append((rid, path, str(raw.get("text", ""))))
    return out + planned.get(shash, [])


def _free_path(master: Snapshot, taken: set[str], entry: JournalEntry) -> str:
    folder = FOLDER_OF_TYPE[entry.type]
    day = entry.created_at.strftime("%Y-%m-%d")
    title = slug(entry.title)
    for n in range(1, 10_000):
        path = journal_path(folder, day, title, n)
        if path not in taken and master.document(path) is None:
            return path
    raise Corrupted(f"more than 9,999 entries named {day}_{title} in {folder}/")


def plan_journal_import(master: Snapshot, entries: Sequence[JournalEntry], now: datetime, *,
                        rule: JournalRule) -> tuple[Change, JournalPlan]:
    """Many entries as one version on ``master`` (HEAD), a bulk change (``soulpass import mira``)."""
    head = master.version
    version = head + 1
    ids = IdAllocator(master, version)
    plan = plan_journal(master, entries, version=version, ids=ids, rule=rule)
    counts = dict(master.entry().counts)
    counts["journal"] = int(counts.get("journal", 0)) + len(plan.added)
    entry = VersionEntry({"version": version, "parent": head, "timestamp": now.isoformat(), "kind": "import",
                          "added": {}, "added_counts": {"journal": len(plan.added)}, "written": plan.paths,
                          "journal": [{"id": a["id"], "path": a["path"]} for a in plan.added],
                          "duplicates_count": len(plan.duplicates), "replaced": [], "retired": [],
                          "superseded": [], "conflicts": [], "counts": counts})
    return Change(entry, documents=(*plan.documents, *ids.documents()), bulk=True), plan

