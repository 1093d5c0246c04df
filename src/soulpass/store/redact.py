"""The placeholder a forgotten record's copies become (issue 15: erasure).

Versions are immutable except for this one operation: ``AccountBackend.forget`` rewrites every
stored copy of a record, current and history, to :func:`redacted` of it. The placeholder keeps
what names the copy (id, kind, version, times, links to other ids) so every version still reads
and audits as before, and replaces every piece of content by ``[forgotten]`` (lists and objects
emptied), so nothing of what was said survives in the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORGOTTEN", "Erasure", "forgotten_journal_key", "redacted", "redacted_copy", "redacted_entry"]

FORGOTTEN = "[forgotten]"
# Fields that name a copy or link it to other ids, or whose values are a closed set: never content.
_KEEP = frozenset({
    "id", "kind", "version", "created_at", "session_id", "agent", "schema_version", "episode_id",
    "superseded_by", "supersedes", "valid_from_version", "valid_to_version", "turn_refs", "source_refs",
    "episode_ref", "reply_to", "epistemic_mode", "confidence", "persona_id", "event_id",
})


def redacted(body: Mapping[str, Any]) -> dict[str, Any]:
    """The placeholder of one stored record copy ``body`` (idempotent: a placeholder stays as is)."""
    if body.get("kind") == "journal":
        return _redacted_journal(body)
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name in _KEEP or not isinstance(value, (str, list, dict)):
            out[name] = value
        elif isinstance(value, str):
            out[name] = FORGOTTEN
        else:
            out[name] = type(value)()
    out["tags"], out["text"], out["semantic_hash"] = [FORGOTTEN], FORGOTTEN, ""
    from soulpass.records import RECORD_MODELS  # here: erasing is rare, opening an account is not

    model = RECORD_MODELS.get(str(body.get("kind")))
    if model is None:
        return out
    return model.model_validate(out).model_dump(mode="json")


def _without_facts(body: Mapping[str, Any], ids: frozenset[str]) -> dict[str, Any]:
    """A knowledge-graph document with the facts ``ids`` taken out: their references dropped, an
    edge left with none removed (its labels are the forgotten fact's subject and object)."""
    out = dict(body)
    if isinstance(body.get("edges"), dict):
        edges = {}
        for key, edge in body["edges"].items():
            refs = [r for r in edge.get("fact_refs", []) if r not in ids]
            if refs:
                edges[key] = {**edge, "fact_refs": refs}
        out["edges"] = edges
    if isinstance(body.get("entries"), dict):
        entries = {k: [e for e in v if e.get("fact") not in ids] for k, v in body["entries"].items()}
        out["entries"] = {k: v for k, v in entries.items() if v}
    return out


def redacted_copy(body: Mapping[str, Any], ids: frozenset[str]) -> dict[str, Any]:
    """What one stored copy becomes when the records ``ids`` are forgotten: a record's copy its
    placeholder, a knowledge-graph shard the same without those facts, anything else as it was."""
    if body.get("kind") in ("gks_shard", "gks_functional"):
        return _without_facts(body, ids)
    if body.get("id") in ids:
        return redacted(body)
    return dict(body)



def _redacted_journal(body: Mapping[str, Any]) -> dict[str, Any]:
    """A prose entry's placeholder: its id, type, times and agent kept, every text replaced."""
    out = {k: v for k, v in body.items() if k in _KEEP or k in ("type", "source_id", "repeats")}
    out.update(text=FORGOTTEN, title=FORGOTTEN, brief_summary=FORGOTTEN, core_insight=FORGOTTEN,
               tags=[FORGOTTEN], semantic_hash="")
    return out


def forgotten_journal_key(key: str, entry_id: str) -> str:
    """Where a forgotten prose entry's copies move: its file name holds a title made of its text
    (``2025-12-04_Dear_diary….md``), so it becomes ``2025-12-04_forgotten_JE_….md``."""
    folder, name = key.rsplit("/", 1)
    return f"{folder}/{name[:10]}_forgotten_{entry_id}.md"


# Keys of a log entry's detail objects that name things, never say them.
_LOG_KEEP = _KEEP | {"candidate", "record", "entry", "duplicate_of", "why", "path", "type", "ref", "fact_id"}


@dataclass(frozen=True)
class Erasure:
    """What a forget erases from the version log's details (the log names records; its details
    quote rejected candidates, duplicates and conflicts): objects naming ``ids`` (or a temporary id
    that became one), facts about ``subjects`` or with one of the ``triples``; and prose paths
    ``renames`` moves (their names hold text)."""

    ids: frozenset[str]
    subjects: frozenset[str] = frozenset()
    triples: frozenset[tuple[str, str, str]] = frozenset()
    renames: Mapping[str, str] = field(default_factory=dict)

    def about(self, obj: Mapping[str, Any], ids: frozenset[str]) -> bool:
        if any(isinstance(obj.get(k), str) and obj[k] in ids for k in ("id", "candidate", "record", "entry")):
            return True
        subject = obj.get("subject")
        if not isinstance(subject, str):
            return False
        triple = (subject.strip().casefold(), str(obj.get("predicate", "")), str(obj.get("object", "")).casefold())
        return triple[0] in self.subjects or triple in self.triples


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return FORGOTTEN
    return type(value)() if isinstance(value, (list, dict)) else value


def _walk(value: Any, erasure: Erasure, ids: frozenset[str]) -> Any:
    if isinstance(value, str):
        return erasure.renames.get(value, value)
    if isinstance(value, list):
        return [_walk(v, erasure, ids) for v in value]
    if not isinstance(value, dict):
        return value
    if erasure.about(value, ids):
        return {k: _walk(v, erasure, ids) if k in _LOG_KEEP else _scrub(v) for k, v in value.items()}
    return {k: _walk(v, erasure, ids) for k, v in value.items()}


def redacted_entry(entry: Mapping[str, Any], erasure: Erasure) -> dict[str, Any]:
    """A version log entry with what ``erasure`` forgets taken out of its details (idempotent)."""
    id_map = entry.get("id_map") if isinstance(entry.get("id_map"), dict) else {}
    ids = erasure.ids | {temp for temp, perm in (id_map or {}).items() if perm in erasure.ids}
    return {k: _walk(v, erasure, ids) for k, v in entry.items()}
