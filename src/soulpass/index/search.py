"""Hybrid search over one account: full text and dense vectors fused by score, read in context.

The catalog decides what exists and what passes the filters (kind, agent, tags, time, session,
persona, event, "as of version"); the vector index only ranks. Both are derived from the store and
follow the store through ``catch_up``; vectors are keyed by record id and re-embedded only when
the text changed (the embedder's ``model_id`` is recorded, so vectors are never mixed).
"""

from __future__ import annotations

import itertools
import logging
import math
import sqlite3
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from soulpass.embed.base import Embedder
from soulpass.embed.rerank import Reranker
from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.index import passages
from soulpass.index.backlog import EmbedBacklog, embedded_state, indexing_embed, text_hash
from soulpass.index.buffer_rows import buffer_fts, buffer_links, passes
from soulpass.index.catalog import Catalog, CatalogRow, CatchUpReport, Filters, FullText, Traits, catalog_path
from soulpass.index.catalog.query import query_terms
from soulpass.index.catalog.sync import Progress
from soulpass.index.contract import IndexCatalog
from soulpass.index.filtered import MaskedDense
from soulpass.index.query_vectors import QueryVectors
from soulpass.index.ranking import CandidateScores, standardised
from soulpass.index.recipe import EMBED_RECIPE, SEARCHABLE_KINDS, TURN_KINDS, embed_passages, embed_text
from soulpass.index.seed_file import seed_name
from soulpass.index.speakers import speaks_first_person
from soulpass.index.vectors import Backend, VectorIndex, account_vectors_folder, open_vector_index
from soulpass.index.vectors.base import unit_query
from soulpass.index.vectors.groups import GroupBest
from soulpass.store.contract import AccountBackend

if TYPE_CHECKING:
    from soulpass.index.pg import PgBacklog, PgVectors

__all__ = ["EMBED_RECIPE", "SEARCHABLE_KINDS", "TURN_KINDS", "AccountIndex", "Candidates", "Hit", "IndexStatus",
           "embed_passages", "embed_text", "passes", "speaks_first_person"]

log = logging.getLogger(__name__)

CANDIDATES = 50  # per retriever, before fusion (ranked by soulpass.index.ranking)
# The optional cross-encoder re-orders the best RERANK_DEPTH: its standardised logit is added to
# the standardised hybrid score (LoCoMo, first 3 conversations: R@10 0.788 -> 0.813, NDCG@10
# 0.564 -> 0.629; the cross-encoder alone: 0.783 / 0.641).
RERANK_DEPTH = 30
RERANK_WEIGHT = 1.0
NEIGHBOUR_SEEDS = 20  # the neighbours of this many best candidates become candidates too
# Filtered dense search: ask the vector index for up to this many times the candidates needed
# (measuring the share that passes), with this margin over the measured share, before listing
# every passing id instead.
OVERFETCH_MOST = 32
OVERFETCH_MARGIN = 1.25
EMBED_BATCH = 256
BUFFER_VECTOR_CACHE = 20_000  # buffer texts embedded for sandbox searches, kept per open index
PREPARE_FILTERS_AFTER = 16_384  # vectors written by one catch-up after which the filter masks are built
QUERY_VECTOR_CACHE = 256  # query vectors kept per open index: a repeated query is not embedded again


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
class IndexStatus:
    store_version: int
    catalog_version: int
    rows: int
    in_force: dict[str, int]
    vectors: int
    embedder: str | None
    pending_embeddings: int


