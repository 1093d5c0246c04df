"""Keeping the catalog equal to the store: catch-up from what each version changed, rebuild from every copy.

Catch-up reads only the copies each new version put or retired (``MasterStore.changes``); rebuild
reads every copy the account holds (``AccountBackend.copies``). Both turn copies into rows with
:func:`make_row`, and both stamp the store version they reflect in the same SQLite transaction
as the rows, so a crash at any point leaves the catalog at some version it fully reflects.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from soulpass.errors import Corrupted
from soulpass.store.contract import CopyWalk, StoredVersionCopy, UnreadableCopy, VersionChanges
from soulpass.store.keys import is_journal_path

from .rows import COLUMNS, CatalogRow, is_catalogued, make_row, row_id

__all__ = ["Progress", "SyncCounts", "apply_changes", "rebuild_rows"]

Progress = Callable[[int, int], None]
_INSERT = f"INSERT OR IGNORE INTO catalog ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_CLOSE = """
    UPDATE catalog SET replaced_at = :v,
                       valid_to = CASE WHEN valid_to IS NULL OR valid_to > :v THEN :v ELSE valid_to END
     WHERE id = :id AND replaced_at IS NULL AND version < :v"""


@dataclass
class SyncCounts:
    """What one catch-up or rebuild did; ``skipped`` names copies that could not be read."""

    added: int = 0
    closed: int = 0
    skipped: list[str] = field(default_factory=list)


def insert_row(conn: sqlite3.Connection, row: CatalogRow) -> bool:
    cur = conn.execute(_INSERT, row.to_sql())
    if cur.rowcount == 0:
        return False  # this copy is already catalogued
    rowid = cur.lastrowid
    if row.text:
        conn.execute("INSERT INTO catalog_fts (rowid, text, agent) VALUES (?, ?, ?)", (rowid, row.text, row.agent))
    conn.executemany("INSERT OR IGNORE INTO catalog_tags (tag, row) VALUES (?, ?)",
                     [(t, rowid) for t in sorted(set(row.tags))])
    return True


def close_rows(conn: sqlite3.Connection, rid: str, version: int) -> int:
    """Version ``version`` replaced or retired the file of ``rid``: its current copy ends there."""
    return conn.execute(_CLOSE, {"v": version, "id": rid}).rowcount


def apply_changes(conn: sqlite3.Connection, changes: VersionChanges, counts: SyncCounts) -> None:
    """Rows for what one version put and retired (``MasterStore.changes``), inside the caller's transaction."""
    version = changes.entry.version
    counts.skipped.extend(f"{key}@{version}: {why}" for key, why in changes.unreadable if is_catalogued(key))
    for put in changes.puts:
        if not is_catalogued(put.key):
            continue
        try:
            row = make_row(put.key, put.data, dict(put.body), None)
        except Corrupted as exc:
            counts.skipped.append(f"{put.key}@{version}: {exc}")
            continue
        counts.closed += close_rows(conn, row.id, version)
        counts.added += insert_row(conn, row)
    for rel in (r for r in changes.retired if is_catalogued(r)):
        if is_journal_path(rel):  # a prose record's id is in its file, not its path
            counts.closed += conn.execute(_CLOSE.replace("id = :id", "path = :id"), {"v": version, "id": rel}).rowcount
        else:
            counts.closed += close_rows(conn, row_id(rel), version)


def rebuild_rows(conn: sqlite3.Connection, copies: CopyWalk, version: int, progress: Progress | None,
                 counts: SyncCounts) -> None:
    """Rows for every copy as of ``version``, inside the caller's transaction (tables emptied).

    ``copies`` are the catalogued ones (``AccountBackend.copies(is_catalogued)``), current before
    replaced, so a copy that a concurrent commit replaces mid-walk is seen at least once; copies
    newer than ``version`` are left for the next catch-up, a copy replaced after ``version`` counts
    as current, and one that cannot be read is named in ``counts.skipped``.
    """
    total = len(copies)
    for n, found in enumerate(copies, 1):
        copy = found.copy
        if isinstance(copy, UnreadableCopy):
            counts.skipped.append(_skipped(found, copy.why))
        elif _copy_version(copy.body) <= version:
            replaced_at = found.replaced_at if found.replaced_at and found.replaced_at <= version else None
            try:
                row = make_row(copy.key, copy.data, dict(copy.body), replaced_at)
            except Corrupted as exc:
                counts.skipped.append(_skipped(found, str(exc)))
            else:
                counts.added += insert_row(conn, row)
        if progress is not None and n % 1000 == 0 and n != total:
            progress(n, total)
    if progress is not None:  # the last call says done, also when a listed copy vanished mid-walk
        progress(total, total)


def _skipped(found: StoredVersionCopy, why: str) -> str:
    """How ``SyncCounts.skipped`` names a copy a rebuild could not catalogue."""
    replaced = "" if found.replaced_at is None else f" (replaced by version {found.replaced_at})"
    return f"{found.copy.key}{replaced}: {why}"


def _copy_version(body: Mapping[str, Any]) -> int:
    """The version a stored copy says wrote it (-1 when unreadable: it counts as old)."""
    try:
        return int(body.get("version", 0))
    except (TypeError, ValueError):
        return -1
