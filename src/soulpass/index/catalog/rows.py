"""One catalog row per stored copy of a record or document: a pure function of the file's bytes.

Both catch-up and rebuild make their rows here, from the same bytes, which is what makes a
rebuilt catalog equal, row for row, to one caught up version by version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
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
from soulpass.store.keys import CORE, KIND_BY_PREFIX, RECORD_DIRS, VERSION_FILE, is_journal_path

__all__ = ["ASKS_SQL", "COLUMNS", "CatalogRow", "Traits", "buffer_event_row", "buffer_row", "from_us", "is_catalogued",
           "make_row", "mostly_asks", "record_row", "row_id", "to_us"]

# Documents whose values are worth finding by text; the knowledge-graph files only repeat facts.
TEXT_DOCUMENT_KINDS = frozenset({"core_memory", "user_profile", "state"})
_ENVELOPE = frozenset({"kind", "version", "updated_at", "schema_version", "key_times"})


@dataclass(frozen=True)
class Traits:
    """What ranking reads of a candidate besides its scores: a light row (no text)."""

    kind: str
    session_id: str | None
    agent: str | None
    length: int  # characters of text
    asks: bool  # the text mostly asks: it has a question mark, and no more other sentence ends than those

    @classmethod
    def of(cls, row: CatalogRow) -> Traits:
        return cls(row.kind, row.session_id, row.agent, len(row.text), mostly_asks(row.text))


def mostly_asks(text: str) -> bool:
    """A turn that asks rather than tells ("Lovely! What breed is it?"), not one that tells and then
    asks ("I moved on May 3. I have to unpack by Friday. Any tips?"): the question is rarely where the
    answer is, the telling is. Same rule as ``ASKS_SQL``."""
    questions = text.count("?")
    return questions > 0 and questions >= text.count(".") + text.count("!")


# ``mostly_asks`` in SQL, for a catalog column ``c.text``.
ASKS_SQL = ("(length(c.text) - length(replace(c.text, '?', ''))) > 0 AND "
            "(length(c.text) - length(replace(c.text, '?', ''))) >= "
            "(2 * length(c.text) - length(replace(c.text, '.', '')) - length(replace(c.text, '!', '')))")


@dataclass(frozen=True)
class CatalogRow:
    """One copy of a record (``id`` = record id) or document (``id`` = its account-relative path).

    The copy is in force from ``version`` (the version that wrote it) until ``valid_to``
    (exclusive; None while in force). ``valid_to`` is the version that replaced or retired the
    file (``replaced_at``), or, for a fact, the version that superseded it, whichever came first:
    the copy a supersession writes is on disk but no longer in force (``version == valid_to``).
    """

    id: str
    kind: str
    version: int
    valid_to: int | None
    replaced_at: int | None
    event_time: datetime | None
    agent: str | None
    session_id: str | None
    persona_id: str | None
    event_id: str | None
    tags: tuple[str, ...]
    superseded_by: str | None
    path: str
    text: str
    semantic_hash: str
    content_hash: str

    @property
    def valid_from(self) -> int:
        return self.version

    def in_force_at(self, version: int) -> bool:
        return self.version <= version and (self.valid_to is None or self.valid_to > version)

    def to_sql(self) -> tuple[Any, ...]:
        """Values in ``COLUMNS`` order."""
        return (self.id, self.kind, self.version, self.valid_to, self.replaced_at, to_us(self.event_time),
                self.agent, self.session_id, self.persona_id, self.event_id,
                json.dumps(list(self.tags), ensure_ascii=False), self.superseded_by, self.path, self.text,
                self.semantic_hash, self.content_hash)

    @classmethod
    def from_sql(cls, values: tuple[Any, ...]) -> CatalogRow:
        (id_, kind, version, valid_to, replaced_at, event_us, agent, session_id, persona_id, event_id,
         tags, superseded_by, path, text, shash, chash) = values
        return cls(id=id_, kind=kind, version=version, valid_to=valid_to, replaced_at=replaced_at,
                   event_time=from_us(event_us), agent=agent, session_id=session_id, persona_id=persona_id,
                   event_id=event_id, tags=tuple(json.loads(tags)), superseded_by=superseded_by, path=path,
                   text=text, semantic_hash=shash, content_hash=chash)


COLUMNS = ("id", "kind", "version", "valid_to", "replaced_at", "event_us", "agent", "session_id", "persona_id",
           "event_id", "tags", "superseded_by", "path", "text", "semantic_hash", "content_hash")


def to_us(when: datetime | None) -> int | None:
    if when is None:
        return None
    delta = when.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int | None) -> datetime | None:
    if us is None:
        return None
    return datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)


def row_id(relpath: str) -> str:
    """The record id for a record file, else the path itself (documents)."""
    name = relpath.rsplit("/", 1)[-1]
    kind = KIND_BY_PREFIX.get(name[:2])
    if kind and name[2:3] == "_" and relpath.startswith(RECORD_DIRS[kind] + "/"):
        return name.removesuffix(".json")
    return relpath


def is_catalogued(relpath: str) -> bool:
    """Every JSON file of the master state except ``VERSION.json`` has catalog rows, and so has
    every prose record (``core/04_Journal/<folder>/<name>.md``)."""
    if relpath.endswith(".md"):
        return is_journal_path(relpath)
    return relpath.startswith(CORE + "/") and relpath.endswith(".json") and relpath != VERSION_FILE


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
