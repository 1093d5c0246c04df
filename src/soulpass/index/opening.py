"""The catalog an account's store keeps: in its PostgreSQL database when the store says so
(``index_database()``, ``soulpass.index.pg``), else the SQLite one in its index folder."""

from __future__ import annotations

from typing import Any

from soulpass.index.catalog import Catalog
from soulpass.store.contract import AccountBackend

__all__ = ["open_catalog"]


def open_catalog(store: AccountBackend, **options: Any) -> Any:
    """``Catalog.open(store, **options)``, or the account's ``PgCatalog`` (options do not apply).
    Both give ``catch_up``, ``rows``, ``version``, ``ids_matching``, ``get`` and ``delete_rows``, and
    close on leaving a ``with`` block."""
    in_database = getattr(store, "index_database", None)
    found = in_database() if callable(in_database) else None
    if found is not None:
        from soulpass.index.pg import PgCatalog

        return PgCatalog(found[0], found[1], store.name)
    return Catalog.open(store, **options)
