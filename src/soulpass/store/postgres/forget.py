"""Erasure in the PostgreSQL backend: every row of some record keys rewritten to its placeholder,
in one transaction that holds the account's head row (no commit lands meanwhile)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.types.json import Jsonb

from soulpass.errors import InvalidInput
from soulpass.store.fsio import dump_json
from soulpass.store.postgres.connections import Database
from soulpass.store.redact import redacted_copy

__all__ = ["forget_keys"]


def forget_keys(db: Database, account_id: int, keys: Sequence[str], ids: Sequence[str]) -> dict[str, list[int]]:
    """Every copy of each of ``keys`` (a row of ``records`` or ``documents`` per version) rewritten
    as ``redacted_copy`` makes it for the records ``ids``; for each key, the versions whose copies
    were rewritten. All or nothing."""
    rewritten: dict[str, list[int]] = {}
    forgotten = frozenset(ids)
    with db.connection() as conn, conn.transaction():
        conn.execute("SELECT head FROM accounts WHERE id = %s FOR UPDATE", (account_id,))
        for key in keys:
            if not key.endswith(".json"):
                raise InvalidInput(f"only JSON copies can be forgotten, not {key}", key=key)
            versions: list[int] = []
            for table in ("records", "documents"):  # fixed names, never input
                rows = conn.execute(f"SELECT from_version, body FROM {table} WHERE account_id = %s AND key = %s "
                                    "ORDER BY from_version", (account_id, key)).fetchall()
                for from_version, body in rows:
                    new = redacted_copy(body, forgotten)
                    conn.execute(f"UPDATE {table} SET data = %s, body = %s WHERE account_id = %s AND key = %s "
                                 "AND from_version = %s", (dump_json(new), Jsonb(new), account_id, key, from_version))
                versions += [int(r[0]) for r in rows]
            rewritten[key] = sorted(versions)
    return rewritten
