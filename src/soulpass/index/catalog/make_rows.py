"""The catalog row of a stored copy or a buffered record: a pure function of the file's bytes.

Both catch-up and rebuild make their rows here, from the same bytes, which is what makes a
rebuilt catalog equal, row for row, to one caught up version by version. Apart from ``rows`` (the
row itself), so that a search, which only reads rows, loads neither pydantic nor the record models.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from soulpass.errors import Corrupted, InvalidInput
from soulpass.records import (
    RECORD_MODELS,
    BufferEvent,
    Episode,
    Record,
    SemanticCandidate,
    SemanticFact,
    semantic_hash,
)
from soulpass.store.keys import KIND_BY_PREFIX, is_journal_path

from .rows import CatalogRow, row_id

__all__ = ["buffer_event_row", "buffer_row", "make_row", "record_row"]

# Documents whose values are worth finding by text; the knowledge-graph files only repeat facts.
TEXT_DOCUMENT_KINDS = frozenset({"core_memory", "user_profile", "state"})
_ENVELOPE = frozenset({"kind", "version", "updated_at", "schema_version", "key_times"})


def make_row(relpath: str, data: bytes, raw: dict[str, Any], replaced_at: int | None) -> CatalogRow:
    """The row for one copy: ``data`` its bytes, ``raw`` their JSON, ``replaced_at`` from its location."""
    version = int(raw.get("version", 0))
    content_hash = hashlib.sha256(data).hexdigest()
    rid = row_id(relpath)
    if is_journal_path(relpath):  # a prose record: its id is in its front matter
        from soulpass.prose import JournalEntry  # here: only journal records need it (and YAML)

        try:
            entry = JournalEntry.model_validate(raw)
        except (ValidationError, InvalidInput) as exc:
            raise Corrupted(f"{relpath} is not a valid journal entry: {exc}", path=relpath) from exc
        return record_row(entry, relpath, version, replaced_at, content_hash)
    if rid != relpath:
        return _record_row(rid, relpath, raw, version, replaced_at, content_hash)
    kind = str(raw.get("kind") or "document")
    text = "\n".join(_flatten({k: v for k, v in raw.items() if k not in _ENVELOPE})) \
        if kind in TEXT_DOCUMENT_KINDS else ""
    return CatalogRow(
        id=relpath, kind=kind, version=version, valid_to=replaced_at, replaced_at=replaced_at,
        event_time=_parse_time(raw.get("updated_at")), agent=None, session_id=None, persona_id=None,
        event_id=None, tags=(), superseded_by=None, path=relpath, text=text,
        semantic_hash=semantic_hash(text) if text else "", content_hash=content_hash)


def _record_row(rid: str, relpath: str, raw: dict[str, Any], version: int, replaced_at: int | None,
                content_hash: str) -> CatalogRow:
    kind = KIND_BY_PREFIX[rid[:2]]
    try:
        rec: Record = RECORD_MODELS[kind].model_validate(raw)
    except (ValidationError, InvalidInput) as exc:
        raise Corrupted(f"{relpath} does not match the {kind} schema: {exc}", path=relpath) from exc
    return record_row(rec, relpath, version, replaced_at, content_hash)


def buffer_row(rec: Record, relpath: str, session_id: str) -> CatalogRow:
    """A row for a record still in a sandbox's buffer (temporary id, version 0, not in the catalog)."""
    row = record_row(rec, relpath, 0, None, "")  # never stored: no content hash to compare
    return replace(row, session_id=row.session_id or session_id)


def buffer_event_row(event: BufferEvent, relpath: str, session_id: str) -> CatalogRow | None:
    """The row a buffer event's record would search as (turns, episodes, sensory records, journal
    entries, proposed facts); None for events that hold no searchable record."""
    data = event.data
    if event.type in ("turn", "episode", "sensory") and data.get("kind") in RECORD_MODELS:
        return buffer_row(RECORD_MODELS[data["kind"]].model_validate(data), relpath, session_id)
    if event.type == "journal":
        from soulpass.prose import JournalEntry

        return buffer_row(JournalEntry.model_validate(data), relpath, session_id)
    if event.type == "semantic_candidate" and data.get("id"):
        fact = SemanticCandidate.model_validate(data)
        text = fact.content or " ".join(p for p in (fact.subject, fact.predicate, fact.object) if p)
        return CatalogRow(id=fact.id, kind="fact", version=0, valid_to=None, replaced_at=None, event_time=event.at,
                          agent=event.agent, session_id=session_id, persona_id=None, event_id=None, tags=(),
                          superseded_by=None, path=relpath, text=text, semantic_hash="", content_hash="")
    return None


def record_row(rec: Record, relpath: str, version: int, replaced_at: int | None, content_hash: str) -> CatalogRow:
    """The row of one validated record copy."""
    rid, kind = rec.id, rec.kind
    valid_to = replaced_at
    superseded_by = rec.superseded_by if isinstance(rec, SemanticFact) else None
    if isinstance(rec, SemanticFact) and rec.valid_to_version is not None:
        # A copy that was written after its fact had ended (a rollback to a superseded state) is
        # never in force: its range is empty, [version, version).
        ended = max(rec.valid_to_version, version)
        valid_to = ended if valid_to is None else min(valid_to, ended)
    text = rec.text
    core = rec.core_text()
    if core and core not in text:
        text = f"{text}\n{core}" if text else core
    episode = rec if isinstance(rec, Episode) else None
    return CatalogRow(
        id=rid, kind=kind, version=version, valid_to=valid_to, replaced_at=replaced_at,
        event_time=rec.created_at,
        agent=rec.agent or ("user" if kind == "turn_user" else None),  # a user turn's speaker is the user
        session_id=rec.session_id,
        persona_id=episode.persona_id if episode else None, event_id=episode.event_id if episode else None,
        tags=tuple(rec.tags), superseded_by=superseded_by, path=relpath, text=text,
        semantic_hash=rec.semantic_hash, content_hash=content_hash)


def _flatten(value: Any, key: str = "") -> Iterator[str]:
    """``key: value`` lines of a document's body, nested keys flattened, in file order."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(v, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _flatten(v, key)
    elif value is not None and value != "":
        yield f"{key}: {value}" if key else str(value)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
