"""Where an account's index lives, as its store says (``AccountBackend.index_location()``): the one
place a catalog backend is chosen, by ``match`` on the closed union. ``LocalIndex``: the SQLite
catalog in that folder; ``DatabaseIndex``: the catalog kept in the store's database
(``soulpass.index.pg``), shared by every process."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from soulpass.index.catalog import Catalog
from soulpass.index.contract import IndexCatalog
from soulpass.store.contract import AccountBackend, Database, DatabaseIndex, LocalIndex
from soulpass.vectors import VectorBackend, model_tag

__all__ = ["VECTORS_DIR", "account_vectors_folder", "drop_index", "index_database", "open_catalog"]

VECTORS_DIR = "vectors"


def open_catalog(store: AccountBackend, **options: Any) -> IndexCatalog[AccountBackend]:
    """``Catalog.open(store, **options)``, or the account's ``PgCatalog`` (options do not apply)."""
    match store.index_location():
        case DatabaseIndex(account=account) as where:
            from soulpass.index.pg import PgCatalog

            return PgCatalog(index_database(where), account, store.name)
        case LocalIndex():
            return Catalog.open(store, **options)


def account_vectors_folder(index_dir: Path, backend: VectorBackend, model_id: str) -> Path:
    """The folder of an account's vectors of ``backend`` for embedder ``model_id``, under the index
    folder its store hands out (``index_location().folder``): one folder per backend and
    embedder, so another model means other vectors, never mixed."""
    return index_dir / VECTORS_DIR / f"{backend}-{model_tag(model_id)}"


def drop_index(store: AccountBackend) -> None:
    """Delete the account's derived index (nobody may hold it open); the store is untouched and the
    next search rebuilds it. In a database: the account's rows of every index table, its vector
    tables included (other accounts keep theirs)."""
    match store.index_location():
        case LocalIndex(folder=folder):
            shutil.rmtree(folder, ignore_errors=True)
        case DatabaseIndex(account=account, folder=folder) as where:
            shutil.rmtree(folder, ignore_errors=True)
            _drop_rows(index_database(where), account)


def index_database(where: DatabaseIndex) -> Database:
    """The database an index kept there lives in, its tables migrated (the index owns them:
    ``soulpass.index.pg.schema``; once per process, then free)."""
    from soulpass.index.pg.schema import INDEX_TABLES

    where.database.migrate(INDEX_TABLES)
    return where.database


def _drop_rows(db: Database, account: int) -> None:
    with db.connection() as conn:
        for (table,) in conn.execute("SELECT name FROM index_vector_tables").fetchall():
            conn.execute(f"DELETE FROM {table} WHERE account_id = %s", (account,))
        for table in ("index_rows", "index_embedded", "index_state"):
            conn.execute(f"DELETE FROM {table} WHERE account_id = %s", (account,))
