"""Hybrid search over one account: full text and dense vectors fused by score, read in context.

The algorithm, step by step (``HybridSearch.search``):

1. candidates: the best ``CANDIDATES`` by BM25 and by cosine, and the turns next to the best
   ``NEIGHBOURS_OF_BEST`` of them in their conversations; every candidate gets both its exact BM25
   score (0 when no term matches) and its exact cosine;
2. scores: each standardised over the candidates and fused (``soulpass.index.ranking``), with an
   optional late-interaction score of every candidate (``soulpass.embed.colbert``);
3. rank: read in context (the better neighbour, the best in the session); ties broken by id, so
   results are reproducible and survive a rebuild; an optional cross-encoder re-orders the best;
4. hits: the returned candidates' rows, with their score parts.

The catalog decides what exists and what passes the filters; the vectors only score
(``soulpass.index.dense``). Which catalog and vectors, and how they follow the store, is
``soulpass.index.account``'s business.
"""

from __future__ import annotations

import functools
import logging
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from soulpass.embed.colbert import LateScorer
from soulpass.embed.rerank import Reranker
from soulpass.errors import InvalidInput
from soulpass.index.buffer_rows import BufferVectors, buffer_fts, buffer_links
from soulpass.index.catalog import CatalogRow, Filters, passes
from soulpass.index.contract import SearchCatalog
from soulpass.index.dense import DenseScores
from soulpass.index.gather import Gather, Stepwise
from soulpass.index.query_vectors import QueryVectors
from soulpass.index.ranking import CandidateScores, standardised
from soulpass.index.recipe import SEARCHABLE_KINDS, TURN_KINDS, embed_text

__all__ = ["Candidates", "Hit", "HybridSearch", "check_search"]

log = logging.getLogger(__name__)

CANDIDATES = 50  # per retriever, before fusion
RERANK_DEPTH = 30  # the optional cross-encoder re-orders this many of the best (docs/performance.md)
RERANK_WEIGHT = 1.0
NEIGHBOURS_OF_BEST = 20  # the neighbours of this many best candidates become candidates too


def check_search(query: object, k: object) -> None:
    """``InvalidInput`` naming ``query`` or ``k`` unless they are a string and a positive int."""
    if not isinstance(query, str):
        raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
    if type(k) is not int or not 1 <= k <= sys.maxsize:  # larger: no list could be sliced to it
        raise InvalidInput(f"k must be a positive integer up to {sys.maxsize}, not {k!r}", field="k")


@dataclass(frozen=True)
class Hit:
    """One search result: the catalog row, where it lives, and how it scored."""

    id: str
    kind: str
    version: int
    path: str
    text: str
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    row: CatalogRow | None = None


@dataclass(frozen=True)
class Candidates:
    """What ``HybridSearch.candidates`` found for a query: all that ``CandidateScores.rank`` needs."""

    scores: CandidateScores
    sessions: dict[str, str | None]  # each candidate's session (None: none)
    links: dict[str, tuple[str | None, str | None]]  # a turn's neighbours in its session
    dense: bool  # whether the query has a vector
    own: list[CatalogRow]  # the sandbox buffer's rows among them


