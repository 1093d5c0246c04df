"""Dense scoring for a hybrid search: the records nearest a query vector (passing the filters), and
the exact cosines of given records. A record's dense score is the best of its own vector's and its
passages' cosines (``soulpass.index.passages``).

One class per kind of vector index, chosen where the index is opened (``soulpass.index.account``):
``LocalDense`` over a vector index in a local folder, ``DatabaseDense`` over the vectors kept in the
store's PostgreSQL database. Each has one way to give exact cosines.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from soulpass.index import passages
from soulpass.index.catalog import Filters
from soulpass.index.contract import SearchCatalog
from soulpass.index.filtered import MaskedDense
from soulpass.vectors import SharedIndex, VectorIndex
from soulpass.vectors.groups import GroupBest

if TYPE_CHECKING:
    from soulpass.index.pg import PgVectors

__all__ = ["DatabaseDense", "DenseScores", "LocalDense", "best_of", "broad", "few_tagged"]

# Filtered dense search: ask the vector index for up to this many times the candidates needed
# (measuring the share that passes), with this margin over the measured share, before listing
# every passing id instead.
OVERFETCH_MOST = 32
OVERFETCH_MARGIN = 1.25

# A tag filter (tags, a source) passing at most this many rows: those rows are scored outright
# instead of searched for (a rare tag is a long walk through the nearest vectors).
FEW_TAGGED = 2_000

# A walk over the database's vectors asks for this many vectors per record wanted (a record's
# passages are vectors of their own: the walk is asked again, for twice as many, where they fill it).
WALK_ROWS = 2

TopRecords = Callable[[int], tuple[list[str], bool]]  # n -> the n nearest records, and whether that was all


class DenseScores(Protocol):
    """What a hybrid search asks of the vectors."""

    def nearest(self, vector: Any, depth: int, filters: Filters) -> list[str]:
        """Ids of the ``depth`` records nearest ``vector`` by their own or a passage's vector,
        passing ``filters``, best first."""
        ...

    def cosines(self, vector: Any, ids: Sequence[str]) -> dict[str, float]:
        """The exact dense score of each of ``ids`` that has a vector."""
        ...


class LocalDense:
    """Dense scoring over a local vector index (exact, HNSW or Chroma) and the passage ids its
    embedding state (``state``) keeps; broad filters through the catalog's masks where both answer them."""

    def __init__(self, vectors: SharedIndex, catalog: SearchCatalog[Any], state: sqlite3.Connection,
                 masked: MaskedDense | None) -> None:
        self._vectors, self._catalog, self._state, self.masked = vectors, catalog, state, masked
        self._groups = vectors.abilities.groups  # exact search: one product gives every record's best

    def nearest(self, vector: Any, depth: int, filters: Filters) -> list[str]:
        masked = self.masked.nearest(vector, depth, filters) if self.masked is not None else None
        if masked is not None:  # a broad filter over a local index: masks in numpy (filtered.py)
            return masked
        if (few := few_tagged(self._catalog, filters)) is not None:
            return best_of(self.cosines(vector, few), depth)
        groups = self._groups
        grouped: list[GroupBest | None] = []  # made at the first try

        def top(n: int) -> tuple[list[str], bool]:
            if not grouped:
                grouped.append(groups.group_best(vector, passages.record_of) if groups is not None else None)
            if grouped[0] is not None:  # every row scored: the records' best read off
                nearest = grouped[0].top(n)
                return nearest, len(nearest) < n
            return _top_records(self._vectors, vector, n)
        return _nearest_passing(self._vectors, self._catalog, vector, depth, filters, top)

    def cosines(self, vector: Any, ids: Sequence[str]) -> dict[str, float]:
        if self._groups is not None:
            grouped = self._groups.group_best(vector, passages.record_of, scan=False)
            if grouped is not None:  # this query's ``nearest`` scored every row
                return grouped.of(ids)
        of = passages.passage_ids(self._state, ids)
        wanted = [*ids, *itertools.chain.from_iterable(of.values())]
        return passages.best_in_array(ids, of, self._vectors.cosine_array(vector, wanted))


