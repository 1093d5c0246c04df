"""Step 1 of a hybrid search: its full-text hits and the nearest records by vector, both exact
scores of every candidate, its session and its neighbours in that session (``Gather.around``); and
the same for the neighbours the ranking then adds (``Gather.scores``).

``Stepwise`` asks the catalog and the vectors one question at a time (nearest, full-text scores,
cosines, neighbours, sessions): in process (SQLite and a local vector index) each is a call.
:class:`soulpass.index.pg.gather.PgGather` asks PostgreSQL all of ``around`` in one statement,
where the vectors are in the database (pgvector), and each question of the steps would be a round
trip of its own. Both give the same candidates and scores (tested on one account).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from soulpass.index.catalog import Filters
from soulpass.index.contract import SearchCatalog
from soulpass.index.dense import DenseScores

__all__ = ["Gather", "Gathered", "Stepwise"]


@dataclass
class Gathered:
    """Candidates (all passing the search's filters) with what the ranking reads of them."""

    ids: list[str]  # the candidates: the full-text hits, then the nearest records not among them
    fts: dict[str, float]  # exact full-text score of each candidate that matches a term
    dense: dict[str, float]  # exact cosine of each candidate that has a vector
    sessions: dict[str, str | None]  # each candidate's session (None: none)
    links: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # a turn's neighbours


class Gather(Protocol):
    """How a search's candidates and their scores are fetched."""

    def around(self, query: str, vector: Callable[[], Any], depth: int, filters: Filters,
               turn_kinds: Sequence[str]) -> Gathered:
        """The ``depth`` best full-text hits for ``query`` and the ``depth`` records nearest the
        query's vector (``vector()`` waits for it, embedded meanwhile; None: full text only, nothing
        nearest), all passing ``filters``, each with both exact scores, its session, and, for a row
        of ``turn_kinds``, its neighbours among those rows."""
        ...

    def scores(self, query: str, vector: Any, ids: Sequence[str], filters: Filters) -> Gathered:
        """``ids`` (rows passing ``filters``) with both exact scores and their sessions, no links."""
        ...


class Stepwise:
    """``Gather`` as one call to the catalog or the vectors per question."""

    def __init__(self, catalog: SearchCatalog[Any], dense: DenseScores | None) -> None:
        self.catalog, self.dense = catalog, dense

    def around(self, query: str, vector: Callable[[], Any], depth: int, filters: Filters,
               turn_kinds: Sequence[str]) -> Gathered:
        hits = dict(self.catalog.fts_search(query, depth, filters))  # while the query is embedded
        return self.around_hits(query, vector(), hits, depth, filters, turn_kinds)

    def around_hits(self, query: str, vector: Any, hits: dict[str, float], depth: int, filters: Filters,
                    turn_kinds: Sequence[str]) -> Gathered:
        """``around`` with the full-text ``hits`` (id -> score, from ``fts_search``) found already."""
        nearest = self.dense.nearest(vector, depth, filters) if vector is not None and self.dense is not None else []
        ids = list(dict.fromkeys([*hits, *nearest]))
        found = self._scored(query, vector, ids, hits, filters)
        found.links = self.catalog.neighbours(ids, turn_kinds, filters) if turn_kinds and ids else {}
        return found

    def scores(self, query: str, vector: Any, ids: Sequence[str], filters: Filters) -> Gathered:
        return self._scored(query, vector, list(dict.fromkeys(ids)), {}, filters)

    def _scored(self, query: str, vector: Any, ids: list[str], hits: dict[str, float], filters: Filters) -> Gathered:
        fts = dict(hits)
        if unscored := [i for i in ids if i not in hits]:
            fts.update(self.catalog.fts_scores(query, unscored, filters))
        dense = self.dense.cosines(vector, ids) if vector is not None and self.dense is not None and ids else {}
        sessions = self.catalog.sessions(ids, as_of_version=filters.as_of_version) if ids else {}
        return Gathered(ids, fts, dense, sessions)
