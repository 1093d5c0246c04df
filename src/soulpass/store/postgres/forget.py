"""Erasure in the PostgreSQL backend: every row of some record keys rewritten to its placeholder,
the prose entries renamed and the version log's details redacted, in one transaction that holds
the account's head row (no commit lands meanwhile)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql
from psycopg.types.json import Jsonb

from soulpass.errors import InvalidInput
from soulpass.store.files.copies import encode_copy
from soulpass.store.postgres.connections import Database
from soulpass.store.redact import Erasure, redacted_copy, redacted_entry

__all__ = ["ERASED_TABLES", "forget_keys", "vacuum_erased"]

# Every table that holds an account's content: the store's, and the index's kept in the database.
ERASED_TABLES = ("versions", "records", "documents", "session_events", "index_rows", "index_embedded",
                 "index_state")


def forget_keys(db: Database, account_id: int, keys: Sequence[str], erasure: Erasure) -> dict[str, list[int]]:
    """Every copy of each of ``keys`` (a row of ``records`` or ``documents`` per version) rewritten
    as ``redacted_copy`` makes it for the records ``erasure.ids``, the renamed keys moved, every
    log entry redacted; for each key (by its new name), the versions whose copies were rewritten.
    All or nothing."""
    rewritten: dict[str, list[int]] = {}
    with db.connection() as conn, conn.transaction():
        conn.execute("SELECT head FROM accounts WHERE id = %s FOR UPDATE", (account_id,))
        for key in keys:
            if not key.endswith((".json", ".md")):
                raise InvalidInput(f"only JSON and Markdown copies can be forgotten, not {key}", key=key)
            new_key = erasure.renames.get(key, key)
            versions: list[int] = []
            for table in ("records", "documents"):  # fixed names, never input
                rows = conn.execute(f"SELECT from_version, body FROM {table} WHERE account_id = %s AND key = %s "
                                    "ORDER BY from_version", (account_id, key)).fetchall()
                for from_version, body in rows:
                    new = redacted_copy(body, erasure.ids)
                    conn.execute(f"UPDATE {table} SET key = %s, data = %s, body = %s WHERE account_id = %s "
                                 "AND key = %s AND from_version = %s",
                                 (new_key, encode_copy(key, new), Jsonb(new), account_id, key, from_version))
                versions += [int(r[0]) for r in rows]
            rewritten[new_key] = sorted(versions)
        for version, entry in conn.execute("SELECT version, entry FROM versions WHERE account_id = %s",
                                           (account_id,)).fetchall():
            new_entry = redacted_entry(entry, erasure)
            if new_entry != entry:
                conn.execute("UPDATE versions SET entry = %s WHERE account_id = %s AND version = %s",
                             (Jsonb(new_entry), account_id, version))
    return rewritten


def vacuum_erased(db: Database) -> list[str]:
    """``VACUUM FULL`` of every table that held the erased content (and each vector table): an
    UPDATE or DELETE leaves the old row versions in the relation files until a rewrite, and a plain
    VACUUM only marks their space free. Takes each table's exclusive lock while it is rewritten."""
    done = []
    with db.dedicated() as conn:  # autocommit: VACUUM cannot run inside a transaction
        vectors = [str(t) for (t,) in conn.execute("SELECT name FROM index_vector_tables").fetchall()]
        for table in (*ERASED_TABLES, *vectors):
            conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
            done.append(f"VACUUM FULL {table}")
    return done
