"""How an account's index follows its store: the catalog caught up version by version, then what the
new versions wrote embedded through the backlog (inline, or later by a background indexer).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from soulpass.embed.base import Embedder
from soulpass.errors import BackendUnavailable
from soulpass.index import passages
from soulpass.index.backlog import EmbedBacklog, indexing_embed
from soulpass.index.catalog import CatchUpReport
from soulpass.index.catalog.sync import Progress
from soulpass.index.contract import IndexCatalog
from soulpass.index.filtered import MaskedDense
from soulpass.store.contract import AccountBackend
from soulpass.vectors import VectorIndex

if TYPE_CHECKING:
    from soulpass.index.pg import PgBacklog

__all__ = ["Follower", "IndexStatus"]

log = logging.getLogger(__name__)

EMBED_BATCH = 256
PREPARE_FILTERS_AFTER = 16_384  # vectors written by one catch-up after which the filter masks are built
SETTLE_AFTER = 500  # rows or vectors written by one catch-up after which the database is settled (``settle``)


@dataclass(frozen=True)
class IndexStatus:
    store_version: int
    catalog_version: int
    rows: int
    in_force: dict[str, int]
    vectors: int
    embedder: str | None
    pending_embeddings: int


class Follower:
    """Keeps one account's catalog and vectors following its store.

    ``state``: the local vectors' embedding state (None where the vectors are kept in the database);
    ``passage_vectors()``: how many of the vectors are passages' (not records'); ``settle()``: where
    the index is kept in a database, brings the planner's statistics up to what a large catch-up
    wrote (``PgCatalog.settle``). A new account's rows are in no statistics until the table is
    analysed again (autovacuum waits for a tenth of the table to change, which an account among
    many never is), and the planner, taking them for a handful, chose for a search to compare every
    vector of the account with every one of its rows (docs/retrieval.md)."""

    def __init__(self, store: AccountBackend, catalog: IndexCatalog[AccountBackend], *,
                 embedder: Embedder | None = None, vectors: VectorIndex | None = None,
                 backlog: EmbedBacklog | PgBacklog | None = None, state: sqlite3.Connection | None = None,
                 masked: MaskedDense | None = None, passage_vectors: Callable[[], int] = lambda: 0,
                 embed_inline: bool = True, settle: Callable[[], None] | None = None) -> None:
        self.store, self.catalog, self.embedder, self.vectors, self.backlog = store, catalog, embedder, vectors, backlog
        self.embed_inline, self._settle = embed_inline, settle
        self._state, self._masked, self._passage_vectors = state, masked, passage_vectors
        self._synced: tuple[int, CatchUpReport] | None = None  # HEAD last caught up to completely

    def catch_up(self) -> CatchUpReport:
        """Bring the catalog up to HEAD, then embed what the new versions wrote.

        When HEAD is the version last caught up to completely (nothing deferred), that is all it
        reads: ``Account.search`` calls this before every query."""
        head = self.store.head()
        if self._synced is not None and self._synced[0] == head:
            return self._synced[1]
        report = self.catalog.catch_up(self.store)
        before = self.vectors.count() if self.vectors is not None else 0
        deferred = self.embed_new()
        written = self.vectors.count() - before if self.vectors is not None else 0
        if written >= PREPARE_FILTERS_AFTER:
            self.prepare_filters()  # a large import: the first filtered search need not build them
        if self._settle is not None and max(report.rows_added, written) >= SETTLE_AFTER:
            self._settle()
        if not deferred and report.to_version == head:
            self._synced = (head, CatchUpReport(head, head, 0, 0, 0))
        return report

    def prepare_filters(self) -> bool:
        """Build and keep on disk what broad filters are answered with (``filtered.MaskedDense``),
        which the first filtered search would pay otherwise. False where search does not use them."""
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
                # Vector files lost or cut short: what the state says is embedded is not there.
                done = self._state.execute("SELECT count(*) FROM embedded").fetchone()[0]
                if self.vectors is not None and self.vectors.count() < done + passages.total(self._state):
                    self._state.execute("DELETE FROM embedded")
                    self._state.execute("DELETE FROM passages")
        if self.backlog is not None:
            self.backlog.reset()
        self.embed_new()
        if self._settle is not None:
            self._settle()
        return report

    def embed_new(self) -> bool:
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
        records = max(0, self.vectors.count() - self._passage_vectors()) if self.vectors is not None else 0
        return IndexStatus(store_version=self.store.head(), catalog_version=cat.store_version, rows=cat.rows,
                           in_force=cat.in_force, vectors=records,
                           embedder=self.embedder.model_id if self.embedder else None, pending_embeddings=pending)

