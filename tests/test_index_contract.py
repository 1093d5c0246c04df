"""Search asks of its catalog only what the index contract names (``soulpass.index.contract``), so
another catalog (PostgreSQL) can stand in for the SQLite one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import soulpass
from soulpass.index.account import AccountIndex
from soulpass.index.catalog import Catalog, CatalogRow, CatalogStatus, CatchUpReport, Filters
from soulpass.index.catalog.sync import Progress
from soulpass.index.contract import IndexCatalog, SearchCatalog
from soulpass.index.follow import Follower
from soulpass.index.search import HybridSearch
from soulpass.store.contract import AccountBackend


class StandIn:
    """Implements exactly the contract's methods (by handing them to a SQLite catalog) and
    records which were called; any other attribute is missing."""

    def __init__(self, real: Catalog) -> None:
        self._real = real
        self.calls: list[str] = []

    def _call(self, name: str) -> Catalog:
        self.calls.append(name)
        return self._real

    def catch_up(self, store: AccountBackend) -> CatchUpReport:
        return self._call("catch_up").catch_up(store)

    def fts_search(self, query: str, k: int = 10, filters: Filters | None = None) -> list[tuple[str, float]]:
        return self._call("fts_search").fts_search(query, k, filters)

    def fts_scores(self, query: str, ids: Iterable[str], filters: Filters | None = None) -> dict[str, float]:
        return self._call("fts_scores").fts_scores(query, ids, filters)

    def passing(self, ids: Iterable[str], filters: Filters | None = None) -> set[str]:
        return self._call("passing").passing(ids, filters)

    def neighbours(self, ids: Iterable[str], kinds: Sequence[str], filters: Filters | None = None,
                   ) -> dict[str, tuple[str | None, str | None]]:
        return self._call("neighbours").neighbours(ids, kinds, filters)

    def get(self, ids: Iterable[str], as_of_version: int | None = None) -> list[CatalogRow]:
        return self._call("get").get(ids, as_of_version)

    def sessions(self, ids: Iterable[str], as_of_version: int | None = None) -> dict[str, str | None]:
        return self._call("sessions").sessions(ids, as_of_version)

    def ids_matching(self, filters: Filters | None = None) -> list[str]:
        return self._call("ids_matching").ids_matching(filters)

    def few_matching(self, filters: Filters, most: int) -> list[str] | None:
        return self._call("few_matching").few_matching(filters, most)

    def version(self) -> int:
        return self._call("version").version()

    def with_semantic_hash(self, hashes: Iterable[str], filters: Filters | None = None) -> list[CatalogRow]:
        return self._call("with_semantic_hash").with_semantic_hash(hashes, filters)

    def rebuild(self, store: AccountBackend, progress: Progress | None = None) -> CatchUpReport:
        return self._call("rebuild").rebuild(store, progress)

    def status(self) -> CatalogStatus:
        return self._call("status").status()

    def close(self) -> None:
        self._call("close").close()


SEARCH_METHODS = {"catch_up", "fts_search", "fts_scores", "passing", "neighbours", "get", "sessions", "ids_matching",
                  "few_matching"}


def test_the_contract_names_the_nine_search_methods_and_the_upkeep() -> None:
    def methods(proto: type) -> set[str]:
        return {n for n in vars(proto) if not n.startswith("_")}

    assert methods(SearchCatalog) == SEARCH_METHODS
    assert methods(IndexCatalog) == {"version", "with_semantic_hash", "rebuild", "status", "rows", "delete_rows",
                                     "close"}


def test_search_runs_on_a_stand_in_catalog_and_asks_only_the_contract(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").create_account("ann")
    sb = acct.create_sandbox("chat")
    for speaker, text in [("user", "I adopted a puppy named Biscuit"), ("eva", "Biscuit is a lovely name"),
                          ("user", "My sister is getting married in Lisbon")]:
        sb.add_turn(speaker, text)
    sb.archive()
    plain = AccountIndex(acct.store)
    plain.catch_up()
    expected = [(h.id, h.score) for h in plain.search("Biscuit puppy", k=5)]
    plain.close()

    with Catalog.open(acct.store) as catalog:  # the parts an AccountIndex holds, over a stand-in catalog
        stand_in = StandIn(catalog)
        follower, search = Follower(acct.store, stand_in), HybridSearch(stand_in, acct.name)
        follower.catch_up()
        hits = [(h.id, h.score) for h in search.search("Biscuit puppy", k=5)]
        assert hits == expected and len(hits) >= 2
        assert {"catch_up", "fts_search", "get", "sessions"} <= set(stand_in.calls) <= SEARCH_METHODS
        follower.status()
    assert set(stand_in.calls) - SEARCH_METHODS == {"status"}
