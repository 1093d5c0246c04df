"""Records and documents as rows: the stored form of each copy (the bytes the files backend would
write, so an export is byte for byte the plain-file form) and its parsed body (JSONB)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from soulpass.errors import InvalidInput
from soulpass.records import Record
from soulpass.store.contract import Change, DocumentPut
from soulpass.store.files.bulk_lists import inline, set_apart
from soulpass.store.files.copies import encode_document, parse_copy
from soulpass.store.fsio import dump_json
from soulpass.store.keys import record_path

__all__ = ["DOCUMENT_COLUMNS", "RECORD_COLUMNS", "VISIBLE", "CopyRow", "document_row", "logged_entry", "record_of_key",
           "record_row", "split_keys"]

# The rows of a snapshot at ``%(at)s``: written at or before it, not yet replaced or retired.
VISIBLE = "from_version <= %(at)s AND (to_version IS NULL OR to_version > %(at)s)"
RECORD_COLUMNS = ("account_id", "record_id", "kind", "key", "from_version", "data", "body")
DOCUMENT_COLUMNS = ("account_id", "key", "from_version", "data", "body")


@dataclass(frozen=True)
class CopyRow:
    """One copy to store under ``key`` (a record's: its id and kind too)."""

    key: str
    data: bytes
    body: Mapping[str, Any]
    record_id: str | None = None
    kind: str | None = None

    def values(self, account_id: int, version: int) -> tuple[Any, ...]:
        """The row's columns, as :data:`RECORD_COLUMNS` or :data:`DOCUMENT_COLUMNS` name them."""
        head = (account_id, self.record_id, self.kind) if self.record_id is not None else (account_id,)
        return (*head, self.key, version, self.data, Jsonb(self.body))


def record_row(record: Record) -> CopyRow:
    body = record.model_dump(mode="json")
    return CopyRow(record_path(record.id), dump_json(body), body, record.id, record.kind)


def document_row(put: DocumentPut) -> CopyRow:
    data = encode_document(put)
    return CopyRow(put.key, data, parse_copy(put.key, data))


def record_of_key(key: str) -> str | None:
    """The record id ``key`` names (``record_path`` of it), or None for a document's key."""
    name = key.rsplit("/", 1)[-1]
    if not name.endswith(".json"):
        return None
    rid = name.removesuffix(".json")
    try:
        return rid if record_path(rid) == key else None
    except InvalidInput:
        return None


def split_keys(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """``keys`` split into record ids and document keys."""
    ids, docs = [], []
    for key in keys:
        rid = record_of_key(key)
        if rid is None:
            docs.append(key)
        else:
            ids.append(rid)
    return ids, docs


def logged_entry(change: Change) -> dict[str, Any]:
    """The log entry a change stores: a bulk one exactly as the files backend reads its line back
    (``added_file`` named, its lists inlined), so both backends log the same fields."""
    entry = dict(change.entry.fields)
    if not change.bulk:
        return entry
    line, lists = set_apart(entry)
    return inline(line, json.loads(lists.data))
