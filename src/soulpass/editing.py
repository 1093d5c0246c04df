"""Editing one record, and reading its history: corrections that keep every earlier copy.

A record is never changed in place. ``edit`` plans a new version: a fact is superseded by a new
fact carrying the edit (as consolidation supersedes one), any other record gets a new copy of the
same id. ``history`` reads back every version that wrote the record and what each one changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from soulpass.consolidation.ids import IdAllocator
from soulpass.errors import InvalidInput, NotFound
from soulpass.records import Record, SemanticFact
from soulpass.store.contract import Change, Snapshot, VersionEntry
from soulpass.store.keys import kind_of_id, record_path

__all__ = ["field_changes", "plan_edit", "record_history"]

# Fields an edit may not set: they name the record, or the store keeps them.
_FIXED = frozenset({"id", "kind", "version", "created_at", "semantic_hash", "schema_version", "episode_id",
                    "superseded_by", "supersedes", "valid_from_version", "valid_to_version"})
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
    derived = {"semantic_hash"} | ({"text"} if "text" not in fields and rec.text == rec.core_text() else set())
    body = {**rec.model_dump(mode="json", exclude=derived), **fields, **update}  # derived: recomputed
    try:
        return type(rec).model_validate(body)
    except ValidationError as e:
        raise InvalidInput(f"edit of {rec.id} is invalid: {e.errors()[0]['msg']}", field="fields") from e


def plan_edit(master: Snapshot, record_id: str, fields: Mapping[str, Any], now: datetime, *,
              reason: str = "", by: str | None = None) -> Change:
    """Version HEAD+1 on ``master`` in which record ``record_id`` carries ``fields``.

    A fact is never edited (records.py): the edit becomes a new fact that supersedes it. Any other
    record gets a new copy under its own id; the earlier copies stay in the history."""
    old = _current(master, record_id)
    version = master.version + 1
    entry: dict[str, Any] = {"version": version, "parent": master.version, "timestamp": now.isoformat(),
                             "kind": "edit", "edited": record_id, "fields": sorted(fields), "reason": reason,
                             "by": by, "added": {}, "superseded": [], "replaced": [], "retired": [],
                             "conflicts": [], "counts": dict(master.entry().counts)}
    if isinstance(old, SemanticFact):
        if old.superseded_by is not None:
            raise InvalidInput(f"fact {record_id} was superseded by {old.superseded_by}; edit that one",
                               id=record_id)
        ids = IdAllocator(master, version)
        new_id = ids.allocate("fact", now)
        new = _edited(old, fields, {"id": new_id, "version": version, "created_at": now.isoformat(),
                                    "valid_from_version": version, "supersedes": [record_id]})
        retired = old.model_copy(update={"superseded_by": new_id, "valid_to_version": version, "version": version})
        entry.update(added={"fact": [new_id]}, superseded=[{"fact": record_id, "by": new_id}],
                     replaced=[record_path(record_id)], edited_as=new_id)
        entry["counts"]["fact"] = int(entry["counts"].get("fact", 0)) + 1
        entry["counts"]["facts_superseded"] = int(entry["counts"].get("facts_superseded", 0)) + 1
        return Change(VersionEntry(entry), records=(new, retired), documents=tuple(ids.documents()))
    new = _edited(old, fields, {"version": version})
    entry.update(replaced=[record_path(record_id)], edited_as=record_id)
    return Change(VersionEntry(entry), records=(new,))


def field_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """What changed from one copy to the next: fields added, changed (old, new) and removed."""
    before = before or {}
    keys = (set(before) | set(after)) - _BOOKKEEPING
    return {
        "added": {k: after[k] for k in sorted(keys) if k not in before},
        "changed": {k: [before[k], after[k]] for k in sorted(keys) if k in before and k in after
                    and before[k] != after[k]},
        "removed": sorted(k for k in keys if k in before and k not in after),
    }


def record_history(store: Any, record_id: str, log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every version that wrote record ``record_id`` (oldest first), with what each changed.

    ``store`` is the account's backend and ``log`` its version log with id lists inlined; a
    version wrote the record when its entry added, restored, replaced or retired its key."""
    kind_of_id(record_id)
    key = record_path(record_id)
    out: list[dict[str, Any]] = []
    before: Mapping[str, Any] | None = None
    for entry in log:
        ids = [i for v in list(entry.get("added", {}).values()) + list(entry.get("restored", {}).values())
               for i in v]
        if record_id not in ids and key not in entry.get("replaced", []) and key not in entry.get("retired", []):
            continue
        rec = store.snapshot(int(entry["version"])).record(record_id)
        after = rec.model_dump(mode="json") if rec is not None else None
        row: dict[str, Any] = {"version": int(entry["version"]), "kind": entry.get("kind"),
                               "timestamp": entry.get("timestamp"), "present": after is not None}
        row["changes"] = field_changes(before, after) if after is not None else None
        if entry.get("reason"):
            row["reason"] = entry["reason"]
        out.append(row)
        before = after
    if not out:
        raise NotFound(f"record {record_id} does not exist in any version", id=record_id)
    return out
