"""A commit is one transaction: lock the account's head row, check the parent, close the rows the
change replaces or retires, write its rows, close its sandbox, log it, advance HEAD.

Each step is reported by name to an optional test hook; a hook that raises inside the transaction
rolls all of it back (the previous version stays whole), one that raises after it (``committed``)
finds the new version whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from soulpass.errors import InvalidInput, NotFound
from soulpass.store.contract import Change, CommitOutcome, HeadMoved, Hook, VersionWritten
from soulpass.store.postgres.rows import (
    DOCUMENT_COLUMNS,
    RECORD_COLUMNS,
    CopyRow,
    document_row,
    logged_entry,
    record_row,
    split_keys,
)

__all__ = ["COMMIT_STEPS", "commit", "write_rows"]

COMMIT_STEPS = ("head_locked", "rows_closed", "rows_written", "sandbox_closed", "logged", "head_advanced",
                "committed")

def _noop(step: str) -> None:
    return None

def commit(conn: psycopg.Connection[tuple[Any, ...]], account_id: int, change: Change,
           hook: Hook | None = None) -> CommitOutcome:
    """Make ``change`` version ``change.version`` of the account, on ``conn`` (not in a transaction)."""
    hook = hook or _noop
    version = change.version
    records = [record_row(r) for r in change.records]  # encoded (and refused) before anything is locked
    documents = [document_row(d) for d in change.documents]
    try:
        outcome = _write(conn, account_id, change, records, documents, hook)
    except psycopg.errors.DataError as exc:  # e.g. a NUL character, which JSONB cannot hold
        raise InvalidInput(f"version {version} cannot be stored in PostgreSQL: {exc}", version=version) from exc
    if isinstance(outcome, HeadMoved):
        return outcome
    hook("committed")
    return VersionWritten(version)


def _write(conn: psycopg.Connection[tuple[Any, ...]], account_id: int, change: Change, records: list[CopyRow],
           documents: list[CopyRow], hook: Hook) -> CommitOutcome:
    """The transaction of :func:`commit`: nothing of it stays unless it all does."""
    version = change.version
    retired_ids, retired_keys = split_keys(change.retires)
    with conn.transaction():
        row = conn.execute("SELECT head FROM accounts WHERE id = %s FOR UPDATE", (account_id,)).fetchone()
        if row is None:
            raise NotFound(f"account {account_id} was deleted", account=str(account_id))
        head = _head_from_log(conn, account_id, int(str(row[0])))
        if head != change.parent:
            return HeadMoved(parent=change.parent, head=head)
        hook("head_locked")
        conn.execute("UPDATE records SET to_version = %s WHERE account_id = %s AND record_id = ANY(%s) "
                     "AND to_version IS NULL", (version, account_id, [r.record_id for r in records] + retired_ids))
        conn.execute("UPDATE documents SET to_version = %s WHERE account_id = %s AND key = ANY(%s) "
                     "AND to_version IS NULL", (version, account_id, [d.key for d in documents] + retired_keys))
        hook("rows_closed")
        write_rows(conn, "records", RECORD_COLUMNS, [r.values(account_id, version) for r in records], change.bulk)
        write_rows(conn, "documents", DOCUMENT_COLUMNS, [d.values(account_id, version) for d in documents],
                   change.bulk)
        hook("rows_written")
        if change.closes is not None:
            conn.execute("UPDATE sandboxes SET archived_as = %s, kept = %s WHERE account_id = %s AND sandbox_id = %s",
                         (version, change.closes.keep, account_id, change.closes.sandbox_id))
        hook("sandbox_closed")
        conn.execute("INSERT INTO versions (account_id, version, entry, bulk) VALUES (%s, %s, %s, %s)",
                     (account_id, version, Jsonb(logged_entry(change)), change.bulk))
        hook("logged")
        conn.execute("UPDATE accounts SET head = %s WHERE id = %s", (version, account_id))
        hook("head_advanced")
    return VersionWritten(version)


def _head_from_log(conn: psycopg.Connection[tuple[Any, ...]], account_id: int, head: int) -> int:
    """HEAD as the version log has it (the head row is its fast copy, locked by the caller): a head
    row changed by hand is set back from the log, so no version, and no id, is issued twice."""
    row = conn.execute("SELECT max(version) FROM versions WHERE account_id = %s", (account_id,)).fetchone()
    logged = int(row[0]) if row is not None and row[0] is not None else 0
    if logged != head:
        conn.execute("UPDATE accounts SET head = %s WHERE id = %s", (logged, account_id))
    return logged


def write_rows(conn: psycopg.Connection[tuple[Any, ...]], table: str, columns: Sequence[str],
               rows: Sequence[tuple[object, ...]], bulk: bool) -> None:
    """Insert ``rows``: with COPY for a bulk change (one stream, no statement per row), else in
    one pipelined ``executemany``."""
    if not rows:
        return
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    if bulk:
        with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), names)) as copy:
            for values in rows:
                copy.write_row(values)
        return
    marks = sql.SQL(", ").join(sql.Placeholder() * len(columns))
    with conn.cursor() as cur:
        cur.executemany(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(sql.Identifier(table), names, marks),
                        rows)
