"""One account kept in PostgreSQL (:class:`soulpass.store.contract.AccountBackend`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg

from soulpass.errors import BackendUnavailable, InvalidInput, NotFound
from soulpass.store.contract import (
    Change,
    CommitOutcome,
    DatabaseIndex,
    HandEditedCopy,
    Hook,
    IndexLocation,
    LocalIndex,
    StoredCopy,
    StoredVersionCopy,
    StoreFinding,
    UnreadableCopy,
    VersionChanges,
    VersionEntry,
    VersionWritten,
)
from soulpass.store.files.bulk_lists import set_apart
from soulpass.store.files.commit import version_doc
from soulpass.store.fsio import dump_json, folder_bytes
from soulpass.store.keys import VERSION_FILE
from soulpass.store.postgres import commit as commits
from soulpass.store.postgres import transfer
from soulpass.store.postgres.connections import Database
from soulpass.store.postgres.forget import forget_keys, vacuum_erased
from soulpass.store.postgres.rows import logged_entry
from soulpass.store.postgres.sandboxes import PostgresSandboxes
from soulpass.store.postgres.snapshot import PostgresSnapshot
from soulpass.store.redact import Erasure

__all__ = ["PostgresAccount"]

# Both tables' copies as (key, data, body, from_version, to_version).
_COPIES = ("SELECT key, data, body, from_version, to_version FROM records WHERE account_id = %(account)s AND {where} "
           "UNION ALL "
           "SELECT key, data, body, from_version, to_version FROM documents WHERE account_id = %(account)s AND {where} "
           "ORDER BY key")


class PostgresAccount:
    """Account ``name`` (row ``account_id``); its derived index lives in the database, or under
    ``local_root`` (:meth:`index_location`)."""

    def __init__(self, db: Database, account_id: int, name: str, uid: str, local_root: Path, *,
                 index_in_database: bool = True) -> None:
        self._db, self._id, self._name = db, account_id, name
        self._index_in_database = index_in_database
        self._index = local_root / "accounts" / f"{name}.{uid}" / "index"  # a replaced account: a new uid
        self._sandboxes = PostgresSandboxes(db, account_id, name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def sandboxes(self) -> PostgresSandboxes:
        return self._sandboxes

    def head(self) -> int:
        with self._db.reading() as conn:
            row = conn.execute("SELECT head FROM accounts WHERE id = %s", (self._id,)).fetchone()
        if row is None:
            raise NotFound(f"account {self._name!r} no longer exists", account=self._name)
        return int(row[0])

    def snapshot(self, at: int | None = None) -> PostgresSnapshot:
        head = self.head()
        if at is None:
            return PostgresSnapshot(self._db, self._id, head)
        if type(at) is not int:
            raise InvalidInput(f"version must be an integer, not {at!r}", field="version")
        if at < 0 or at > head:
            raise NotFound(f"version {at} does not exist (HEAD is {head})", account=self._name)
        return PostgresSnapshot(self._db, self._id, at)

    def log(self, since: int = 0, *, lists: bool = True) -> list[VersionEntry]:
        """A bulk version without its lists reads as the files backend's log line does."""
        with self._db.connection() as conn:
            rows = conn.execute("SELECT entry, bulk FROM versions WHERE account_id = %s AND version > %s "
                                "ORDER BY version", (self._id, since)).fetchall()
        return [VersionEntry(set_apart(entry)[0] if bulk and not lists else entry) for entry, bulk in rows]

    def commit(self, change: Change, *, parent: int, hook: Hook | None = None) -> CommitOutcome:
        """One transaction. A connection lost on the way leaves the outcome to the server: it is
        asked on a new connection, so a version that did commit is reported ``VersionWritten`` (with
        what happened) and one that did not raises ``BackendUnavailable`` saying so."""
        if change.parent != parent:
            raise InvalidInput(f"a change to version {change.version} is not planned on version {parent}",
                               field="parent")
        try:
            with self._db.connection() as conn:
                return commits.commit(conn, self._id, change, hook)
        except (psycopg.OperationalError, BackendUnavailable) as exc:  # the latter: the pool saw it lost
            if self._logged(change):
                return VersionWritten(change.version, f"version {change.version} is committed; the connection was lost "
                                                 f"as it answered ({exc})")
            raise BackendUnavailable(f"PostgreSQL connection lost ({exc}); version {change.version} was not "
                                     "committed and nothing of it was kept", account=self._name) from exc

    def _logged(self, change: Change) -> bool:
        """Whether the log holds ``change`` as its version (asked on a connection of its own)."""
        with self._db.dedicated() as conn:
            row = conn.execute("SELECT entry FROM versions WHERE account_id = %s AND version = %s",
                               (self._id, change.version)).fetchone()
        return row is not None and row[0] == json.loads(json.dumps(logged_entry(change)))

    def changes(self, since: int) -> Iterator[VersionChanges]:
        for entry in self.log(since):
            with self._db.connection() as conn:
                put = conn.execute(_COPIES.format(where="from_version = %(v)s"),
                                   {"account": self._id, "v": entry.version}).fetchall()
                gone = conn.execute(_COPIES.format(where="to_version = %(v)s"),
                                    {"account": self._id, "v": entry.version}).fetchall()
            puts = tuple(StoredCopy(key, bytes(data), body) for key, data, body, _f, _t in put)
            written = {p.key for p in puts}
            yield VersionChanges(entry, puts, tuple(sorted({r[0] for r in gone} - written)))

    def copies(self, wanted: Callable[[str], bool] | None = None) -> PostgresCopyWalk:
        return PostgresCopyWalk(self._db, self._id, wanted)

    def index_location(self) -> IndexLocation:
        """In the database unless the URL says ``soulpass_index=local``; either way, what is kept
        locally lives under ``local_root``, named by the account's uid (a replaced account: a new one)."""
        if self._index_in_database:
            return DatabaseIndex(self._db, self._id, self._index)
        return LocalIndex(self._index)

    def stored_bytes(self) -> int:
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT coalesce(sum(octet_length(data)), 0) FROM records WHERE account_id = %(a)s)"
                " + (SELECT coalesce(sum(octet_length(data)), 0) FROM documents WHERE account_id = %(a)s)"
                " + (SELECT coalesce(sum(octet_length(entry::text)), 0) FROM versions WHERE account_id = %(a)s)"
                " + (SELECT coalesce(sum(octet_length(event::text)), 0) FROM session_events WHERE account_id = %(a)s)",
                {"a": self._id}).fetchone()
        return int(row[0] if row else 0) + folder_bytes(self._index)

    def recover(self) -> list[str]:
        """Remove the sandboxes an archive committed but whose removal never ran (a process died, a
        connection was lost); a sandbox kept for its history (``kept``) stays."""
        try:
            with self._db.connection() as conn:
                rows = conn.execute("DELETE FROM sandboxes WHERE account_id = %s AND archived_as IS NOT NULL "
                                    "AND NOT kept RETURNING sandbox_id", (self._id,)).fetchall()
        except psycopg.OperationalError as exc:
            raise BackendUnavailable(f"PostgreSQL connection lost during recovery: {exc}", account=self._name) from exc
        return [f"removed archived sandbox {r[0]}" for r in sorted(rows)]

    def audit(self) -> list[StoreFinding]:
        """A commit is one transaction, so only the head row and the log can disagree (by hand)."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT a.head, (SELECT max(version) FROM versions v WHERE v.account_id = a.id) "
                               "FROM accounts a WHERE a.id = %s", (self._id,)).fetchone()
        head, last = (0, None) if row is None else row
        if last is not None and int(last) != int(head):
            return [StoreFinding("version_drift", "versions", f"the head row says {head}, the log ends at {last}")]
        return []

    def current_copies(self) -> Iterator[StoredCopy | UnreadableCopy]:
        """Records and documents in force, and the version header (``core/VERSION.json``), by key."""
        with self._db.connection() as conn:
            rows = conn.execute(_COPIES.format(where="to_version IS NULL"), {"account": self._id}).fetchall()
        copies = [StoredCopy(key, bytes(data), body) for key, data, body, _f, _t in rows]
        header = self.version_header()
        if header is not None:
            copies.append(header)
        return iter(sorted(copies, key=lambda c: c.key))

    def version_header(self) -> StoredCopy | None:
        """HEAD's header as the files backend keeps it in ``core/VERSION.json`` (None at version 0)."""
        snap = self.snapshot()
        if snap.version == 0:
            return None
        doc: dict[str, Any] = version_doc(snap.entry().fields)
        return StoredCopy(VERSION_FILE, dump_json(doc), doc)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Holds the account's head row on a connection of its own: commits wait for the block."""
        with self._db.dedicated() as conn, conn.transaction():
            conn.execute("SELECT head FROM accounts WHERE id = %s FOR UPDATE", (self._id,))
            yield

    def source_files(self) -> Iterator[tuple[str, bytes]]:
        return transfer.source_files(self._db, self._id)

    def hand_edits(self) -> list[HandEditedCopy]:
        return []  # rows, not files: nothing is edited outside Soulpass

    def put_back(self, key: str) -> bool:
        return False

    def forget(self, keys: Sequence[str], erasure: Erasure) -> dict[str, list[int]]:
        return forget_keys(self._db, self._id, keys, erasure)

    def reclaim(self) -> list[str]:
        return vacuum_erased(self._db)