class AccountIndex:
    """The derived index of one account, in the folder its store hands out (``index_dir()``)."""

    def __init__(self, store: AccountBackend, embedder: Embedder | None = None, *, backend: Backend = "hnsw",
                 reranker: Reranker | None = None, embed_inline: bool = True,
                 fulltext: FullText | None = None) -> None:
        """``embed_inline``: ``catch_up`` embeds the new records before returning; when False they
        wait in ``backlog`` for a :class:`~soulpass.index.indexer.BackgroundIndexer`. ``fulltext``:
        the full-text engine, recorded in the catalog for every later handle (None: the recorded one)."""
        self.store = store
        self.embed_inline = embed_inline
        self._synced: tuple[int, CatchUpReport] | None = None  # HEAD last caught up to completely
        self.backlog: EmbedBacklog | PgBacklog | None = None
        self.reranker = reranker
        self.embedder = embedder
        self.dense_error: str | None = None  # why the last query could not be embedded (full text only)
        self.vectors: VectorIndex | None = None
        self._buffer_vectors: dict[str, Any] = {}  # text hash -> vector, for sandbox buffers
        self._query_vectors = QueryVectors(embedder, QUERY_VECTOR_CACHE) if embedder is not None else None
        self._masked: MaskedDense | None = None  # broad filters over a local vector index (filtered.py)
        self._state: sqlite3.Connection | None = None
        self._passage_ids: passages.PassageIds | None = None
        self._in_database: PgVectors | None = None
        in_database = getattr(store, "index_database", None)
        found = in_database() if callable(in_database) else None
        if found is not None:  # the store keeps the index beside it (PostgreSQL): every process shares it
            self._open_in_database(*found)
            return
        catalog = Catalog.open(store, fulltext=fulltext)
        self._opened: object = _file_identity(catalog_path(store))
        if fulltext is not None:
            catalog.record_fulltext(fulltext)
        self.catalog: IndexCatalog[AccountBackend] = catalog
        if embedder is not None:
            # One folder per backend and embedder: another model means other vectors, never mixed.
            folder = account_vectors_folder(store.index_dir(), backend, embedder.model_id)
            self.vectors = open_vector_index(folder, model_id=embedder.model_id, dim=embedder.dim, backend=backend)
            # The recipe is part of the key: when what is embedded changes, everything is re-embedded.
            self._state = embedded_state(folder.with_name(folder.name + ".embedded.sqlite"),
                                          f"{embedder.model_id}|{EMBED_RECIPE}")
            self._passage_ids = passages.PassageIds(self._state)
            self._masked = MaskedDense.over(self.vectors, catalog, self._state,
                                            folder.with_name(folder.name + ".catalog-rows.npz"))
            self.backlog = EmbedBacklog(catalog_path(store), folder.with_name(folder.name + ".embedded.sqlite"),
                                        f"{embedder.model_id}|{EMBED_RECIPE}", self.vectors, embed_text,
                                        SEARCHABLE_KINDS, passages_of=embed_passages,
                                        seed=store.index_dir() / seed_name(embedder.model_id))

    def _open_in_database(self, db: Any, account_id: int) -> None:
        """The catalog, vectors and backlog in the store's PostgreSQL database (``soulpass.index.pg``)."""
        from soulpass.index.pg import PgBacklog, PgCatalog, PgVectors

        catalog = PgCatalog(db, account_id, self.store.name)
        self.catalog = catalog
        self._opened = catalog.born()
        if self.embedder is None:
            return
        model = self.embedder.model_id
        vectors = PgVectors(db, account_id, model_id=model, dim=self.embedder.dim,
                            local_folder=account_vectors_folder(self.store.index_dir(), "hnsw", model))
        self.vectors = self._in_database = vectors
        self.backlog = PgBacklog(catalog, vectors, f"{model}|{EMBED_RECIPE}", embed_text, SEARCHABLE_KINDS,
                                 passages_of=embed_passages, seed=self.store.index_dir() / seed_name(model))

    def dropped(self) -> bool:
        """Whether the index this handle opened was deleted since (``drop_index`` by another
        handle or process, as a forget does): it must be opened again, not written."""
        born = getattr(self.catalog, "born", None)
        if born is not None:  # kept in the database (PgCatalog): its state row was made again
            return bool(born() != self._opened)
        return _file_identity(catalog_path(self.store)) != self._opened

    def close(self) -> None:
        if self.backlog is not None:
            self.backlog.close()
        self.catalog.close()
        if self.vectors is not None:
            self.vectors.close()
        if self._state is not None:
            self._state.close()

    # --- following the store -----------------------------------------------------------------

    def catch_up(self) -> CatchUpReport:
        """Bring the catalog up to HEAD, then embed what the new versions wrote.

        When HEAD is the version this handle last caught up to completely (nothing deferred), that
        is all it reads (``Account.search`` calls this before every query: 0.7 ms of catalog and log
        reads otherwise). A replaced account or a dropped index is ``dropped()``, checked before."""
        head = self.store.head()
        if self._synced is not None and self._synced[0] == head:
            return self._synced[1]
        report = self.catalog.catch_up(self.store)
        before = self.vectors.count() if self.vectors is not None else 0
        deferred = self._embed_new()
        if self.vectors is not None and self.vectors.count() - before >= PREPARE_FILTERS_AFTER:
            self.prepare_filters()  # a large import: the first filtered search need not build them
        if not deferred and report.to_version == head:
            self._synced = (head, CatchUpReport(head, head, 0, 0, 0))
        return report

    def prepare_filters(self) -> bool:
        """Build and keep on disk what broad filters are answered with (``filtered.MaskedDense``):
        ~5 s at 1M records, which the first filtered search would pay otherwise. False where search
        does not use them (another catalog or vector backend)."""
        if self._masked is None:
            return False
        self._masked.prepare()
        return True

    def rebuild(self, progress: Progress | None = None) -> CatchUpReport:
        """Recreate the catalog from the store's copies and re-embed what changed (``progress(done, total)``)."""
        self._synced = None
        report = self.catalog.rebuild(self.store, progress=progress)
        if self._state is not None:
            with self._state:
                self._state.execute("UPDATE embed_meta SET value = '0' WHERE key = 'version'")
                # Vector files lost or cut short: what the state says is embedded is not there.
                done = self._state.execute("SELECT count(*) FROM embedded").fetchone()[0]
                if self.vectors is not None and self.vectors.count() < done + passages.total(self._state):
                    self._state.execute("DELETE FROM embedded")
                    self._state.execute("DELETE FROM passages")
        if self.backlog is not None:
            self.backlog.reset()
        self._embed_new()
        return report

    def _embed_new(self) -> bool:
        """New records into the embedding backlog (soulpass.index.backlog); drained here when inline.
        True when some could not be embedded now (remote workers away)."""
        if self.backlog is None or self.embedder is None:
            return False
        self.backlog.enqueue()
        if self.embed_inline:
            try:
                self.backlog.drain_all(indexing_embed(self.embedder), EMBED_BATCH)
            except BackendUnavailable as exc:  # remote workers away: full text now, vectors later
                log.warning("embedding deferred, %d record(s) wait in the backlog: %s", self.backlog.pending(), exc)
                return True
        return False

    def status(self) -> IndexStatus:
        cat = self.catalog.status()
        pending = self.backlog.pending() if self.backlog is not None else 0
        return IndexStatus(store_version=self.store.head(), catalog_version=cat.store_version, rows=cat.rows,
                           in_force=cat.in_force, vectors=self._record_vectors(),
                           embedder=self.embedder.model_id if self.embedder else None, pending_embeddings=pending)

    def _record_vectors(self) -> int:
        """Vectors of records (their passages' not counted)."""
        if self._in_database is not None:
            return max(0, self._in_database.count() - self._in_database.passages_total())
        if self.vectors is None or self._state is None:
            return 0
        return max(0, self.vectors.count() - passages.total(self._state))

    # --- search --------------------------------------------------------------------------

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               extra: Sequence[CatalogRow] = ()) -> list[Hit]:
        """The ``k`` best records for ``query``; ``extra`` rows (a sandbox's buffer, not in the
        catalog) compete with the catalog's on equal terms.

        1. candidates: the best ``CANDIDATES`` by BM25 and by cosine, and the turns next to the
           best ``NEIGHBOUR_SEEDS`` of them in their conversations; every candidate gets both its
           exact BM25 score (0 when no term matches) and its exact cosine;
        2. each score is standardised over the candidates (z-scores); ``fused`` is the two added;
        3. the score adds ``W_FTS`` and ``W_DENSE`` of the z-scores, ``W_CONTEXT`` of the better
           neighbour's fused score, ``W_SESSION`` of the best in the candidate's session (its own
           when alone) and, for turns, ``W_SPEAKER`` when the query names its speaker, ``W_ASKS``
           when it holds a question mark and ``W_LENGTH`` of its log length above the mean.
        Ties are broken by id, so results are reproducible and survive a rebuild.
        """
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
        if type(k) is not int or not 1 <= k <= sys.maxsize:  # larger: no list could be sliced to it
            raise InvalidInput(f"k must be a positive integer up to {sys.maxsize}, not {k!r}", field="k")
        filters = _with_kinds(filters or Filters())
        found = self.candidates(query, k, filters, extra)
        reranking = self.reranker is not None and bool(query.strip())
        ranked = found.scores.rank(found.traits, found.links, named=found.named, dense=found.dense,
                                   first_person=found.first_person, limit=max(RERANK_DEPTH, k) if reranking else k)
        own = found.own
        # Whole rows (their text) only for what is returned or re-ranked.
        rows = {r.id: r for r in self.catalog.get([rid for rid, _ in ranked], as_of_version=filters.as_of_version)}
        rows.update((r.id, r) for r in own)
        if reranking:
            ranked = self._rerank(query, ranked, rows)[:k]
        return [Hit(id=rid, kind=rows[rid].kind, version=rows[rid].version, path=rows[rid].path,
                    text=rows[rid].text, score=parts["score"], parts=parts, row=rows[rid]) for rid, parts in ranked]

    def candidates(self, query: str, k: int = 10, filters: Filters | None = None,
                   extra: Sequence[CatalogRow] = ()) -> Candidates:
        """Step 1 of ``search``: the candidates with both exact scores, their traits and neighbours;
        nothing here depends on the ranking weights (``benchmarks/retrieval_fit.py`` fits them on this)."""
        filters = _with_kinds(filters or Filters())
        depth = max(CANDIDATES, 2 * k)
        query_vector = self._query_vector(query)  # embedded while the full-text search runs
        fts = dict(self.catalog.fts_search(query, depth, filters))
        qvec = query_vector()
        dense = self._dense(qvec, depth, filters) if qvec is not None else []
        scores = CandidateScores(fts, {})
        self._complete(query, qvec, scores, [*fts, *dense], filters)
        turn_kinds = [kind for kind in TURN_KINDS if kind in filters.kinds]
        own = [r for r in extra if passes(r, filters)]
        own_ids = {r.id for r in own}
        if own:
            scores.fts.update(buffer_fts(query, own))
            if qvec is not None:
                scores.dense.update(self._buffer_dense(qvec, own))
            scores.known.update(own_ids)
            scores.fts_checked.update(own_ids)
        links: dict[str, tuple[str | None, str | None]] = {}
        if turn_kinds and scores.ids:
            links = self.catalog.neighbours([i for i in scores.ids if i not in own_ids], turn_kinds, filters)
            links.update(buffer_links([r for r in own if r.kind in turn_kinds]))
            seeds = scores.best(NEIGHBOUR_SEEDS, dense=qvec is not None)
            added = [n for seed in seeds for n in links.get(seed, ()) if n and n not in scores.known]
            self._complete(query, qvec, scores, added, filters)
            # A turn added as a neighbour knows its neighbours from theirs (it is their next or previous).
            for rid, (before, after) in list(links.items()):
                if before in added:
                    links[before] = (links.get(before, (None, None))[0], rid)
                if after in added:
                    links[after] = (rid, links.get(after, (None, None))[1])
        traits = self.catalog.traits(scores.ids, as_of_version=filters.as_of_version)
        traits.update((r.id, Traits.of(r)) for r in own)
        return Candidates(scores, traits, links, set(query_terms(query)), qvec is not None, own,
                          first_person=speaks_first_person(query))

    def _rerank(self, query: str, ranked: list[tuple[str, dict[str, float]]],
                rows: dict[str, CatalogRow]) -> list[tuple[str, dict[str, float]]]:
        """The cross-encoder's logits and the hybrid scores, both standardised, added."""
        assert self.reranker is not None
        logits = self.reranker.score(query, [embed_text(rows[rid]) for rid, _ in ranked])
        hybrid = standardised([parts["score"] for _, parts in ranked])
        out = []
        for (rid, parts), h, z, logit in zip(ranked, hybrid, standardised(logits), logits, strict=True):
            out.append((rid, {**parts, "hybrid": parts["score"], "rerank": logit, "score": h + RERANK_WEIGHT * z}))
        out.sort(key=lambda item: (-item[1]["score"], item[0]))
        return out

    def expect_query(self, query: str) -> None:
        """Begin embedding ``query`` for a search about to ask (before it catches up with the store)."""
        if self.vectors is not None and self._query_vectors is not None and isinstance(query, str) and query.strip():
            self._query_vectors.start(query)

    def _query_vector(self, query: str) -> Callable[[], Any]:
        """Starts embedding the query; what it returns waits for the vector: None for full text only
        (no embedder, an empty query, or an embedder that cannot answer now: ``dense_error`` then
        says why and the results say they are incomplete)."""
        self.dense_error = None
        if self.vectors is None or self._query_vectors is None or not query.strip():
            return lambda: None
        started = self._query_vectors.start(query)  # the last QUERY_VECTOR_CACHE queries' vectors are kept

        def wait() -> Any:
            vector, error = started()
            if error is not None:  # e.g. Redis down and no local model: full text still answers
                log.warning("search %s by full text only: %s", self.store.name, error)
                self.dense_error = error
            return vector
        return wait

    def _dense(self, vector: Any, depth: int, filters: Filters) -> list[str]:
        """Ids of the ``depth`` records nearest ``vector`` by their own or a passage's vector
        (passing the filters), best first; their exact cosines come from ``_complete``."""
        assert self.vectors is not None
        masked = self._masked.nearest(vector, depth, filters) if self._masked is not None else None
        if masked is not None:  # a broad filter over a local index: masks in numpy (filtered.py)
            return masked
        if filters.as_of_version is None and not (filters.session_id or filters.event_id or filters.persona_id):
            # Many rows may pass (a speaker, a time range): ask the vector index for more than
            # needed and check them here, instead of listing every passing id (~70 ms for 77k of
            # 1M rows). Each try measures the share that passes; the next asks for enough at that
            # share (at least twice as many), unless that is more than OVERFETCH_MOST times depth.
            grouped = self._group_best(vector, scan=True)  # every row scored: records' best read off
            fetch = depth + depth // 2
            while fetch <= OVERFETCH_MOST * depth:
                if grouped is not None:
                    nearest = grouped.top(fetch)
                    ended = len(nearest) < fetch
                else:
                    hits = self.vectors.search(vector, fetch)
                    nearest, ended = list(passages.best_per_record(hits)), len(hits) < fetch
                ok = self.catalog.passing(nearest, filters)
                kept = [i for i in nearest if i in ok]
                if len(kept) >= depth or ended:
                    return kept[:depth]
                share = max(len(kept), 1) / max(len(nearest), 1)
                fetch = max(2 * fetch, math.ceil(OVERFETCH_MARGIN * depth / share * fetch / max(len(nearest), 1)))
        allowed = self.catalog.ids_matching(filters)  # only what exists (as of V) and passes
        if not allowed:
            return []
        # By the records' own vectors: the passages of a few candidates are scored in ``_complete``.
        return [i for i, _ in self.vectors.search(vector, depth, allowed=allowed)]

    def _group_best(self, vector: Any, *, scan: bool) -> GroupBest | None:
        """The best cosine of every record from one product over every row (``group_best``), where
        the local index scores every row; ``scan=False``: only if this query's was made already."""
        grouped = getattr(self.vectors, "group_best", None) if self._in_database is None else None
        return grouped(vector, passages.record_of, scan=scan) if grouped is not None else None

    def _cosines(self, qvec: Any, ids: Sequence[str]) -> dict[str, float]:
        """Exact dense scores of records: the best of their own vector's and their passages'."""
        assert self.vectors is not None
        grouped = self._group_best(qvec, scan=False)
        if grouped is not None:  # this query's dense search scored every row
            return grouped.of(ids)
        if self._in_database is not None:
            best = self._in_database.best_per_record(qvec, ids)
            if best is not None:
                return best
            of = {rid: tuple(passages.passage_id(rid, n) for n in range(k))
                  for rid, k in self._in_database.passage_counts(ids).items()}
        else:
            assert self._passage_ids is not None
            of = self._passage_ids.of(ids)
        wanted = [*ids, *itertools.chain.from_iterable(of.values())]
        arrays = getattr(self.vectors, "cosine_array", None)
        in_order = arrays(qvec, wanted) if arrays is not None else None
        if in_order is not None:  # a local index: the scores of these rows in their order, best taken in numpy
            return passages.best_in_array(ids, of, in_order)
        cosines = getattr(self.vectors, "cosines", None)
        scored = cosines(qvec, wanted) if cosines is not None else None
        if scored is not None:  # a local index scores the rows of these ids without ranking them
            return passages.best_of(ids, of, scored)
        return passages.best_per_record(self.vectors.search(qvec, len(wanted), allowed=wanted))

    def _buffer_dense(self, qvec: Any, rows: Sequence[CatalogRow]) -> dict[str, float]:
        """Cosines of rows not in the vector index, passages included (embedded once per text,
        kept in memory)."""
        assert self.embedder is not None
        texts = {r.id: [embed_text(r), *embed_passages(r)] for r in rows}
        todo = list(dict.fromkeys(t for ts in texts.values() for t in ts
                                  if text_hash(t) not in self._buffer_vectors))
        for i in range(0, len(todo), EMBED_BATCH):
            chunk = todo[i:i + EMBED_BATCH]
            for text, vec in zip(chunk, self.embedder.embed_batch(chunk), strict=True):
                self._buffer_vectors[text_hash(text)] = unit_query(vec, self.embedder.dim)
        query = unit_query(qvec, self.embedder.dim)
        out = {rid: max(float(np.dot(self._buffer_vectors[text_hash(t)], query)) for t in ts)
               for rid, ts in texts.items()}
        while len(self._buffer_vectors) > BUFFER_VECTOR_CACHE:
            self._buffer_vectors.pop(next(iter(self._buffer_vectors)))
        return out

    def _complete(self, query: str, qvec: Any, scores: CandidateScores, ids: Iterable[str], filters: Filters) -> None:
        """Give every id in ``ids`` both scores, exactly (BM25 0 when no term matches)."""
        new = [i for i in dict.fromkeys(ids) if i not in scores.known]
        scores.known.update(new)
        no_fts = [i for i in scores.known if i not in scores.fts and i not in scores.fts_checked]
        if no_fts:
            scores.fts.update(self.catalog.fts_scores(query, no_fts, filters))
            scores.fts_checked.update(no_fts)
        no_dense = [i for i in scores.known if i not in scores.dense]
        if qvec is not None and no_dense and self.vectors is not None:
            scores.dense.update(self._cosines(qvec, no_dense))


@dataclass(frozen=True)
class Candidates:
    """What ``AccountIndex.candidates`` found for a query: all that ``CandidateScores.rank`` needs."""

    scores: CandidateScores
    traits: dict[str, Traits]
    links: dict[str, tuple[str | None, str | None]]
    named: set[str]  # the query's terms
    dense: bool  # whether the query has a vector
    own: list[CatalogRow]  # the sandbox buffer's rows among them
    first_person: bool = False  # the query says "I", "me", "my": it asks about the user's own words


def _with_kinds(filters: Filters) -> Filters:
    """No kinds asked for means every searchable kind."""
    return filters if filters.kinds else Filters(**{**filters.__dict__, "kinds": SEARCHABLE_KINDS})


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
