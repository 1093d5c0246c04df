"""API keys in PostgreSQL (issue 14): the :class:`~soulpass.server.keys.KeyStore` of a home that is
a ``postgresql://`` database, so several ``soulpass serve`` processes on several hosts share one
set of keys. The table ``api_keys`` (migration ``0002_api_keys``) holds what ``keys.json`` holds for
a home folder: the key id, the account (NULL: an admin key), when, a label, and the key's SHA-256;
never the key. A revoked key is deleted, so every process refuses it at its next request.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

import psycopg

from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import check_name, utc_now
from soulpass.server.keys import KEY_PATTERN, ApiKey, NewKey, key_hash
from soulpass.store.contract import Database, Migration

__all__ = ["PostgresKeyStore"]

_COLUMNS = "key_id, account, created_at, label, sha256"

# The server's own table, migrated by the server (the store's runner, ``Database.migrate``).
_API_KEYS = """
CREATE TABLE api_keys (
    key_id text PRIMARY KEY,
    account text,
    created_at text NOT NULL,
    label text NOT NULL DEFAULT '',
    sha256 text NOT NULL
);
"""

KEY_TABLES = (Migration("0002_api_keys", _API_KEYS),)


def _key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(key_id=row[0], account=row[1], created_at=row[2], label=row[3], sha256=row[4])


class PostgresKeyStore:
    """The keys of one database: a :class:`~soulpass.server.keys.KeyStore`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate(KEY_TABLES)

    def list(self) -> list[ApiKey]:
        with self.db.connection() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM api_keys").fetchall()
        return sorted((_key(r) for r in rows), key=lambda k: (k.account or "", k.created_at, k.key_id))

    def verify(self, secret: str) -> ApiKey | None:
        """The key ``secret`` is, or None when it is malformed, unknown or revoked."""
        m = KEY_PATTERN.match(secret) if isinstance(secret, str) else None
        if m is None:
            return None
        with self.db.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = %s", (m.group(1),)).fetchone()
        if row is None or not hmac.compare_digest(row[4], key_hash(secret)):
            return None
        return _key(row)

    def create(self, account: str | None, label: str = "") -> NewKey:
        """A new key for ``account`` (None: an admin key). The caller shows ``secret`` once."""
        if account is not None:
            check_name(account, "account name")
        if not isinstance(label, str) or len(label) > 200 or any(ord(c) < 32 for c in label):
            raise InvalidInput("key label must be at most 200 printable characters", field="label")
        while True:
            key_id = secrets.token_hex(4)
            secret = f"sp_{key_id}_{secrets.token_urlsafe(32)}"
            key = ApiKey(key_id=key_id, account=account, created_at=utc_now().isoformat(timespec="seconds"),
                         label=label, sha256=key_hash(secret))
            try:
                with self.db.connection() as conn:
                    conn.execute(f"INSERT INTO api_keys ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s)",
                                 (key.key_id, key.account, key.created_at, key.label, key.sha256))
            except psycopg.errors.UniqueViolation:
                continue  # that key id is taken: draw another
            return NewKey(key, secret)

    def revoke(self, key_id: str) -> ApiKey:
        with self.db.connection() as conn:
            row = conn.execute(f"DELETE FROM api_keys WHERE key_id = %s RETURNING {_COLUMNS}", (key_id,)).fetchone()
        if row is None:
            raise NotFound(f"no key with id {key_id!r}", key_id=key_id)
        return _key(row)

    def revoke_account(self, account: str) -> tuple[ApiKey, ...]:
        with self.db.connection() as conn:
            rows = conn.execute(f"DELETE FROM api_keys WHERE account = %s RETURNING {_COLUMNS}", (account,)).fetchall()
        return tuple(_key(r) for r in rows)

    def put(self, key: ApiKey) -> bool:
        with self.db.connection() as conn:
            row = conn.execute(f"INSERT INTO api_keys ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s) "
                               "ON CONFLICT (key_id) DO NOTHING RETURNING key_id",
                               (key.key_id, key.account, key.created_at, key.label, key.sha256)).fetchone()
        return row is not None
