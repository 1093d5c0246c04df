"""One catalog row per stored copy of a record or document: what a row holds and which copies have one.

``make_rows`` makes them from a copy's bytes (it needs the record models; a search does not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from soulpass.store.keys import CORE, KIND_BY_PREFIX, RECORD_DIRS, VERSION_FILE, is_journal_path

__all__ = ["COLUMNS", "CatalogRow", "from_us", "is_catalogued", "row_id", "to_us"]


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
        """The row of ``values`` in ``COLUMNS`` order (the fields' order). Passed by position: a
        search reads a row for each hit it returns, and a frozen dataclass's keyword arguments cost
        more than the rest of the reading (docs/performance.md)."""
        (id_, kind, version, valid_to, replaced_at, event_us, agent, session_id, persona_id, event_id,
         tags, superseded_by, path, text, shash, chash) = values
        return cls(id_, kind, version, valid_to, replaced_at, from_us(event_us), agent, session_id, persona_id,
                   event_id, tuple(json.loads(tags)), superseded_by, path, text, shash, chash)


COLUMNS = ("id", "kind", "version", "valid_to", "replaced_at", "event_us", "agent", "session_id", "persona_id",
           "event_id", "tags", "superseded_by", "path", "text", "semantic_hash", "content_hash")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(when: datetime | None) -> int | None:
    if when is None:
        return None
    delta = when.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int | None) -> datetime | None:
    if us is None:
        return None
    return _EPOCH + timedelta(microseconds=us)


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
