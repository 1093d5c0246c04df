"""The index's own tables in the store's database, migrated by the index through the store's
named-migration runner (``Database.migrate``) when an index kept there is first opened
(``soulpass.index.opening.index_database``).
"""

from __future__ import annotations

from soulpass.store.contract import Migration

__all__ = ["INDEX_TABLES"]

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

# What a search reads most, kept close: a row's full-text vector stays in the row, compressed (MAIN),
# instead of moving out to the TOAST table with the row's text (a full-text search reads the vector
# of every row it scans, the text only of the hits it returns; rows written before keep their place
# until rewritten, as by a rebuild); and the rows in force by tag (the standing statements a search
# looks up at each question are a few rows of many: found by index, not by reading every row).
_SEARCH_READS = """
ALTER TABLE index_rows ALTER COLUMN tsv SET STORAGE MAIN;
CREATE INDEX index_rows_tags ON index_rows USING gin (tags) WHERE valid_to IS NULL;
"""

INDEX_TABLES = (Migration("0003_index", _CATALOG), Migration("0008_index_search_reads", _SEARCH_READS))
