"""Keeping the catalog equal to the store: catch-up from what each version changed, rebuild from every copy.

Catch-up reads only the copies each new version put or retired (``MasterStore.changes``); rebuild
reads every copy the account holds (``AccountBackend.copies``). Both turn copies into rows with
``make_rows.make_row``, and both stamp the store version they reflect in the same transaction as the
rows, so a crash at any point leaves the catalog at some version it fully reflects. Both are written
once, over the seam ``CatalogTables`` that the SQLite catalog (``SqliteTables``) and PostgreSQL's
(``soulpass.index.pg``) each give.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from soulpass.errors import Corrupted
from soulpass.store.contract import (
    AccountBackend,
    CopyWalk,
    StoredVersionCopy,
    UnreadableCopy,
    VersionChanges,
    VersionEntry,
)
from soulpass.store.keys import is_journal_path

from .rows import COLUMNS, CatalogRow, is_catalogued, row_id
from .schema import transaction

__all__ = ["CatalogTables", "CatalogWrite", "CatchUpReport", "Followed", "Progress", "RowWriter", "SqliteTables",
           "SyncCounts", "apply_changes", "catch_up", "follow_versions", "last_logged", "logged_entry", "rebuild",
           "rebuild_rows", "version_stamp"]

Progress = Callable[[int, int], None]
_INSERT = f"INSERT OR IGNORE INTO catalog ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_CLOSE = """
    UPDATE catalog SET replaced_at = :v,
                       valid_to = CASE WHEN valid_to IS NULL OR valid_to > :v THEN :v ELSE valid_to END
     WHERE id = :id AND replaced_at IS NULL AND version < :v"""


@dataclass(frozen=True)
class CatchUpReport:
    """From which store version to which the catalog moved, and what that took."""

    from_version: int
    to_version: int
    versions: int
    rows_added: int
    rows_closed: int
    rebuilt: bool = False
    skipped: tuple[str, ...] = ()


@dataclass
class SyncCounts:
    """What one catch-up or rebuild did; ``skipped`` names copies that could not be read."""

    added: int = 0
    closed: int = 0
    skipped: list[str] = field(default_factory=list)


class RowWriter(Protocol):
    """Where catch-up and rebuild put rows; every call runs inside the caller's transaction."""

    def insert(self, row: CatalogRow) -> bool:
        """Add the row; False when this copy (id, version) is already catalogued."""
        ...

    def close(self, rid: str, version: int) -> int:
        """Version ``version`` replaced or retired the file of ``rid``: its current copy ends there."""
        ...

    def close_path(self, path: str, version: int) -> int:
        """As ``close``, for the copy at ``path`` (a prose record: its id is in its file)."""
        ...


class CatalogWrite(RowWriter, Protocol):
    """One write transaction of a catalog: its rows, and the store version they reflect."""

    version: int  # the store version the rows reflect, read under the write lock

    def clear(self) -> None:
        """Delete every row (a rebuild writes them all again)."""
        ...

    def finish(self, version: int, entry: VersionEntry | None, *, rebuilt: bool = False) -> int:
        """Stamp ``version`` (with ``entry``'s timestamp) as reflected, a new generation when
        ``rebuilt``; returns the copies closed that were held back until now (0: none were)."""
        ...


class CatalogTables(Protocol):
    """The seam between following the store (here, once) and a catalog's database: the SQLite
    catalog's (``SqliteTables``) or PostgreSQL's (``soulpass.index.pg``)."""

    def stamp(self) -> tuple[int, str]:
        """The store version the rows reflect and its ``version_stamp``."""
        ...

    def writing(self) -> AbstractContextManager[CatalogWrite]:
        """One write transaction, committed when the block ends, rolled back when it raises."""
        ...


