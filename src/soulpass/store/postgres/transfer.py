"""An account's plain-file form out of the tables (``source_files``) and back in (``restore``).

The export is byte for byte what the files backend keeps for the same history: copies in force
under ``core/``, replaced ones under ``history/``, ``core/VERSION.json``, the version log with a bulk
version's lists set apart, the id counters under ``log/``. A restore parses that form back into
rows, all in one transaction: the account appears, or is replaced, at its commit, or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from soulpass.errors import Conflict, Corrupted, InvalidInput
from soulpass.ids import check_name
from soulpass.store.files.bulk_lists import ADDED_DIR, inline, set_apart
from soulpass.store.files.commit import version_doc
from soulpass.store.files.copies import parse_copy
from soulpass.store.files.layout import HISTORY, LOG_FILE, history_path
from soulpass.store.files.version_log import encode_log, entry_of, with_history_digests
from soulpass.store.fsio import dump_json
from soulpass.store.keys import CORE, SOURCE_FOLDERS, VERSION_FILE, kind_of_id
from soulpass.store.postgres.commit import write_rows
from soulpass.store.postgres.connections import Database
from soulpass.store.postgres.rows import DOCUMENT_COLUMNS, RECORD_COLUMNS, record_of_key

__all__ = ["restore", "source_files"]


def source_files(db: Database, account_id: int) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of the account's plain-file form, sorted by key, all of one version (one
    repeatable-read transaction)."""
    files: dict[str, bytes] = {}
    retired: dict[int, list[tuple[str, bytes]]] = {}  # version -> the copies it moved under history/
    with db.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for table in ("records", "documents"):
            rows = conn.execute(f"SELECT key, data, to_version FROM {table} WHERE account_id = %s",
                                (account_id,))
            for key, data, to in rows:
                if to is None:
                    files[key] = bytes(data)
                elif key.startswith(CORE + "/"):
                    files[history_path(key, int(to))] = bytes(data)
                    retired.setdefault(int(to), []).append((key, bytes(data)))
        entries = conn.execute("SELECT entry, bulk FROM versions WHERE account_id = %s ORDER BY version",
                               (account_id,)).fetchall()
    files.update(_log_files(entries, retired))
    for key in sorted(files):
        yield key, files[key]


def _log_files(entries: list[tuple[Any, ...]], retired: dict[int, list[tuple[str, bytes]]]) -> dict[str, bytes]:
    """The version log (each line with the digests of the ``history/`` copies its version made, as
    the files backend writes it), a bulk version's lists, and HEAD's ``core/VERSION.json``."""
    out: dict[str, bytes] = {}
    lines = []
    for entry, bulk in entries:
        line = entry
        if bulk:
            line, kept = set_apart(entry)
            out[kept.relpath] = kept.data
        lines.append(with_history_digests(line, retired.get(int(line["version"]), ())))
    if lines:
        out[LOG_FILE] = encode_log(lines)
        out[VERSION_FILE] = dump_json(version_doc(_last(entries)))
    return out


def _last(entries: list[tuple[Any, ...]]) -> dict[str, Any]:
    entry, bulk = entries[-1]
    return set_apart(entry)[0] if bulk else dict(entry)


def restore(db: Database, name: str, files: Iterable[tuple[str, bytes]], *, replace: bool) -> bool:
    """``Backend.restore``: account ``name`` made of ``files`` in one transaction."""
    name = check_name(name, "account name")
    with db.connection() as conn:
        _check_replace(conn, name, replace)
        with conn.transaction():
            existed = _check_replace(conn, name, replace, lock=True)
            conn.execute("DELETE FROM accounts WHERE name = %s", (name,))
            row = conn.execute("INSERT INTO accounts (name) VALUES (%s) RETURNING id", (name,)).fetchone()
            assert row is not None
            account_id = int(row[0])
            head = _load(conn, account_id, files)
            conn.execute("UPDATE accounts SET head = %s WHERE id = %s", (head, account_id))
    return existed


def _check_replace(conn: psycopg.Connection[tuple[Any, ...]], name: str, replace: bool, lock: bool = False) -> bool:
    row = conn.execute("SELECT id FROM accounts WHERE name = %s" + (" FOR UPDATE" if lock else ""),
                       (name,)).fetchone()
    if row is not None and not replace:
        raise Conflict(f"account {name!r} exists and is not to be replaced", account=name)
    return row is not None


def _load(conn: psycopg.Connection[tuple[Any, ...]], account_id: int, files: Iterable[tuple[str, bytes]]) -> int:
    """Write the rows ``files`` hold; returns HEAD (``core/VERSION.json``, 0 without one)."""
    head, log, kept = 0, b"", {}
    records: list[tuple[object, ...]] = []
    documents: list[tuple[object, ...]] = []
    for key, data in files:
        parts = PurePosixPath(key).parts
        if len(parts) < 2 or parts[0] not in SOURCE_FOLDERS or ".." in parts or "\\" in key:
            raise InvalidInput(f"{key!r} is not a file of an account's plain-file form", path=key)
        if key == VERSION_FILE:
            head = int(parse_copy(key, data)["version"])
        elif key == LOG_FILE:
            log = data
        elif key.startswith(ADDED_DIR + "/"):
            kept[key] = json.loads(data)
        else:
            row = _copy_row(account_id, key, data)
            (records if len(row) == len(RECORD_COLUMNS) + 1 else documents).append(row)
    write_rows(conn, "records", (*RECORD_COLUMNS, "to_version"), records, bulk=True)
    write_rows(conn, "documents", (*DOCUMENT_COLUMNS, "to_version"), documents, bulk=True)
    for n, raw in enumerate(log.splitlines(), 1):
        if raw.strip():
            try:
                line = entry_of(raw)
            except ValueError as exc:
                raise Corrupted(f"{LOG_FILE}:{n} is not JSON", path=LOG_FILE) from exc
            bulk = bool(line.get("added_file"))
            entry = inline(line, kept[line["added_file"]]) if bulk else line
            conn.execute("INSERT INTO versions (account_id, version, entry, bulk) VALUES (%s, %s, %s, %s)",
                         (account_id, int(line["version"]), Jsonb(entry), bulk))
    return head


def _copy_row(account_id: int, key: str, data: bytes) -> tuple[object, ...]:
    """A record's or document's row: a ``history/`` copy is its ``core/`` key's, replaced by the
    version its file is named after; a current one is in force (``to_version`` NULL)."""
    to: int | None = None
    if key.startswith(HISTORY + "/"):
        path = PurePosixPath(key)
        to = int(path.stem)
        key = str(PurePosixPath(CORE, *path.parts[1:-1])) + path.suffix
    body = parse_copy(key, data)
    version = int(body.get("version", 0))
    record_id = record_of_key(key)
    if record_id is not None:
        return (account_id, record_id, kind_of_id(record_id), key, version, data, Jsonb(body), to)
    return (account_id, key, version, data, Jsonb(body), to)
