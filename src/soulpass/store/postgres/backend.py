"""Accounts kept in one PostgreSQL database (:class:`soulpass.store.contract.Backend`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from soulpass.errors import NotFound
from soulpass.ids import check_name
from soulpass.store.postgres import erase, transfer
from soulpass.store.postgres.account import PostgresAccount
from soulpass.store.postgres.connections import Database, database
from soulpass.store.postgres.url import index_in_database, local_root, masked

__all__ = ["PostgresBackend"]


class PostgresBackend:
    """The accounts of the database ``url``; what this process derives from them (each account's
    index) lives under ``local`` (default: :func:`soulpass.store.postgres.url.local_root`)."""

    def __init__(self, url: str, *, local: Path | None = None) -> None:
        self.url = url
        self.local = local or local_root(url)
        self.index_in_database = index_in_database(url)
        self.db = database(url)

    def __repr__(self) -> str:
        return f"PostgresBackend({masked(self.url)!r})"

    def database(self) -> Database:
        return self.db

    def accounts(self) -> list[str]:
        with self.db.connection() as conn:
            return [str(r[0]) for r in conn.execute("SELECT name FROM accounts ORDER BY name COLLATE \"C\"")]

    def open(self, name: str, *, create: bool = False) -> PostgresAccount:
        name = check_name(name, "account name")
        with self.db.connection() as conn:
            if create:
                conn.execute("INSERT INTO accounts (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (name,))
            row = conn.execute("SELECT id, uid FROM accounts WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise NotFound(f"account {name!r} does not exist in {masked(self.url)}", account=name)
        return PostgresAccount(self.db, int(row[0]), name, str(row[1]), self.local,
                               index_in_database=self.index_in_database)

    def restore(self, name: str, files: Iterable[tuple[str, bytes]], *, replace: bool = False) -> bool:
        return transfer.restore(self.db, name, files, replace=replace)

    def delete(self, name: str, tombstone: Mapping[str, Any]) -> None:
        erase.delete_account(self.db, self.local, name, tombstone)

    def deletions(self) -> list[dict[str, Any]]:
        return erase.read_deletions(self.db)