class SqliteTables:
    """:class:`CatalogTables` over the SQLite catalog's connection (its caller holds the catalog's lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def stamp(self) -> tuple[int, str]:
        meta = dict(self.conn.execute("SELECT key, value FROM meta WHERE key IN ('store_version', 'store_timestamp')"))
        return int(meta["store_version"]), meta["store_timestamp"]

    @contextlib.contextmanager
    def writing(self) -> Iterator[CatalogWrite]:
        with transaction(self.conn):
            yield _SqliteWrite(self.conn, self.stamp()[0])


class _SqliteWrite:
    def __init__(self, conn: sqlite3.Connection, version: int) -> None:
        self.conn, self.version = conn, version

    def insert(self, row: CatalogRow) -> bool:
        cur = self.conn.execute(_INSERT, row.to_sql())
        if cur.rowcount == 0:
            return False  # this copy is already catalogued
        rowid = cur.lastrowid
        if row.text:
            self.conn.execute("INSERT INTO catalog_fts (rowid, text, agent) VALUES (?, ?, ?)",
                              (rowid, row.text, row.agent))
        self.conn.executemany("INSERT OR IGNORE INTO catalog_tags (tag, row) VALUES (?, ?)",
                              [(t, rowid) for t in sorted(set(row.tags))])
        return True

    def close(self, rid: str, version: int) -> int:
        return self.conn.execute(_CLOSE, {"v": version, "id": rid}).rowcount

    def close_path(self, path: str, version: int) -> int:
        return self.conn.execute(_CLOSE.replace("id = :id", "path = :id"), {"v": version, "id": path}).rowcount

    def clear(self) -> None:
        self.conn.execute("DELETE FROM catalog_tags")
        self.conn.execute("INSERT INTO catalog_fts (catalog_fts) VALUES ('delete-all')")
        self.conn.execute("DELETE FROM catalog")

    def finish(self, version: int, entry: VersionEntry | None, *, rebuilt: bool = False) -> int:
        self.conn.executemany("UPDATE meta SET value = ? WHERE key = ?",
                              [(str(version), "store_version"), (version_stamp(entry), "store_timestamp")])
        if rebuilt:
            self.conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
        return 0


def catch_up(tables: CatalogTables, store: AccountBackend) -> CatchUpReport:
    """Bring a catalog to the store's HEAD: nothing when it is at HEAD of the same account, a
    rebuild when it is ahead of the store or follows another account of the same name (the stamps
    differ), else the versions after it one by one, each in one transaction with its new version
    (see :func:`follow_versions`)."""
    start, stamp = tables.stamp()
    head = store.snapshot()
    if start == head.version and start > 0 and version_stamp(head.entry()) == stamp:
        # Up to date (the same version of the same account): HEAD's own entry says so without the
        # version log, which grows with the history; every search starts with this check.
        return CatchUpReport(from_version=start, to_version=start, versions=0, rows_added=0, rows_closed=0)
    if start > head.version or (start > 0 and version_stamp(logged_entry(store, start)) != stamp):
        return rebuild(tables, store, None)
    counts = SyncCounts()

    def step(version: int, changes: VersionChanges) -> tuple[int, bool]:
        with tables.writing() as rows:
            if rows.version != version:  # another process got here first
                return rows.version, False
            apply_changes(rows, changes, counts)
            counts.closed += rows.finish(version + 1, changes.entry)
        return version + 1, True

    followed = follow_versions(store, start, head.version, step)
    if followed.redo == "rebuild":
        return rebuild(tables, store, None)
    if followed.redo == "again":
        return catch_up(tables, store)
    return CatchUpReport(from_version=start, to_version=followed.version, versions=followed.applied,
                         rows_added=counts.added, rows_closed=counts.closed, skipped=tuple(counts.skipped))


def rebuild(tables: CatalogTables, store: AccountBackend, progress: Progress | None) -> CatchUpReport:
    """Recreate every row from the store's copies in one transaction (searches see the old rows
    until it commits): see :func:`rebuild_rows`."""
    version, entry = last_logged(store)
    counts = SyncCounts()
    with tables.writing() as rows:
        start = rows.version
        rows.clear()
        rebuild_rows(rows, store.copies(is_catalogued), version, progress, counts)
        rows.finish(version, entry, rebuilt=True)
    return CatchUpReport(from_version=start, to_version=version, versions=version, rows_added=counts.added,
                         rows_closed=0, rebuilt=True, skipped=tuple(counts.skipped))


def apply_changes(rows: RowWriter, changes: VersionChanges, counts: SyncCounts) -> None:
    """Rows for what one version put and retired (``MasterStore.changes``), inside the caller's transaction."""
    from .make_rows import make_row  # here: a search that finds the catalog current needs no record model

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
        counts.closed += rows.close(row.id, version)
        counts.added += rows.insert(row)
    for rel in (r for r in changes.retired if is_catalogued(r)):
        if is_journal_path(rel):  # a prose record's id is in its file, not its path
            counts.closed += rows.close_path(rel, version)
        else:
            counts.closed += rows.close(row_id(rel), version)


