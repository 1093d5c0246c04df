"""Which :class:`~soulpass.server.keys.KeyStore` a home uses: ``keys.json`` in a home folder, the
table ``api_keys`` in a ``postgresql://`` database (``soulpass.server.pg_keys``), so every API
process over one database shares its keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulpass.server.keys import FileKeyStore, KeyStore

if TYPE_CHECKING:
    from soulpass.engine import Soulpass

__all__ = ["key_store"]


def key_store(engine: Soulpass) -> KeyStore:
    """The keys of ``engine``'s home: in the database its accounts are kept in, if any (declared by
    the backend), else in the home folder."""
    db = engine.backend.database()
    if db is not None:
        from soulpass.server.pg_keys import PostgresKeyStore

        return PostgresKeyStore(db)
    return FileKeyStore(engine.home)
