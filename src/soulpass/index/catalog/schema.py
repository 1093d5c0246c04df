"""The catalog's SQLite schema, made in one step, and its connection settings.

The catalog is derived from the store and rebuilt from it exactly, so it has no migrations: a
catalog whose recorded ``schema_version`` is not ``SCHEMA_VERSION`` is deleted and made again,
and the next catch-up rebuilds its rows (as a damaged one is). The tables the store and the
PostgreSQL index keep hold the truth, or are shared by every process, and go through the
named-migration runner instead (``Database.migrate``).

Connection settings, and why:

- ``journal_mode=WAL``: searches never wait for a catch-up that is writing, and vice versa.
- ``busy_timeout``: two processes catching up at once queue for the write lock instead of failing.
- ``synchronous=NORMAL``: in WAL mode a power loss can lose the last transactions but never
  corrupts the file. The catalog is derived and stamps the store version it reflects in the same
  transaction as its rows, so a lost transaction is simply caught up again; FULL would pay an
  fsync per transaction for nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

__all__ = ["SCHEMA_VERSION", "TOKENIZER", "configure", "create", "transaction"]

# porter + stop words measured best on LoCoMo questions (R@10 0.61 vs 0.56 without stemming).
TOKENIZER = "porter unicode61 remove_diacritics 2"


def configure(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA cache_size = -32768")  # 32 MiB: keeps the FTS doclists of common terms hot


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on any exception (autocommit connections)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


SCHEMA_VERSION = 5  # another value in a catalog file: it is deleted and made again (rebuilt from the store)

# One row per stored copy of a record or document. A copy is in force over [version, valid_to);
# ``replaced_at`` is the version whose commit replaced or retired the file.
_SCHEMA = f"""
CREATE TABLE catalog (
    row            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL,
    kind           TEXT NOT NULL,
    version        INTEGER NOT NULL,
    valid_to       INTEGER,
    replaced_at    INTEGER,
    event_us       INTEGER,
    agent          TEXT,
    session_id     TEXT,
    persona_id     TEXT,
    event_id       TEXT,
    tags           TEXT NOT NULL DEFAULT '[]',
    superseded_by  TEXT,
    path           TEXT NOT NULL,
    text           TEXT NOT NULL DEFAULT '',
    semantic_hash  TEXT NOT NULL DEFAULT '',
    content_hash   TEXT NOT NULL,
    UNIQUE (id, version)
);
CREATE INDEX catalog_kind_time ON catalog (kind, event_us);
CREATE INDEX catalog_time ON catalog (event_us);
CREATE INDEX catalog_agent ON catalog (agent) WHERE agent IS NOT NULL;
CREATE INDEX catalog_session ON catalog (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX catalog_persona ON catalog (persona_id) WHERE persona_id IS NOT NULL;
CREATE INDEX catalog_event ON catalog (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX catalog_replaced ON catalog (replaced_at) WHERE replaced_at IS NOT NULL;
-- the turns before and after a hit in its conversation (hybrid search's neighbouring-turn context)
CREATE INDEX catalog_session_time ON catalog (session_id, event_us, id) WHERE session_id IS NOT NULL;
-- lookups by semantic hash (duplicate checks, recurring insights of prose records)
CREATE INDEX catalog_semantic_hash ON catalog (semantic_hash) WHERE semantic_hash != '';
-- rows written after a version (the embedding backlog's "not looked at yet", asked at every search):
-- without it a count scans every row
CREATE INDEX catalog_version ON catalog (version);
CREATE TABLE catalog_tags (tag TEXT NOT NULL, row INTEGER NOT NULL, PRIMARY KEY (tag, row)) WITHOUT ROWID;
-- External content: the text lives once, in ``catalog``; rows are never updated in their text and
-- only deleted all at once (rebuild) or named old values and all (delete_rows): no triggers needed.
CREATE VIRTUAL TABLE catalog_fts USING fts5 (
    text, agent, content = 'catalog', content_rowid = 'row', tokenize = '{TOKENIZER}'
);
-- Records not embedded yet, per embedder (``model``: model id and embedding recipe), and up to which
-- catalog version rows were looked at (soulpass.index.backlog). Beside the rows they come from, so
-- a fresh catalog starts its backlog from nothing too.
CREATE TABLE embed_backlog (model TEXT NOT NULL, id TEXT NOT NULL, text_hash TEXT NOT NULL,
                            version INTEGER NOT NULL, PRIMARY KEY (model, id)) WITHOUT ROWID;
CREATE INDEX embed_backlog_order ON embed_backlog (model, version, id);
CREATE TABLE embed_queued (model TEXT PRIMARY KEY, version INTEGER NOT NULL, generation INTEGER NOT NULL);
-- The migrations earlier releases applied one by one, recorded as they recorded them: a process of
-- such a release opening this file finds nothing to apply.
CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
INSERT INTO migrations (name, applied_at) VALUES ('001_catalog', ''), ('002_session_order', ''),
    ('003_semantic_hash', ''), ('004_embed_backlog', ''), ('005_version_order', '');
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('store_version', '0'), ('store_timestamp', ''), ('generation', '0'),
                                     ('schema_version', '{SCHEMA_VERSION}');
"""


def create(conn: sqlite3.Connection) -> bool:
    """Make the schema in a new (empty) catalog file; False when the file holds a catalog of another
    schema (its owner deletes it and opens again). An up-to-date catalog takes no write lock."""
    if _schema_version(conn) == SCHEMA_VERSION:
        return True
    with transaction(conn):  # checked again under the write lock: two processes may open a new file at once
        found = _schema_version(conn)
        if found is None and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            for statement in _SCHEMA.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            return True
    return found == SCHEMA_VERSION


def _schema_version(conn: sqlite3.Connection) -> int | None:
    try:
        found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:  # no meta table: a new file, or not a catalog
        return None
    return int(found[0]) if found else None
