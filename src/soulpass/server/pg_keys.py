"""API keys in PostgreSQL (issue 14): the :class:`~soulpass.server.keys.KeyStore` of a home that is
a ``postgresql://`` database, so several ``soulpass serve`` processes on several hosts share one
set of keys. The table ``api_keys`` (migration ``0002_api_keys``) holds what ``keys.json`` holds for
a home folder: the key id, the account (NULL: an admin key), when, a label, the key's SHA-256 (never
the key) and its role (``0006_api_key_roles``: the keys made before it are owner keys). A revoked
key is deleted, so every process refuses it at its next request.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

import psycopg

from soulpass.errors import NotFound
from soulpass.ids import utc_now
from soulpass.server.keys import DEFAULT_ROLE, KEY_PATTERN, ApiKey, NewKey, Role, check_key_request, key_hash
from soulpass.store.contract import Database, Migration

__all__ = ["PostgresKeyStore"]

_COLUMNS = "key_id, account, created_at, label, sha256, role"
_VALUES = "%s, %s, %s, %s, %s, %s"

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

# Keys with roles (issue 41): every key made before is an owner key, what it could do then. An admin
# key's role is owner (it can do everything anyway).
_ROLES = """
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'owner';
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role
    CHECK (role IN ('agent', 'owner') AND (account IS NOT NULL OR role = 'owner'));
"""

KEY_TABLES = (Migration("0002_api_keys", _API_KEYS), Migration("0006_api_key_roles", _ROLES))


def _key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(key_id=row[0], account=row[1], created_at=row[2], label=row[3], sha256=row[4], role=row[5])


def _row(key: ApiKey) -> tuple[Any, ...]:
    return (key.key_id, key.account, key.created_at, key.label, key.sha256, key.role)


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

    def create(self, account: str | None, label: str = "", role: Role = DEFAULT_ROLE) -> NewKey:
        """A new key for ``account`` (None: an admin key) with ``role``. The caller shows ``secret`` once."""
        role = check_key_request(account, label, role)
        while True:
            key_id = secrets.token_hex(4)
            secret = f"sp_{key_id}_{secrets.token_urlsafe(32)}"
            key = ApiKey(key_id=key_id, account=account, created_at=utc_now().isoformat(timespec="seconds"),
                         label=label, sha256=key_hash(secret), role=role)
            try:
                with self.db.connection() as conn:
                    conn.execute(f"INSERT INTO api_keys ({_COLUMNS}) VALUES ({_VALUES})", _row(key))
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
            row = conn.execute(f"INSERT INTO api_keys ({_COLUMNS}) VALUES ({_VALUES}) "
                               "ON CONFLICT (key_id) DO NOTHING RETURNING key_id", _row(key)).fetchone()
        return row is not None
