"""What search needs from an account's catalog, as Protocols: the SQLite
:class:`soulpass.index.catalog.Catalog` implements them, and a catalog kept elsewhere (PostgreSQL)
can stand in. ``StoreT`` is the store the catalog follows: an ``AccountBackend`` (the store
contract), whatever backend keeps the account, for the SQLite catalog and ``AccountIndex``.

``SearchCatalog`` holds the nine methods a search calls; ``IndexCatalog`` adds what the rest of
the library asks of the catalog an ``AccountIndex`` holds: its version (the background indexer),
the journal's lookup by semantic hash, and upkeep (rebuild, status, rows, delete_rows, close).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

from soulpass.index.catalog.catalog import CatalogStatus, CatchUpReport
from soulpass.index.catalog.query import Filters
from soulpass.index.catalog.rows import CatalogRow
from soulpass.index.catalog.sync import Progress

__all__ = ["IndexCatalog", "SearchCatalog"]

StoreT = TypeVar("StoreT", contravariant=True)


class SearchCatalog(Protocol[StoreT]):
    """Decides what exists and what passes the filters (kind, agent, tags, time, session, persona,
    event, "as of version"), ranks full text, and follows its store."""

    def catch_up(self, store: StoreT) -> CatchUpReport:
        """Apply the versions of ``store`` newer than the catalog's (idempotent)."""
        ...

    def fts_search(self, query: str, k: int = 10, filters: Filters | None = None) -> list[tuple[str, float]]:
        """The ``k`` best rows for free text, best first, as ``(id, score)``."""
        ...

    def fts_scores(self, query: str, ids: Iterable[str], filters: Filters | None = None) -> dict[str, float]:
        """Full-text scores of the given rows, on the scale of ``fts_search``."""
        ...

    def passing(self, ids: Iterable[str], filters: Filters | None = None) -> set[str]:
        """The given ids whose rows pass the filters."""
        ...

    def neighbours(self, ids: Iterable[str], kinds: Sequence[str], filters: Filters | None = None,
                   ) -> dict[str, tuple[str | None, str | None]]:
        """For each given row of ``kinds`` with a session: the rows just before and after it."""
        ...

    def get(self, ids: Iterable[str], as_of_version: int | None = None) -> list[CatalogRow]:
        """Rows for ``ids`` in the order given, unknown ids left out."""
        ...

    def sessions(self, ids: Iterable[str], as_of_version: int | None = None) -> dict[str, str | None]:
        """The session (None: none) of each known id: what ranking reads besides the scores."""
        ...

    def ids_matching(self, filters: Filters | None = None) -> list[str]:
        """Ids of the rows that pass ``filters``, sorted."""
        ...

    def few_matching(self, filters: Filters, most: int) -> list[str] | None:
        """``ids_matching(filters)`` where at most ``most`` rows pass, else None (read no further
        than that: a filter that passes many rows is not listed)."""
        ...


class IndexCatalog(SearchCatalog[StoreT], Protocol[StoreT]):
    """A search catalog with the journal's lookup and its upkeep."""

    def version(self) -> int:
        """The store version the catalog reflects."""
        ...

    def with_semantic_hash(self, hashes: Iterable[str], filters: Filters | None = None) -> list[CatalogRow]:
        """Rows passing ``filters`` whose semantic hash is one of ``hashes``, oldest event first."""
        ...

    def rows(self) -> Iterator[CatalogRow]:
        """Every row, by id and version (audits, comparisons)."""
        ...

    def delete_rows(self, keys: Iterable[tuple[str, int]]) -> int:
        """Forget the rows ``(id, version)`` (orphans whose file is gone); returns how many went."""
        ...

    def rebuild(self, store: StoreT, progress: Progress | None = None) -> CatchUpReport:
        """Recreate every row from ``store`` (``progress(done, total)``)."""
        ...

    def status(self) -> CatalogStatus:
        ...

    def close(self) -> None:
        ...