class Followed(NamedTuple):
    """Where :func:`follow_versions` left the catalog: its version, how many versions this call
    applied, and what the caller must do next ("" nothing, "rebuild", or "again" from the start)."""

    version: int
    applied: int
    redo: Literal["", "rebuild", "again"]


def follow_versions(store: AccountBackend, start: int, head: int,
                    step: Callable[[int, VersionChanges], tuple[int, bool]]) -> Followed:
    """Apply the store's versions after ``start`` up to ``head``, one at a time, in order.

    ``step(version, changes)`` applies ``changes`` in one transaction if the catalog is still at
    ``version`` (another process may have moved it meanwhile) and returns the catalog's version after
    it, and whether this call applied it. A version without its log line is not committed yet: the
    walk stops before it. A "forget" rewrote older copies, so any row may hold them: rebuild. A
    catalog found older than ``start`` was rebuilt by another process to an older snapshot: again."""
    version, applied = start, 0
    for changes in store.changes(start):
        if changes.entry.version <= version:
            continue  # applied by another process meanwhile
        if changes.entry.version != version + 1 or version >= head:
            break
        if changes.entry.fields.get("kind") == "forget":
            return Followed(version, applied, "rebuild")
        current, did = step(version, changes)
        applied += did
        if current < start:
            return Followed(current, applied, "again")
        version = current
    return Followed(version, applied, "")


def last_logged(store: AccountBackend) -> tuple[int, VersionEntry | None]:
    """The newest version a rebuild can reflect (every log line up to it present) and its entry."""
    head = store.head()
    entries = {e.version: e for e in store.log(lists=False)}
    version = 0
    while version < head and version + 1 in entries:
        version += 1
    return version, entries.get(version)


def version_stamp(entry: VersionEntry | None) -> str:
    """A version's timestamp as the catalog records it: with the version, it tells the account the
    catalog follows from another one of the same name (a restored or replaced account)."""
    return "" if entry is None else str(entry.fields.get("timestamp", ""))


def logged_entry(store: AccountBackend, version: int) -> VersionEntry | None:
    """The log's entry of ``version``, its id lists left out; None when the log has no line for it."""
    found = next(iter(store.log(version - 1, lists=False)), None)
    return found if found is not None and found.version == version else None


def rebuild_rows(rows: RowWriter, copies: CopyWalk, version: int, progress: Progress | None,
                 counts: SyncCounts) -> None:
    """Rows for every copy as of ``version``, inside the caller's transaction (tables emptied).

    ``copies`` are the catalogued ones (``AccountBackend.copies(is_catalogued)``), current before
    replaced, so a copy that a concurrent commit replaces mid-walk is seen at least once; copies
    newer than ``version`` are left for the next catch-up, a copy replaced after ``version`` counts
    as current, and one that cannot be read is named in ``counts.skipped``.
    """
    from .make_rows import make_row

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
                counts.added += rows.insert(row)
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
