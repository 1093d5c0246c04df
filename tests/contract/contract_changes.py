"""Typed changes for the contract suite: what a planner would hand a store, built by hand."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from soulpass.prose import JournalEntry
from soulpass.records import CoreMemory, Episode, Record, SemanticFact, StateBlob
from soulpass.store.contract import Change, DocumentPut, SandboxClose, VersionEntry
from soulpass.store.keys import CORE_MEMORY, journal_path, record_path, state_path

T0 = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
CLIPBOARD = "core/06_Clipboard/helper.md"
SHARD = "core/09_Genesis_Knowledge_System/shards/abc.json"
JOURNAL = journal_path("reflections", "2026-01-02", "Thought")


def at(version: int) -> datetime:
    return T0 + timedelta(minutes=version)


def episode(version: int, n: int) -> Episode:
    return Episode(id=f"EP_20260102_{n:03d}", episode_id=f"EP_20260102_{n:03d}", version=version,
                   created_at=at(version), text=f"episode {n} of version {version}")


def fact(version: int, n: int, obj: str, **extra: Any) -> SemanticFact:
    return SemanticFact(id=f"SF_20260102_{n:03d}", subject="User", predicate="likes", object=obj,
                        confidence=0.9, version=version, valid_from_version=version, created_at=at(version),
                        **extra)


def entry(version: int, records: tuple[Record, ...] = (), documents: tuple[DocumentPut, ...] = (),
          retired: tuple[str, ...] = (), replaced: tuple[str, ...] = (), **fields: Any) -> VersionEntry:
    added: dict[str, list[str]] = {}
    for r in records:
        if r.version == version and r.id not in {p.removesuffix(".json").rsplit("/", 1)[-1] for p in replaced}:
            added.setdefault(r.kind, []).append(r.id)
    return VersionEntry({
        "version": version, "parent": version - 1, "timestamp": at(version).isoformat(), "kind": "archive",
        "source_sandbox": fields.pop("source_sandbox", None), "counts": {k: len(v) for k, v in added.items()},
        "added": added, "written": [d.key for d in documents], "replaced": list(replaced),
        "retired": list(retired), "superseded": fields.pop("superseded", []), **fields})


def change(version: int, records: tuple[Record, ...] = (), documents: tuple[DocumentPut, ...] = (),
           retires: tuple[str, ...] = (), replaced: tuple[str, ...] = (), closes: str | None = None,
           bulk: bool = False, keep: bool = False, **fields: Any) -> Change:
    return Change(entry(version, records, documents, retires, replaced, **fields), records=records,
                  documents=documents, retires=retires, bulk=bulk,
                  closes=None if closes is None else SandboxClose(closes, at(version), keep=keep))


def core(version: int, name: str) -> DocumentPut:
    return DocumentPut(CORE_MEMORY, CoreMemory(identity={"name": name}, version=version, updated_at=at(version)))


def state(version: int, mood: str) -> DocumentPut:
    return DocumentPut(state_path("ire"), StateBlob(name="ire", data={"mood": mood}, version=version,
                                                    updated_at=at(version)))


def clipboard(version: int, *items: str) -> DocumentPut:
    return DocumentPut(CLIPBOARD, {"kind": "clipboard", "agent": "helper", "version": version,
                                   "updated_at": at(version).isoformat(), "schema_version": 1, "items": list(items)})


def shard(version: int, edges: Mapping[str, Any]) -> DocumentPut:
    return DocumentPut(SHARD, {"kind": "gks_shard", "version": version, "edges": dict(edges)})


def journal(version: int, text: str) -> DocumentPut:
    return DocumentPut(JOURNAL, JournalEntry(id="JE_20260102_001", text=text, type="reflection", title="Thought",
                                             version=version, created_at=at(version)))


def record_key(record: Record) -> str:
    return record_path(record.id)
