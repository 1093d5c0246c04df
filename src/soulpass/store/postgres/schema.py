"""The store's tables, and the named-migration runner every owner of tables in the database uses
(``Database.migrate``): migrations recorded in ``schema_migrations``, each in its own transaction.

Every table is keyed by account. A record or document row is one stored copy, valid for the
versions ``[from_version, to_version)`` (``to_version`` NULL: in force at HEAD), so a snapshot at V
is one indexed query and a commit closes rows and adds rows, never copies history. Keys are
``COLLATE "C"``: ranges and order are bytewise, as the plain-file names sort.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from soulpass.store.contract import Migration

__all__ = ["STORE_MIGRATIONS", "migrate"]

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

# The store's own tables. The index's (soulpass.index.pg.schema: 0003_index,
# 0008_index_search_reads) and the server's keys (soulpass.server.pg_keys: 0002_api_keys) are
# migrated by their owners, through the same runner (Database.migrate), and recorded in the same table.
# Journal dedupe (Snapshot.with_semantic_hash) finds an account's entries by semantic hash at every
# archive that holds an entry: an index lookup instead of reading the journal's rows.
_SEMANTIC_HASH = """
CREATE INDEX documents_semantic_hash ON documents (account_id, (body->>'semantic_hash'))
    WHERE body ? 'semantic_hash';
"""

# One tombstone per deleted account (soulpass.store.postgres.erase): who and when, no content.
_DELETIONS = """
CREATE TABLE account_deletions (
    seq bigserial PRIMARY KEY,
    entry jsonb NOT NULL
);
"""

# A sandbox archived with items left out stays, closed and read-only, for its history (issue 41):
# set in the archive's commit transaction; recovery removes only archived sandboxes not kept.
_KEPT_SANDBOXES = """
ALTER TABLE sandboxes ADD COLUMN kept boolean NOT NULL DEFAULT false;
"""

STORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_store", _STORE),
    Migration("0004_store_semantic_hash", _SEMANTIC_HASH),
    Migration("0005_account_deletions", _DELETIONS),
    Migration("0007_kept_sandboxes", _KEPT_SANDBOXES),
)


def migrate(conn: psycopg.Connection[tuple[Any, ...]], migrations: Sequence[Migration]) -> list[str]:
    """The named-migration runner: apply those of ``migrations`` the database lacks, in order, each
    in its own transaction and recorded in ``schema_migrations``; returns their names. Processes
    starting together wait on one advisory lock, so each migration runs once."""
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('soulpass.schema_migrations'))")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                      "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
        for step in migrations:
            if step.name in done:
                continue
            with conn.transaction():
                conn.execute(step.sql.encode())
                conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (step.name,))
            applied.append(step.name)
    return applied
