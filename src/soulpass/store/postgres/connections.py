"""Connections to a database: one pool per URL in a process, the schema migrated on first use.

Short reads and commits borrow a pooled connection; a section held across calls (an account's or a
sandbox's exclusive section) takes a connection of its own, so waiting for it never starves the pool.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.store.contract import Migration
from soulpass.store.postgres.schema import STORE_MIGRATIONS, migrate
from soulpass.store.postgres.url import local_root, masked, server_url

__all__ = ["Database", "close_database", "database"]


def _lost(exc: psycopg.Error) -> bool:
    """Whether ``exc`` says the server or the connection is gone (no SQLSTATE, or class 08
    "connection exception" or 57 "operator intervention": a shutdown, a terminated backend)."""
    return exc.sqlstate is None or exc.sqlstate.startswith(("08", "57"))

POOL_SIZE = 10


class Database:
    """One database: a pool of connections and the URL to open dedicated ones
    (:class:`soulpass.store.contract.Database`); the store's own tables are migrated on opening it."""

    def __init__(self, url: str) -> None:
        self.url, self.conninfo = url, server_url(url)
        try:
            conninfo_to_dict(self.conninfo)
        except psycopg.ProgrammingError as exc:  # an unknown parameter, a bad port: before any connection
            raise InvalidInput(f"{masked(url)} is not a PostgreSQL URL libpq takes: {exc}", url=masked(url)) from exc
        self._migrated: set[str] = set()  # names this process applied or found applied: not asked again
        self._migrating = threading.Lock()
        try:
            self.migrate(STORE_MIGRATIONS)
        except psycopg.OperationalError as exc:
            raise BackendUnavailable(f"PostgreSQL at {masked(url)} does not answer: {exc}", url=masked(url)) from exc
        self.pool = ConnectionPool(self.conninfo, min_size=1, max_size=POOL_SIZE, open=True,
                                   configure=_configure, name="soulpass")

    @property
    def local_folder(self) -> Path:
        """This machine's folder for the database's URL (``url.local_root``)."""
        return local_root(self.url)

    def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """The named-migration runner (``schema.migrate``) on a connection of its own, skipped once
        this process has seen every one of ``migrations`` applied."""
        with self._migrating:
            if all(m.name in self._migrated for m in migrations):
                return []
            with psycopg.connect(self.conninfo) as conn:
                applied = migrate(conn, migrations)
            self._migrated.update(m.name for m in migrations)
            return applied

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A pooled connection; leaving the block commits (or rolls back on an exception). The
        server gone, the connection lost or none free in time is ``BackendUnavailable``; an error
        of a statement (a lock not available, a constraint) is raised as it is, for its caller."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:  # PoolTimeout among them
            if not _lost(exc):
                raise
            raise BackendUnavailable(f"PostgreSQL at {masked(self.url)} failed: {str(exc).strip()[:300]}",
                                     url=masked(self.url)) from exc

    @contextlib.contextmanager
    def reading(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A pooled connection for reads, each statement on its own (autocommit): no BEGIN and
        COMMIT around them, two round trips fewer per block. For reads that need no snapshot shared
        between statements (a search's steps each read what is committed); errors as ``connection``."""
        with self.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                conn.autocommit = False

    @contextlib.contextmanager
    def dedicated(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A connection of its own, closed on leaving: for a section held across other calls."""
        conn = psycopg.connect(self.conninfo, autocommit=True)
        try:
            _configure(conn)
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        self.pool.close()


def _configure(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Timestamps come back in UTC, as the files backend writes them."""
    autocommit = conn.autocommit
    conn.autocommit = True
    conn.execute("SET TIME ZONE 'UTC'")
    conn.autocommit = autocommit


_DATABASES: dict[str, Database] = {}
_LOCK = threading.Lock()


def database(url: str) -> Database:
    """The process's :class:`Database` for ``url`` (made, and the schema migrated, on first use)."""
    with _LOCK:
        db = _DATABASES.get(url)
        if db is None:
            db = _DATABASES[url] = Database(url)
        return db


def close_database(url: str) -> None:
    """Close the pool of ``url`` (a later :func:`database` opens a new one)."""
    with _LOCK:
        db = _DATABASES.pop(url, None)
    if db is not None:
        db.close()


@atexit.register
def _close_all() -> None:
    for url in list(_DATABASES):
        close_database(url)
