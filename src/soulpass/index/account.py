"""The derived index of one account: where its parts are opened, and the one handle over them.

Opening is the one place a backend is chosen (``match store.index_location()``): the store keeps
the index beside it in its PostgreSQL database (``soulpass.index.pg``), or the index is a SQLite catalog and a vector
index in a local folder. The optional abilities of the vectors are read there, once
(``soulpass.vectors.abilities``), into the parts a search uses: a ``DenseScores``
(``soulpass.index.dense``), a ``Follower`` that catches up with the store (``soulpass.index.follow``)
and a ``HybridSearch`` (``soulpass.index.search``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from soulpass.embed.base import Embedder
from soulpass.embed.colbert import LateScorer
from soulpass.embed.rerank import Reranker
from soulpass.index import passages
from soulpass.index.backlog import EmbedBacklog, embedded_state
from soulpass.index.buffer_rows import BufferVectors
from soulpass.index.carried import carried_name, embedding_key
from soulpass.index.catalog import Catalog, CatalogRow, CatchUpReport, Filters, FullText, catalog_path
from soulpass.index.catalog.sync import Progress
from soulpass.index.contract import IndexCatalog
from soulpass.index.dense import DatabaseDense, DenseScores, LocalDense
from soulpass.index.filtered import MaskedDense
from soulpass.index.follow import Follower, IndexStatus
from soulpass.index.gather import Gather
from soulpass.index.opening import account_vectors_folder
from soulpass.index.query_vectors import QueryVectors
from soulpass.index.recipe import SEARCHABLE_KINDS, embed_passages, embed_text
from soulpass.index.search import Candidates, Hit, HybridSearch
from soulpass.store.contract import AccountBackend, DatabaseIndex, LocalIndex
from soulpass.vectors import VectorBackend, VectorIndex, open_vector_index
from soulpass.vectors.abilities import GivesVectors, RebuildsGraph

if TYPE_CHECKING:
    from soulpass.index.pg import PgBacklog

__all__ = ["AccountIndex"]

QUERY_VECTORS_KEPT = 256  # query vectors kept per open index: a repeated query is not embedded again


class AccountIndex:
    """The derived index of one account: catalog, vectors and their backlog, opened for its store."""

    def __init__(self, store: AccountBackend, embedder: Embedder | None = None, *, backend: VectorBackend = "hnsw",
                 reranker: Reranker | None = None, late: LateScorer | None = None, embed_inline: bool = True,
                 fulltext: FullText | None = None) -> None:
        """``embed_inline``: ``catch_up`` embeds the new records before returning; when False they
        wait in ``backlog`` for a :class:`~soulpass.index.indexer.BackgroundIndexer`. ``fulltext``:
        the full-text engine, recorded in the catalog for every later handle (None: the recorded one)."""
        self.store, self.embedder, self.reranker = store, embedder, reranker
        self.vectors: VectorIndex | None = None
        self.backlog: EmbedBacklog | PgBacklog | None = None
        self.graph: RebuildsGraph | None = None  # ``index rebuild --graph``: a local HNSW index's
        self.stored_vectors: GivesVectors | None = None  # what a passport's ``--vectors`` reads
        self._state: sqlite3.Connection | None = None
        self._identity: Callable[[], object]  # what says the index opened is still the one there
        self._opened: object = None
        self._gather: Gather | None = None  # how a search fetches its candidates (None: step by step)
        match store.index_location():
            case DatabaseIndex() as where:  # the store keeps the index beside it (PostgreSQL): every process shares it
                self.dense, self.follower = self._open_in_database(where, embed_inline)
            case LocalIndex(folder=folder):
                self.dense, self.follower = self._open_local(folder, backend, fulltext, embed_inline)
        self._search = HybridSearch(
            self.catalog, store.name, dense=self.dense, reranker=reranker, late=late,
            query_vectors=QueryVectors(embedder, QUERY_VECTORS_KEPT) if embedder is not None else None,
            buffer=BufferVectors(embedder) if embedder is not None else None, gather=self._gather)

    def _open_local(self, index_folder: Path, backend: VectorBackend, fulltext: FullText | None,
                    embed_inline: bool) -> tuple[DenseScores | None, Follower]:
        """The SQLite catalog and a vector index of ``backend`` in the index folder."""
        store = self.store
        catalog = Catalog.open(store, fulltext=fulltext)
        path = catalog_path(store)
        self._identity = lambda: _file_identity(path)
        self._opened = self._identity()
        if fulltext is not None:
            catalog.record_fulltext(fulltext)
        self.catalog: IndexCatalog[AccountBackend] = catalog
        if self.embedder is None:
            return None, Follower(store, catalog, embed_inline=embed_inline)
        model = self.embedder.model_id
        # One folder per backend and embedder: another model means other vectors, never mixed.
        folder = account_vectors_folder(index_folder, backend, model)
        vectors = self.vectors = open_vector_index(folder, model_id=model, dim=self.embedder.dim, backend=backend)
        self.graph, self.stored_vectors = vectors.abilities.graph, vectors.abilities.vectors
        # The recipe is part of the key: when what is embedded changes, everything is re-embedded.
        state_file = folder.with_name(folder.name + ".embedded.sqlite")
        state = self._state = embedded_state(state_file, embedding_key(model))
        masked = MaskedDense.over(vectors, catalog, state, folder.with_name(folder.name + ".catalog-rows.npz"))
        self.backlog = EmbedBacklog(path, state_file, embedding_key(model), vectors, embed_text,
                                    SEARCHABLE_KINDS, passages_of=embed_passages,
                                    carried=index_folder / carried_name(model))
        follower = Follower(store, catalog, embedder=self.embedder, vectors=vectors, backlog=self.backlog,
                            state=state, masked=masked, passage_vectors=lambda: passages.total(state),
                            embed_inline=embed_inline)
        return LocalDense(vectors, catalog, state, masked), follower

    def _open_in_database(self, where: DatabaseIndex, embed_inline: bool) -> tuple[DenseScores | None, Follower]:
        """The catalog, vectors and backlog in the store's PostgreSQL database (``soulpass.index.pg``)."""
        from soulpass.index.opening import index_database
        from soulpass.index.pg import PgBacklog, PgCatalog, PgVectors
        from soulpass.index.pg.gather import PgGather

        db, account_id = index_database(where), where.account

        catalog = PgCatalog(db, account_id, self.store.name)
        self.catalog = catalog
        self._identity = catalog.born  # its state row is made again when the index is dropped
        self._opened = self._identity()
        if self.embedder is None:
            return None, Follower(self.store, catalog, embed_inline=embed_inline, settle=catalog.settle)
        model = self.embedder.model_id
        vectors = PgVectors(db, account_id, model_id=model, dim=self.embedder.dim,
                            local_folder=account_vectors_folder(where.folder, "hnsw", model))
        self.vectors = vectors
        self.backlog = PgBacklog(catalog, vectors, embedding_key(model), embed_text, SEARCHABLE_KINDS,
                                 passages_of=embed_passages, carried=where.folder / carried_name(model))
        follower = Follower(self.store, catalog, embedder=self.embedder, vectors=vectors, backlog=self.backlog,
                            passage_vectors=vectors.passages_total, embed_inline=embed_inline,
                            settle=lambda: catalog.settle(vectors.table))
        dense = DatabaseDense(vectors, catalog)
        self._gather = PgGather(catalog, vectors, dense)  # the candidates in one statement
        return dense, follower

    @property
    def dense_error(self) -> str | None:
        """Why the last query could not be embedded (it was searched by full text only)."""
        return self._search.dense_error

    def dropped(self) -> bool:
        """Whether the index this handle opened was deleted since (``drop_index`` by another
        handle or process, as a forget does): it must be opened again, not written."""
        return bool(self._identity() != self._opened)

    def close(self) -> None:
        if self.backlog is not None:
            self.backlog.close()
        self.catalog.close()
        if self.vectors is not None:
            self.vectors.close()
        if self._state is not None:
            self._state.close()

    # --- following the store (soulpass.index.follow) -------------------------------------

    def catch_up(self) -> CatchUpReport:
        """Bring the catalog up to HEAD, then embed what the new versions wrote."""
        return self.follower.catch_up()

    def rebuild(self, progress: Progress | None = None) -> CatchUpReport:
        """Recreate the catalog from the store's copies and re-embed what changed (``progress(done, total)``)."""
        return self.follower.rebuild(progress)

    def prepare_filters(self) -> bool:
        """Build the broad filters' masks now (False where search does not use them)."""
        return self.follower.prepare_filters()

    def status(self) -> IndexStatus:
        return self.follower.status()

    # --- search (soulpass.index.search) --------------------------------------------------

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               extra: Sequence[CatalogRow] = ()) -> list[Hit]:
        """The ``k`` best records for ``query`` (``HybridSearch.search``)."""
        return self._search.search(query, k, filters, extra)

    def candidates(self, query: str, k: int = 10, filters: Filters | None = None,
                   extra: Sequence[CatalogRow] = ()) -> Candidates:
        """The candidates of a search with both exact scores (``HybridSearch.candidates``)."""
        return self._search.candidates(query, k, filters, extra)


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