class HybridSearch:
    """Searches one catalog and, where there is an embedder, its vectors (``dense``)."""

    def __init__(self, catalog: SearchCatalog[Any], name: str, *, dense: DenseScores | None = None,
                 query_vectors: QueryVectors | None = None, buffer: BufferVectors | None = None,
                 reranker: Reranker | None = None, late: LateScorer | None = None,
                 gather: Gather | None = None) -> None:
        """``gather``: how the candidates are fetched around the full-text hits (default: ``Stepwise``
        over ``catalog`` and ``dense``)."""
        self.catalog, self.name, self.reranker, self.late = catalog, name, reranker, late
        self._dense, self._query_vectors, self._buffer = dense, query_vectors, buffer
        self._gather: Gather = gather if gather is not None else Stepwise(catalog, dense)
        self.dense_error: str | None = None  # why the last query could not be embedded (full text only)

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               extra: Sequence[CatalogRow] = ()) -> list[Hit]:
        """The ``k`` best records for ``query``; ``extra`` rows (a sandbox's buffer, not in the
        catalog) compete with the catalog's on equal terms."""
        check_search(query, k)
        filters = with_kinds(filters or Filters())
        found = self.candidates(query, k, filters, extra)
        reranking = self.reranker is not None and bool(query.strip())
        ranked = found.scores.rank(found.sessions, found.links, dense=found.dense,
                                   limit=max(RERANK_DEPTH, k) if reranking else k)
        # Whole rows (their text) only for what is returned or re-ranked.
        rows = {r.id: r for r in self.catalog.get([rid for rid, _ in ranked], as_of_version=filters.as_of_version)}
        rows.update((r.id, r) for r in found.own)
        if reranking:
            ranked = self._rerank(query, ranked, rows)[:k]
        return [Hit(id=rid, kind=rows[rid].kind, version=rows[rid].version, path=rows[rid].path,
                    text=rows[rid].text, score=parts["score"], parts=parts, row=rows[rid]) for rid, parts in ranked]

    def candidates(self, query: str, k: int = 10, filters: Filters | None = None,
                   extra: Sequence[CatalogRow] = ()) -> Candidates:
        """Step 1 of ``search``: the candidates with both exact scores, their sessions and neighbours;
        nothing here depends on the ranking weights (``benchmarks/retrieval_fit.py`` fits them on this)."""
        filters = with_kinds(filters or Filters())
        depth = max(CANDIDATES, 2 * k)
        query_vector = self._query_vector(query)  # embedded while the full-text search runs
        late = self.late.start(query) if self.late is not None and query.strip() else None  # so is this one
        turn_kinds = [kind for kind in TURN_KINDS if kind in filters.kinds]
        found = self._gather.around(query, query_vector, depth, filters, turn_kinds)
        qvec = query_vector()
        scores = CandidateScores(found.fts, found.dense)
        scores.known.update(found.ids)
        scores.fts_checked.update(found.ids)
        links, sessions = found.links, found.sessions
        own = [r for r in extra if passes(r, filters)]
        if own:
            scores.fts.update(buffer_fts(query, own))
            if qvec is not None and self._buffer is not None:
                scores.dense.update(self._buffer.cosines(qvec, own))
            scores.known.update(r.id for r in own)
            scores.fts_checked.update(r.id for r in own)
            links.update(buffer_links([r for r in own if r.kind in turn_kinds]))
            sessions.update((r.id, r.session_id) for r in own)
        if turn_kinds and scores.known:
            self._neighbours(query, qvec, scores, links, sessions, filters)
        if late is not None:
            self._late_scores(late, scores, filters, own)
        return Candidates(scores, sessions, links, qvec is not None, own)

    def _neighbours(self, query: str, qvec: Any, scores: CandidateScores,
                    links: dict[str, tuple[str | None, str | None]], sessions: dict[str, str | None],
                    filters: Filters) -> None:
        """The turns next to the best candidates in their sessions become candidates too."""
        best = scores.best(NEIGHBOURS_OF_BEST, dense=qvec is not None)
        added = [n for n in dict.fromkeys(n for rid in best for n in links.get(rid, ())) if n and n not in scores.known]
        if not added:
            return
        found = self._gather.scores(query, qvec, added, filters)
        scores.known.update(added)
        scores.fts_checked.update(added)
        scores.fts.update(found.fts)
        scores.dense.update(found.dense)
        sessions.update(found.sessions)
        # A turn added as a neighbour knows its neighbours from theirs (it is their next or previous).
        for rid, (before, after) in list(links.items()):
            if before in added:
                links[before] = (links.get(before, (None, None))[0], rid)
            if after in added:
                links[after] = (rid, links.get(after, (None, None))[1])

    def _late_scores(self, late: Callable[[Sequence[str]], list[float]], scores: CandidateScores, filters: Filters,
                     own: list[CatalogRow]) -> None:
        """Every candidate's late-interaction score, over the text its vector was made from."""
        own_ids = {r.id for r in own}
        rows = self.catalog.get([i for i in scores.ids if i not in own_ids], as_of_version=filters.as_of_version)
        rows.extend(own)
        scores.late = dict(zip([r.id for r in rows], late([embed_text(r) for r in rows]), strict=True))

    def _query_vector(self, query: str) -> Callable[[], Any]:
        """Starts embedding the query; what it returns waits for the vector: None for full text only
        (no embedder, an empty query, or an embedder that cannot answer now: ``dense_error`` then
        says why and the results say they are incomplete)."""
        self.dense_error = None
        if self._dense is None or self._query_vectors is None or not query.strip():
            return lambda: None
        started = self._query_vectors.start(query)

        @functools.cache  # asked by the gathering and again here: waited for once
        def wait() -> Any:
            vector, error = started()
            if error is not None:  # e.g. Redis down and no local model: full text still answers
                log.warning("search %s by full text only: %s", self.name, error)
                self.dense_error = error
            return vector
        return wait

    def _rerank(self, query: str, ranked: list[tuple[str, dict[str, float]]],
                rows: dict[str, CatalogRow]) -> list[tuple[str, dict[str, float]]]:
        """The cross-encoder's logits and the hybrid scores, both standardised, added, and given back
        in the hybrid score's units (its mean and spread over these hits): the same order, and the
        parts a plan adds on top (``standing``, ``when``) weigh what they were fitted to weigh."""
        assert self.reranker is not None
        logits = self.reranker.score(query, [embed_text(rows[rid]) for rid, _ in ranked])
        hybrid = [parts["score"] for _, parts in ranked]
        spread = (statistics.pstdev(hybrid) if hybrid else 0.0) or 1.0  # all equal: the logits alone order them
        out = []
        for (rid, parts), z, logit in zip(ranked, standardised(logits), logits, strict=True):
            score = parts["score"] + RERANK_WEIGHT * spread * z
            out.append((rid, {**parts, "hybrid": parts["score"], "rerank": logit, "score": score}))
        out.sort(key=lambda item: (-item[1]["score"], item[0]))
        return out


def with_kinds(filters: Filters) -> Filters:
    """No kinds asked for means every searchable kind."""
    return filters if filters.kinds else Filters(**{**filters.__dict__, "kinds": SEARCHABLE_KINDS})
