"""Which journal entries in force already carry a semantic hash: what consolidation asks the catalog."""

from __future__ import annotations

from soulpass.store.contract import AccountBackend

from .catalog import Catalog
from .query import Filters

__all__ = ["CatalogHashLookup"]

JOURNAL = ("journal",)


class CatalogHashLookup:
    """Entries in force with a given semantic hash, from the account's catalog (caught up once)."""

    def __init__(self, store: AccountBackend) -> None:
        self.store = store
        self._catalog: Catalog | None = None

    def __call__(self, shash: str) -> list[tuple[str, str]]:
        if self._catalog is None:
            self._catalog = Catalog.open(self.store)
            self._catalog.catch_up(self.store)
        return [(r.id, r.path) for r in self._catalog.with_semantic_hash([shash], Filters(kinds=JOURNAL))]

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