class PostgresCopyWalk:
    """The copies of :meth:`PostgresAccount.copies` (a :class:`soulpass.store.contract.CopyWalk`):
    keys listed when it is made, in force first; each copy read as it is iterated."""

    def __init__(self, db: Database, account_id: int, wanted: Callable[[str], bool] | None) -> None:
        self._db, self._account = db, account_id
        with db.connection() as conn:
            rows = conn.execute("SELECT 'records', key, from_version, to_version FROM records WHERE account_id = %(a)s "
                                "UNION ALL SELECT 'documents', key, from_version, to_version FROM documents "
                                "WHERE account_id = %(a)s ORDER BY 4 NULLS FIRST, 2, 3", {"a": account_id}).fetchall()
        self._found = [r for r in rows if wanted is None or wanted(r[1])]

    def __len__(self) -> int:
        return len(self._found)

    def __iter__(self) -> Iterator[StoredVersionCopy]:
        for table, key, start, to in self._found:
            with self._db.connection() as conn:
                row = conn.execute(f"SELECT data, body FROM {table} WHERE account_id = %s AND key = %s "
                                   "AND from_version = %s", (self._account, key, start)).fetchone()
            if row is not None:
                yield StoredVersionCopy(StoredCopy(key, bytes(row[0]), row[1]), to)
