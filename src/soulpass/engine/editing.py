"""Editing one record, and reading its history: corrections that keep every earlier copy.

A record is never changed in place. ``edit`` plans a new version: a fact is superseded by a new
fact carrying the edit (as consolidation supersedes one), any other record gets a new copy of the
same id. ``history`` reads back every version that wrote the record and what each one changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from soulpass.consolidation.gks import GKSWorkingSet
from soulpass.consolidation.ids import IdAllocator
from soulpass.consolidation.rules import SemanticRule
from soulpass.consolidation.semantic import functional_base
from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import check_record_id, utc_now
from soulpass.prose import JournalEntry, brief_summary_of, first_insight
from soulpass.records import Record, SemanticFact
from soulpass.store.contract import AccountBackend, Change, DocumentPut, Snapshot, VersionEntry
from soulpass.store.keys import GKS_DATA, kind_of_id, record_path

if TYPE_CHECKING:
    from soulpass.engine.views import FieldChanges, HistoryStep

__all__ = ["JOURNAL_PREFIX", "adopted_fields", "field_changes", "journal_key", "plan_edit", "plan_journal_edit",
           "record_history"]

JOURNAL_PREFIX = "JE_"  # a prose entry's id: a document whose key (its file name) the log knows

# Fields an edit may not set: they name the record, or the store keeps them.
_FIXED = frozenset({"id", "kind", "version", "created_at", "semantic_hash", "schema_version", "episode_id",
                    "superseded_by", "supersedes", "valid_from_version", "valid_to_version"})
# The field a record's words are kept in, where ``text`` is only derived from it (``core_text``): an
# edit of ``text`` is an edit of that field, so no derived field keeps the old words.
_WORDS = {"turn_user": "text_excerpt", "turn_llm": "text_excerpt", "sensory": "content"}
# Fields that change with every copy: a history reports them apart from the content.
_BOOKKEEPING = frozenset({"version", "semantic_hash", "valid_from_version"})


def _current(master: Snapshot, record_id: str) -> Record:
    kind_of_id(record_id)  # a clear error for what is no record id
    rec = master.record(record_id)
    if rec is None:
        raise NotFound(f"record {record_id} does not exist at version {master.version}", id=record_id)
    return rec


def _edited(rec: Record, fields: Mapping[str, Any], update: Mapping[str, Any]) -> Record:
    """``rec`` with ``fields`` applied, validated as its model; bad fields are ``InvalidInput``."""
    if not fields:
        raise InvalidInput(f"edit of {rec.id} names no field to change", field="fields")
    for name in fields:
        if name in _FIXED or name not in type(rec).model_fields:
            raise InvalidInput(f"{rec.kind} field {name!r} cannot be edited", field=name)
    words = _WORDS.get(rec.kind)
    text_derived = rec.text == rec.core_text()
    if words is not None and "text" in fields and words not in fields and text_derived:
        fields = {**fields, words: fields["text"]}
    derived = {"semantic_hash"} | ({"text"} if "text" not in fields and text_derived else set())
    body = {**rec.model_dump(mode="json", exclude=derived), **fields, **update}  # derived: recomputed
    try:
        return type(rec).model_validate(body)
    except ValidationError as e:
        raise InvalidInput(f"edit of {rec.id} is invalid: {e.errors()[0]['msg']}", field="fields") from e


def plan_edit(master: Snapshot, record_id: str, fields: Mapping[str, Any], rule: SemanticRule,
              reason: str = "", by: str | None = None, now: datetime | None = None) -> Change:
    """Version HEAD+1 on ``master`` in which record ``record_id`` carries ``fields``.

    A fact is never edited (records.py): the edit becomes a new fact that supersedes it. Any other
    record gets a new copy under its own id; the earlier copies stay in the history."""
    old = _current(master, record_id)
    now = now or utc_now()
    version = master.version + 1
    entry: dict[str, Any] = {"version": version, "parent": master.version, "timestamp": now.isoformat(),
                             "kind": "edit", "edited": record_id, "fields": sorted(fields), "reason": reason,
                             "by": by, "added": {}, "superseded": [], "replaced": [], "retired": [],
                             "conflicts": [], "counts": dict(master.entry().counts)}
    if isinstance(old, SemanticFact):
        return _supersede(master, old, fields, now, entry, rule)
    new = _edited(old, fields, {"version": version})
    entry.update(replaced=[record_path(record_id)], edited_as=record_id)
    return Change(VersionEntry(entry), records=(new,))


def _supersede(master: Snapshot, old: SemanticFact, fields: Mapping[str, Any], now: datetime,
               entry: dict[str, Any], rule: SemanticRule) -> Change:
    """The edit of a fact: a new fact superseding it, and the knowledge graph moved from one to the other."""
    if old.superseded_by is not None:
        raise InvalidInput(f"fact {old.id} was superseded by {old.superseded_by}; edit that one", id=old.id)
    version = entry["version"]
    ids = IdAllocator(master, version)
    new_id = ids.allocate("fact", now)
    new = _edited(old, fields, {"id": new_id, "version": version, "created_at": now.isoformat(),
                                "valid_from_version": version, "supersedes": [old.id]})
    assert isinstance(new, SemanticFact)
    retired = old.model_copy(update={"superseded_by": new_id, "valid_to_version": version, "version": version})
    gks = GKSWorkingSet(master.document)
    gks.remove_fact(old.id, old.subject, old.predicate, old.object, functional_base(old.predicate, rule))
    gks.add_fact(new_id, new.subject, new.predicate, new.object, functional_base(new.predicate, rule))
    shards = gks.documents(version)
    totals = master.document(GKS_DATA) or {}
    shards[GKS_DATA] = {**totals, "kind": "gks", "edge_count": int(totals.get("edge_count", 0)) + gks.edge_delta,
                        "updated_at": now.isoformat(), "version": version}
    entry.update(added={"fact": [new_id]}, superseded=[{"fact": old.id, "by": new_id}], edited_as=new_id,
                 replaced=[record_path(old.id), *(k for k in shards if master.document(k) is not None)],
                 written=sorted(shards))
    entry["counts"]["fact"] = int(entry["counts"].get("fact", 0)) + 1
    entry["counts"]["facts_superseded"] = int(entry["counts"].get("facts_superseded", 0)) + 1
    documents = [DocumentPut(k, v) for k, v in sorted(shards.items())] + ids.documents()
    return Change(VersionEntry(entry), records=(new, retired), documents=tuple(documents))


def journal_key(log: Sequence[VersionEntry], entry_id: str) -> tuple[int, str] | None:
    """The version that wrote prose entry ``entry_id`` and its key, from the log (None: none did)."""
    for entry in log:
        for item in entry.fields.get("journal", []):
            if item.get("id") == entry_id:
                return entry.version, str(item["path"])
    return None


# Prose fields an edit may not set beyond ``_FIXED``: the type names the folder the file is in, and
# the import source and the repeat link are the store's bookkeeping.
_JOURNAL_FIXED = _FIXED | {"type", "source_id", "repeats"}


def plan_journal_edit(master: Snapshot, entry_id: str, key: str, fields: Mapping[str, Any], reason: str = "",
                      by: str | None = None, now: datetime | None = None) -> Change:
    """Version HEAD+1 on ``master`` in which prose entry ``entry_id`` (the document ``key``) carries
    ``fields``; the file keeps its name, the earlier copy stays in the history. A summary, insight or
    title that was derived from the old text is derived again from the new one."""
    raw = master.document(key)
    if raw is None:
        raise NotFound(f"journal entry {entry_id} does not exist at version {master.version}", id=entry_id)
    old = JournalEntry.model_validate(raw)
    if not fields:
        raise InvalidInput(f"edit of {entry_id} names no field to change", field="fields")
    for name in fields:
        if name in _JOURNAL_FIXED or name not in JournalEntry.model_fields:
            raise InvalidInput(f"journal entry field {name!r} cannot be edited", field=name)
    derived = {"semantic_hash"}
    if "text" in fields:
        insight = first_insight(old.text)
        derived |= {k for k, was in (("core_insight", insight), ("brief_summary", brief_summary_of(old.text)),
                                     ("title", insight[:60])) if getattr(old, k) == was and k not in fields}
    version = master.version + 1
    body = {**old.model_dump(mode="json", exclude=derived), **fields, "version": version}
    try:
        new = JournalEntry.model_validate(body)
    except ValidationError as e:
        raise InvalidInput(f"edit of {entry_id} is invalid: {e.errors()[0]['msg']}", field="fields") from e
    now = now or utc_now()
    entry = {"version": version, "parent": master.version, "timestamp": now.isoformat(), "kind": "edit",
             "edited": entry_id, "edited_as": entry_id, "fields": sorted(fields), "reason": reason, "by": by,
             "added": {}, "superseded": [], "written": [key], "replaced": [key], "retired": [], "conflicts": [],
             "counts": dict(master.entry().counts)}
    return Change(VersionEntry(entry), documents=(DocumentPut(key, new),))


def adopted_fields(original: Mapping[str, Any], edited: Mapping[str, Any]) -> dict[str, Any]:
    """What a hand edit changed of a committed copy, as an edit's fields: the fields whose values
    differ, those the store keeps (id, version, semantic hash …) left out (they are derived again)."""
    return {k: v for k, v in edited.items() if k not in _FIXED and original.get(k) != v}


def field_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> FieldChanges:
    """What changed from one copy to the next: fields added, changed (old, new) and removed."""
    from soulpass.engine.views import FieldChanges
    before = before or {}
    keys = (set(before) | set(after)) - _BOOKKEEPING
    return FieldChanges(
        added={k: after[k] for k in sorted(keys) if k not in before},
        changed={k: [before[k], after[k]] for k in sorted(keys) if k in before and k in after
                 and before[k] != after[k]},
        removed=sorted(k for k in keys if k in before and k not in after),
    )


def record_history(store: AccountBackend, record_id: str, log: Sequence[VersionEntry]) -> list[HistoryStep]:
    """Every version that wrote record ``record_id`` (oldest first), with what each changed.

    ``store`` is the account's backend and ``log`` its version log with id lists inlined; a
    version wrote the record when its entry added, restored, replaced or retired its key (a prose
    entry's key is the file name the log gives it)."""
    from soulpass.engine.views import HistoryStep
    prose = isinstance(record_id, str) and record_id.startswith(JOURNAL_PREFIX)
    if prose:
        check_record_id(record_id, "journal entry id")
        found = journal_key(log, record_id)
        key = found[1] if found else ""
    else:
        kind_of_id(record_id)
        key = record_path(record_id)
    out: list[HistoryStep] = []
    before: Mapping[str, Any] | None = None
    for entry in log:
        ids = [i for v in entry.added.values() for i in v] + [j.get("id") for j in entry.fields.get("journal", [])]
        touched = {*entry.replaced, *entry.retired, *entry.written}
        if record_id not in ids and key not in touched:
            continue
        snap = store.snapshot(entry.version)
        if prose:
            doc = snap.document(key)
            after = JournalEntry.model_validate(doc).model_dump(mode="json") if doc is not None else None
        else:
            rec = snap.record(record_id)
            after = rec.model_dump(mode="json") if rec is not None else None
        reason = {"reason": entry.fields["reason"]} if entry.fields.get("reason") else {}
        out.append(HistoryStep(version=entry.version, kind=entry.fields.get("kind"),
                               timestamp=entry.fields.get("timestamp"), present=after is not None,
                               changes=field_changes(before, after) if after is not None else None, **reason))
        before = after
    if not out:
        raise NotFound(f"record {record_id} does not exist in any version", id=record_id)
    return out
