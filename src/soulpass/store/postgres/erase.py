"""Deleting a whole account of the PostgreSQL backend: its row goes in one transaction, and with it
(``ON DELETE CASCADE``) its versions, records, documents, sandboxes, session events and the index
kept in the database; the tombstone is written in that transaction. Then the local folder of what
this process derived from it (``~/.cache/soulpass/postgres/…``) is removed."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from soulpass.errors import NotFound
from soulpass.ids import check_name
from soulpass.store.postgres.connections import Database

__all__ = ["delete_account", "read_deletions"]


def delete_account(db: Database, local: Path, name: str, tombstone: Mapping[str, Any]) -> None:
    """Remove account ``name`` (``NotFound`` if there is none) and record ``tombstone``."""
    name = check_name(name, "account name")
    with db.connection() as conn, conn.transaction():
        row = conn.execute("SELECT id, uid FROM accounts WHERE name = %s FOR UPDATE", (name,)).fetchone()
        if row is None:
            raise NotFound(f"account {name!r} does not exist", account=name)
        conn.execute("DELETE FROM accounts WHERE id = %s", (row[0],))
        conn.execute("INSERT INTO account_deletions (entry) VALUES (%s)", (Jsonb(dict(tombstone)),))
    shutil.rmtree(local / "accounts" / f"{name}.{row[1]}", ignore_errors=True)


def read_deletions(db: Database) -> list[dict[str, Any]]:
    with db.connection() as conn:
        return [dict(r[0]) for r in conn.execute("SELECT entry FROM account_deletions ORDER BY seq")]
