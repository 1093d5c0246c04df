"""Sandboxes and their session logs as rows: ``sandboxes`` (metadata, ``archived_as``, ``kept``) and
``session_events`` (one JSONB event a row, in ``seq`` order).

An append is one transaction under the sandbox's ``buffer`` advisory lock (transaction-level), so a
batch is all or nothing and appends of one sandbox are serialised; :meth:`PostgresSessionLog.section`
holds a session-level advisory lock of the same key on a dedicated connection. Lock keys are hashed
from (schema, account, sandbox, section name).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
from pydantic import ValidationError

from soulpass.errors import BackendUnavailable, Conflict, InvalidInput, NotFound
from soulpass.ids import check_name, new_sandbox_id, utc_now
from soulpass.records import BufferEvent
from soulpass.store.contract import PendingEvent, SandboxMeta
from soulpass.store.postgres.connections import Database

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "PostgresSandboxes", "PostgresSessionLog", "PostgresSessionTail"]

DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
_LOCK_KEY = "hashtextextended(current_schema() || '/' || %s, 0)"
# An append waits this long for the buffer lock in the database, then lets its pooled connection go
# and tries again: appends queued behind an archive never take every connection of the pool.
_APPEND_WAIT = "200ms"


class PostgresSandboxes:
    """The sandboxes of one account (:class:`soulpass.store.contract.SandboxStore`)."""

    def __init__(self, db: Database, account_id: int, name: str) -> None:
        self._db, self._account, self._name = db, account_id, name

    def create(self, name: str, parent_version: int, sandbox_id: str | None = None) -> SandboxMeta:
        sid = check_name(sandbox_id, "sandbox id") if sandbox_id is not None else new_sandbox_id()
        meta = SandboxMeta(sandbox_id=sid, name=name, account=self._name, parent_version=parent_version,
                           created_at=utc_now())
        with self._db.connection() as conn:
            made = conn.execute(
                "INSERT INTO sandboxes (account_id, sandbox_id, name, parent_version, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (self._account, sid, name, parent_version, meta.created_at)).rowcount
        if not made:
            raise InvalidInput(f"sandbox {sid} already exists", sandbox_id=sid)
        return meta

    def get(self, sandbox_id: str) -> SandboxMeta:
        sid = check_name(sandbox_id, "sandbox id")
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT {_META} FROM sandboxes WHERE account_id = %s AND sandbox_id = %s",
                               (self._account, sid)).fetchone()
        if row is None:
            raise NotFound(f"sandbox {sid} does not exist in account {self._name}", sandbox_id=sid,
                           account=self._name)
        return self._meta(row)

    def list(self) -> list[SandboxMeta]:
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT {_META} FROM sandboxes WHERE account_id = %s ORDER BY created_at, sandbox_id",
                                (self._account,)).fetchall()
        return [self._meta(r) for r in rows]

    def session_log(self, sandbox_id: str, *, max_event_bytes: int | None = None,
                    check: Callable[[PendingEvent], None] | None = None) -> PostgresSessionLog:
        return PostgresSessionLog(self._db, self._account, check_name(sandbox_id, "sandbox id"),
                                  max_event_bytes=max_event_bytes or DEFAULT_MAX_EVENT_BYTES, check=check)

    def remove(self, sandbox_id: str) -> None:
        sid = check_name(sandbox_id, "sandbox id")
        try:
            with self._db.connection() as conn:  # its events go with it (ON DELETE CASCADE)
                conn.execute("DELETE FROM sandboxes WHERE account_id = %s AND sandbox_id = %s", (self._account, sid))
        except psycopg.OperationalError as exc:  # an archived one is removed by recovery later
            raise BackendUnavailable(f"PostgreSQL connection lost removing sandbox {sid}: {exc}",
                                     sandbox_id=sid) from exc

    def _meta(self, row: tuple[Any, ...]) -> SandboxMeta:
        sid, name, parent, created, archived, kept = row
        return SandboxMeta(sandbox_id=sid, name=name, account=self._name, parent_version=int(parent),
                           created_at=created, archived_as=archived, kept=bool(kept))


_META = "sandbox_id, name, parent_version, created_at, archived_as, kept"


class PostgresSessionLog:
    """The events of one sandbox (:class:`soulpass.store.contract.SessionLog`)."""

    def __init__(self, db: Database, account_id: int, sandbox_id: str, *,
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                 check: Callable[[PendingEvent], None] | None = None) -> None:
        self._db, self._account, self.sandbox_id = db, account_id, sandbox_id
        self.max_event_bytes = max_event_bytes
        self._check = check

    def _lock_name(self, name: str) -> str:
        return f"{self._account}/{self.sandbox_id}/{check_name(name, 'section name')}"

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        return self.section("buffer")

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        """Held on a connection of its own for the whole block; ``Conflict`` once the sandbox is gone."""
        with self._db.dedicated() as conn:
            key = self._lock_name(name)
            conn.execute(f"SELECT pg_advisory_lock({_LOCK_KEY})", (key,))
            try:
                if self._state(conn) is None:
                    raise Conflict(f"sandbox {self.sandbox_id} no longer exists", sandbox_id=self.sandbox_id)
                yield
            finally:
                with contextlib.suppress(psycopg.OperationalError):  # a lost session released its locks
                    conn.execute(f"SELECT pg_advisory_unlock({_LOCK_KEY})", (key,))

    def _state(self, conn: psycopg.Connection[tuple[Any, ...]]) -> tuple[Any, ...] | None:
        """(archived_as,) of the sandbox, or None once it is removed."""
        return conn.execute("SELECT archived_as FROM sandboxes WHERE account_id = %s AND sandbox_id = %s",
                            (self._account, self.sandbox_id)).fetchone()

    def tail(self) -> PostgresSessionTail:
        return PostgresSessionTail(self._db, self._account, self.sandbox_id)

    def append_many(self, events: Sequence[PendingEvent], at: datetime | None = None) -> list[BufferEvent]:
        """Every event checked and encoded first, then all inserted in one transaction."""
        out, lines = [], []
        for pending in events:
            event, line = self._encode(pending, at)
            out.append(event)
            lines.append((self._account, self.sandbox_id, line))
        for attempt in itertools.count():
            try:
                self._insert(lines)
                break
            except psycopg.errors.LockNotAvailable:
                time.sleep(min(0.01 * attempt, 0.1))  # an archive or discard holds the buffer: wait, as flock does
        return out

    def _encode(self, pending: PendingEvent, at: datetime | None) -> tuple[BufferEvent, str]:
        """The event and its JSON, refused as the files backend refuses it."""
        if self._check is not None:
            self._check(pending)
        try:
            event = BufferEvent(event_id=uuid.uuid4().hex, type=pending.type, at=at or utc_now(),
                                agent=pending.agent, data=dict(pending.data))
        except ValidationError as exc:
            raise InvalidInput(f"invalid buffer event: {exc}") from exc
        try:
            line = json.dumps(event.model_dump(mode="json"), ensure_ascii=False, allow_nan=False)
            size = len(line.encode("utf-8")) + 1
        except (ValueError, UnicodeError) as exc:
            raise InvalidInput(f"{pending.type} event cannot be stored as JSON: {exc}") from exc
        if size > self.max_event_bytes:
            raise InvalidInput(f"{pending.type} event is {size} bytes (limit {self.max_event_bytes})", field="data")
        return event, line

    def _insert(self, rows: list[tuple[int, str, str]]) -> None:
        with self._db.connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{_APPEND_WAIT}'")
            conn.execute(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})", (self._lock_name("buffer"),))
            state = self._state(conn)
            if state is None:
                raise Conflict(f"sandbox {self.sandbox_id} no longer exists", sandbox_id=self.sandbox_id)
            if state[0] is not None:
                raise Conflict(f"sandbox {self.sandbox_id} is already archived", sandbox_id=self.sandbox_id)
            try:
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO session_events (account_id, sandbox_id, event) "
                                    "VALUES (%s, %s, %s::jsonb)", rows)
            except psycopg.errors.DataError as exc:  # e.g. a NUL character, which JSONB cannot hold
                raise InvalidInput(f"an event cannot be stored in PostgreSQL: {exc}", field="data") from exc

    def events(self, after: int = 0) -> list[BufferEvent]:
        with self._db.connection() as conn:
            rows = conn.execute("SELECT event FROM session_events WHERE account_id = %s AND sandbox_id = %s "
                                "ORDER BY seq OFFSET %s", (self._account, self.sandbox_id, after)).fetchall()
        return [BufferEvent.model_validate(r[0]) for r in rows]

    def close(self, archived_as: int | None = None) -> None:
        with self._db.connection() as conn:
            conn.execute("DELETE FROM sandboxes WHERE account_id = %s AND sandbox_id = %s",
                         (self._account, self.sandbox_id))

    def torn_lines(self) -> int:
        return 0  # an append is a transaction: there is never half an event


class PostgresSessionTail:
    """Reads only the events past the last ``seq`` it saw (:class:`soulpass.store.contract.SessionTail`)."""

    def __init__(self, db: Database, account_id: int, sandbox_id: str) -> None:
        self._db, self._account, self._sandbox = db, account_id, sandbox_id
        self._seq = 0
        self._parsed: list[BufferEvent] = []

    def events(self) -> list[BufferEvent]:
        with self._db.connection() as conn:
            rows = conn.execute("SELECT seq, event FROM session_events WHERE account_id = %s AND sandbox_id = %s "
                                "AND seq > %s ORDER BY seq", (self._account, self._sandbox, self._seq)).fetchall()
        for seq, event in rows:
            self._parsed.append(BufferEvent.model_validate(event))
            self._seq = int(seq)
        return list(self._parsed)