class DatabaseDense:
    """Dense scoring over the vectors in the store's PostgreSQL database (``soulpass.index.pg``)."""

    def __init__(self, vectors: PgVectors, catalog: SearchCatalog[Any]) -> None:
        self._vectors, self._catalog = vectors, catalog

    def nearest(self, vector: Any, depth: int, filters: Filters) -> list[str]:
        if self._vectors.pgvector and broad(filters):  # the filter checked in the walk: one query
            fetch = WALK_ROWS * depth
            while True:
                hits, ended = self._vectors.nearest_passing(vector, fetch, filters)
                nearest = list(passages.best_per_record(hits))
                if len(nearest) >= depth or ended:
                    return nearest[:depth]
                fetch *= 2  # a record's passages filled the walk: ask again, for more
        return _nearest_passing(self._vectors, self._catalog, vector, depth, filters,
                                lambda n: _top_records(self._vectors, vector, n))

    def cosines(self, vector: Any, ids: Sequence[str]) -> dict[str, float]:
        return self._vectors.best_per_record(vector, ids)


def broad(filters: Filters) -> bool:
    """Whether many rows may pass ``filters`` (a kind, a speaker, a time range), so that the nearest
    vectors are searched first and checked (not searched among every passing id: a version, a
    session, an event or a persona)."""
    return filters.as_of_version is None and not (filters.session_id or filters.event_id or filters.persona_id)


def few_tagged(catalog: SearchCatalog[Any], filters: Filters) -> list[str] | None:
    """The rows passing ``filters`` where it asks for a tag (``tags``, a ``source``) and they are at
    most ``FEW_TAGGED``, else None. A tag may be on few rows (standing instructions) or on most (an
    importer's source): listed up to the limit, the few are known at the cost of one lookup."""
    return catalog.few_matching(filters, FEW_TAGGED) if filters.tag_groups() and broad(filters) else None


def best_of(scores: dict[str, float], depth: int) -> list[str]:
    """The ``depth`` best ids of ``scores``, best first, ties by id."""
    return sorted(scores, key=lambda i: (-scores[i], i))[:depth]


def _top_records(vectors: VectorIndex, vector: Any, n: int) -> tuple[list[str], bool]:
    hits = vectors.search(vector, n)
    return list(passages.best_per_record(hits)), len(hits) < n


def _nearest_passing(vectors: VectorIndex, catalog: SearchCatalog[Any], vector: Any, depth: int, filters: Filters,
                     top: TopRecords) -> list[str]:
    """The ``depth`` nearest records passing ``filters``: over-fetched and checked where many rows
    may pass, else searched among the passing ids."""
    if broad(filters):
        # Many rows may pass (a speaker, a time range): ask the vector index for more than needed
        # and check them here, instead of listing every passing id. Each try measures the share
        # that passes; the next asks for enough at that share (at least twice as many), unless
        # that is more than OVERFETCH_MOST times depth.
        fetch = depth + depth // 2
        while fetch <= OVERFETCH_MOST * depth:
            nearest, ended = top(fetch)
            ok = catalog.passing(nearest, filters)
            kept = [i for i in nearest if i in ok]
            if len(kept) >= depth or ended:
                return kept[:depth]
            share = max(len(kept), 1) / max(len(nearest), 1)
            fetch = max(2 * fetch, math.ceil(OVERFETCH_MARGIN * depth / share * fetch / max(len(nearest), 1)))
    allowed = catalog.ids_matching(filters)  # only what exists (as of V) and passes
    if not allowed:
        return []
    # By the records' own vectors: the passages of a few candidates are scored in ``cosines``.
    return [i for i, _ in vectors.search(vector, depth, allowed=allowed)]
