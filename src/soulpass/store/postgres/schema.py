"""The tables, as named migrations recorded in ``schema_migrations``, each in its own transaction.

Every table is keyed by account. A record or document row is one stored copy, valid for the
versions ``[from_version, to_version)`` (``to_version`` NULL: in force at HEAD), so a snapshot at V
is one indexed query and a commit closes rows and adds rows, never copies history. Keys are
``COLLATE "C"``: ranges and order are bytewise, as the plain-file names sort.
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["MIGRATIONS", "migrate"]

_STORE = """
CREATE TABLE accounts (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    uid uuid NOT NULL DEFAULT gen_random_uuid(),
    head integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE versions (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    version integer NOT NULL,
    entry jsonb NOT NULL,
    bulk boolean NOT NULL DEFAULT false,
    PRIMARY KEY (account_id, version)
);
CREATE TABLE records (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    record_id text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    key text COLLATE "C" NOT NULL,
    from_version integer NOT NULL,
    to_version integer,
    data bytea NOT NULL,
    body jsonb NOT NULL,
    PRIMARY KEY (account_id, record_id, from_version)
);
CREATE UNIQUE INDEX records_in_force ON records (account_id, record_id) WHERE to_version IS NULL;
CREATE INDEX records_by_kind ON records (account_id, kind, key, from_version);
CREATE INDEX records_by_from ON records (account_id, from_version);
CREATE INDEX records_by_to ON records (account_id, to_version) WHERE to_version IS NOT NULL;
CREATE TABLE documents (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key text COLLATE "C" NOT NULL,
    from_version integer NOT NULL,
    to_version integer,
    data bytea NOT NULL,
    body jsonb NOT NULL,
    PRIMARY KEY (account_id, key, from_version)
);
CREATE UNIQUE INDEX documents_in_force ON documents (account_id, key) WHERE to_version IS NULL;
CREATE INDEX documents_by_from ON documents (account_id, from_version);
CREATE INDEX documents_by_to ON documents (account_id, to_version) WHERE to_version IS NOT NULL;
CREATE TABLE sandboxes (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    sandbox_id text COLLATE "C" NOT NULL,
    name text NOT NULL,
    parent_version integer NOT NULL,
    created_at timestamptz NOT NULL,
    archived_as integer,
    PRIMARY KEY (account_id, sandbox_id)
);
CREATE TABLE session_events (
    account_id bigint NOT NULL,
    sandbox_id text COLLATE "C" NOT NULL,
    seq bigserial NOT NULL,
    event jsonb NOT NULL,
    PRIMARY KEY (account_id, sandbox_id, seq),
    FOREIGN KEY (account_id, sandbox_id) REFERENCES sandboxes (account_id, sandbox_id) ON DELETE CASCADE
);
"""

# (name, SQL), applied in order; a migration once released is never edited, only followed.
_API_KEYS = """
CREATE TABLE api_keys (
    key_id text PRIMARY KEY,
    account text,
    created_at text NOT NULL,
    label text NOT NULL DEFAULT '',
    sha256 text NOT NULL
);
"""

# The derived index kept beside the store (soulpass.index.pg): one catalog row per stored copy, as
# the SQLite catalog keeps them, with its full text as a tsvector under GIN; each embedder's
# vectors get a table of their own, made on first use (pgvector's column type needs the dimension)
# and listed in ``index_vector_tables`` so dropping an account's index finds them.
_CATALOG = """
CREATE TABLE index_state (
    account_id bigint PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    store_version integer NOT NULL DEFAULT 0,
    store_timestamp text NOT NULL DEFAULT '',
    generation integer NOT NULL DEFAULT 0,
    born uuid NOT NULL DEFAULT gen_random_uuid()  -- a dropped and recreated index is another one
);
CREATE TABLE index_rows (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    kind text NOT NULL,
    valid_to integer,
    replaced_at integer,
    event_us bigint,
    agent text,
    session_id text COLLATE "C",
    persona_id text,
    event_id text,
    tags text[] NOT NULL DEFAULT '{}',
    superseded_by text,
    path text COLLATE "C" NOT NULL,
    text text NOT NULL DEFAULT '',
    semantic_hash text NOT NULL DEFAULT '',
    content_hash text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text || ' ' || coalesce(agent, ''))) STORED,
    PRIMARY KEY (account_id, id, version)
);
CREATE INDEX index_rows_fulltext ON index_rows USING gin (tsv);
CREATE INDEX index_rows_kind_time ON index_rows (account_id, kind, event_us) WHERE valid_to IS NULL;
CREATE INDEX index_rows_session ON index_rows (account_id, session_id, event_us, id) WHERE session_id IS NOT NULL;
CREATE INDEX index_rows_agent ON index_rows (account_id, agent) WHERE agent IS NOT NULL;
CREATE INDEX index_rows_semantic_hash ON index_rows (account_id, semantic_hash) WHERE semantic_hash <> '';
CREATE INDEX index_rows_version ON index_rows (account_id, version, id);
CREATE INDEX index_rows_path ON index_rows (account_id, path) WHERE replaced_at IS NULL;
CREATE TABLE index_embedded (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    model text NOT NULL,
    generation integer NOT NULL,
    after_version integer NOT NULL,
    after_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (account_id, model)
);
CREATE TABLE index_vector_tables (
    name text PRIMARY KEY,
    model text NOT NULL,
    dim integer NOT NULL,
    pgvector boolean NOT NULL
);
"""

# One tombstone per deleted account (soulpass.store.postgres.erase): who and when, no content.
_DELETIONS = """
CREATE TABLE account_deletions (
    seq bigserial PRIMARY KEY,
    entry jsonb NOT NULL
);
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_store", _STORE),
    ("0002_api_keys", _API_KEYS),  # soulpass.server.pg_keys: the REST/MCP keys of a database home
    ("0003_index", _CATALOG),  # soulpass.index.pg: the catalog and vectors kept in the database
    ("0004_account_deletions", _DELETIONS),  # soulpass.store.postgres.erase
)


def migrate(conn: psycopg.Connection[tuple[Any, ...]]) -> list[str]:
    """Apply the migrations ``conn``'s database lacks; returns their names. Processes starting
    together wait on one advisory lock, so each migration runs once."""
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('soulpass.schema_migrations'))")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                      "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            with conn.transaction():
                conn.execute(sql.encode())
                conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
            applied.append(name)
    return applied
