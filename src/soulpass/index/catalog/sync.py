"""Keeping the catalog equal to the files: catch-up from the version log, rebuild from a walk.

Catch-up reads only the files that each new version wrote or retired (named by its log line);
rebuild reads every copy under ``core/`` and ``history/``. Both turn bytes into rows with
:func:`make_row`, and both stamp the store version they reflect in the same SQLite transaction
as the rows, so a crash at any point leaves the catalog at some version it fully reflects.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted, InvalidInput
from soulpass.store.files.copies import parse_copy
from soulpass.store.files.layout import HISTORY, history_dir
from soulpass.store.keys import is_journal_path, record_path

from .rows import COLUMNS, CatalogRow, is_catalogued, make_row, row_id

__all__ = ["Progress", "SyncCounts", "apply_version", "changed_paths", "read_copy", "rebuild_rows"]

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


def changed_paths(entry: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Catalogued paths a log entry (with ``added`` expanded) wrote, and those it retired."""
    written: set[str] = set()
    for key in ("added", "restored"):
        for ids in (entry.get(key) or {}).values():
            try:
                written.update(record_path(i) for i in ids)
            except InvalidInput as exc:
                raise Corrupted(f"version {entry.get('version')} of the log names a bad record id: {exc}") from exc
    written.update(entry.get("replaced") or ())
    written.update(entry.get("written") or ())
    retired = {p for p in entry.get("retired") or () if is_catalogued(p)}
    return sorted(p for p in written if is_catalogued(p) and p not in retired), sorted(retired)


def _load(path: Path) -> tuple[bytes, dict[str, Any]] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data, parse_copy(str(path), data)  # JSON, or a Markdown entry's front matter + text


def _version_of(raw: Mapping[str, Any]) -> int:
    try:
        return int(raw.get("version", 0))
    except (TypeError, ValueError):
        return -1


def read_copy(account: Path, relpath: str, version: int) -> tuple[bytes, dict[str, Any]] | None:
    """The bytes of the copy of ``relpath`` that ``version`` wrote: the current file, or the copy
    under ``history/`` that the first later version replaced (the same lookup as ``read_at``)."""
    got = _load(account / relpath)
    if got is not None and _version_of(got[1]) == version:
        return got
    hist = account / history_dir(relpath)
    try:
        suffix = Path(relpath).suffix
        retired = sorted(int(p.stem) for p in hist.iterdir() if p.suffix == suffix and p.stem.isdigit())
    except FileNotFoundError:
        return None
    for n in retired:
        if n > version:
            got = _load(hist / f"{n:08d}{suffix}")
            return got if got is not None and _version_of(got[1]) == version else None
    return None


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


def apply_version(conn: sqlite3.Connection, account: Path, entry: Mapping[str, Any], counts: SyncCounts) -> None:
    """Rows for one version, inside the caller's transaction."""
    version = int(entry["version"])
    written, retired = changed_paths(entry)
    for rel in written:
        try:
            got = read_copy(account, rel, version)
            if got is None:
                counts.skipped.append(f"{rel}@{version}: no copy written by version {version}")
                continue
            row = make_row(rel, got[0], got[1], None)
        except Corrupted as exc:
            counts.skipped.append(f"{rel}@{version}: {exc}")
            continue
        counts.closed += close_rows(conn, row.id, version)
        counts.added += insert_row(conn, row)
    for rel in retired:
        if is_journal_path(rel):  # a prose record's id is in its file, not its path
            counts.closed += conn.execute(_CLOSE.replace("id = :id", "path = :id"), {"v": version, "id": rel}).rowcount
        else:
            counts.closed += close_rows(conn, row_id(rel), version)


def _copies(account: Path) -> Iterator[tuple[Path, str, int | None]]:
    """(file, catalogued path, replaced_at) of every copy: current files, then history."""
    core = account / "core"
    for dirpath, dirs, files in os.walk(core):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".json", ".md")) and not name.startswith("."):
                path = Path(dirpath, name)
                rel = path.relative_to(account).as_posix()
                if is_catalogued(rel):
                    yield path, rel, None
    hist = account / HISTORY
    for dirpath, dirs, files in os.walk(hist):
        dirs.sort()
        for name in sorted(files):
            stem, suffix = os.path.splitext(name)
            logical = f"core/{Path(dirpath).relative_to(hist).as_posix()}{suffix}"
            if suffix in (".json", ".md") and stem.isdigit() and is_catalogued(logical):
                yield Path(dirpath, name), logical, int(stem)


def rebuild_rows(conn: sqlite3.Connection, account: Path, version: int, progress: Progress | None,
                 counts: SyncCounts) -> None:
    """Rows for every copy as of ``version``, inside the caller's transaction (tables emptied).

    Current files are walked before history, so a copy that a concurrent commit moves into
    ``history/`` mid-walk is seen at least once; copies newer than ``version`` are left for the
    next catch-up, and a copy replaced after ``version`` counts as current.
    """
    copies = list(_copies(account))
    total = len(copies)
    for n, (path, rel, replaced_at) in enumerate(copies, 1):
        try:
            got = _load(path)
            if got is not None and _version_of(got[1]) <= version:
                row = make_row(rel, got[0], got[1], replaced_at if replaced_at and replaced_at <= version else None)
                counts.added += insert_row(conn, row)
        except Corrupted as exc:
            counts.skipped.append(f"{path.relative_to(account).as_posix()}: {exc}")
        if progress is not None and (n % 1000 == 0 or n == total):
            progress(n, total)
    if progress is not None and total == 0:
        progress(0, 0)
