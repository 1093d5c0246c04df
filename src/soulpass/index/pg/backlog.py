"""The embedding backlog of an index kept in PostgreSQL (:class:`PgBacklog`).

The same promise as the files' backlog (``soulpass.index.backlog``): every record the catalog holds
ends up embedded exactly once per text, none lost to a crash. Here nothing is queued: each vector
row says what it was made of (``source``: the hash of the text embedded), and a drain walks the
catalog's rows in force in ``(version, id)`` order from where the last drain stopped
(``index_embedded``), embeds the rows whose text has no vector yet and only then moves the mark
on. A crash before the mark moves means the next drain looks at those rows again and finds their
vectors there. A rebuilt catalog (a new generation) is walked again from the start. Draining it
all, one batch's vectors are written while the next is embedded (the database's work, an HNSW
insert per vector, beside the model's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from soulpass.embed.base import Vectors
from soulpass.index import passages
from soulpass.index.backlog import CarriedFirst, EmbedFn, text_hash
from soulpass.index.catalog import CatalogRow
from soulpass.index.pg.catalog import PgCatalog
from soulpass.index.pg.vectors import PgVectors

__all__ = ["PgBacklog"]

Progress = Callable[[int, int], None]


class PgBacklog:
    """The backlog of one embedder (``key``: model id and recipe) over one account's PostgreSQL index."""

    def __init__(self, catalog: PgCatalog, vectors: PgVectors, key: str, embed_text: Callable[[CatalogRow], str],
                 kinds: Sequence[str], *, passages_of: Callable[[CatalogRow], list[str]] | None = None,
                 carried: Path | None = None) -> None:
        self.catalog, self.vectors, self.key, self.embed_text = catalog, vectors, key, embed_text
        self.kinds, self.passages_of = tuple(kinds), passages_of
        self._carried = CarriedFirst(carried, key)
        self._draining = threading.Lock()

    def close(self) -> None:
        """Nothing to release (the catalog's database pool holds the connections)."""

    def _mark(self) -> tuple[int, str]:
        generation = self.catalog.generation()
        with self.catalog.db.reading() as conn:
            got = conn.execute("SELECT generation, after_version, after_id FROM index_embedded"
                               " WHERE account_id = %s AND model = %s", (self.catalog.account, self.key)).fetchone()
        if got is None or int(got[0]) != generation:
            return 0, ""
        return int(got[1]), str(got[2])

    def _move_mark(self, mark: tuple[int, str]) -> None:
        generation = self.catalog.generation()
        with self.catalog.db.connection() as conn:
            conn.execute("INSERT INTO index_embedded (account_id, model, generation, after_version, after_id)"
                         " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (account_id, model) DO UPDATE SET"
                         " generation = excluded.generation, after_version = excluded.after_version,"
                         " after_id = excluded.after_id", (self.catalog.account, self.key, generation, *mark))

    def pending(self) -> int:
        """Rows the walk has not passed yet (some may hold vectors already: a rebuilt catalog)."""
        return self.catalog.count_after(self.kinds, self._mark())

    def reset(self) -> None:
        """Walk every row again at the next drain."""
        self._move_mark((0, ""))

    def enqueue(self) -> int:
        """Nothing to queue: the walk reads the catalog (kept for the backlog's interface)."""
        return 0

    def drain(self, embed: EmbedFn, limit: int = 256) -> int:
        """Embed what the next ``limit`` rows of the walk lack; returns how many rows were looked at."""
        with self._draining:
            rows = self.catalog.rows_after(self.kinds, self._mark(), limit)
            if rows:
                self._write(self._embedded(rows, embed))
            return len(rows)

    def drain_all(self, embed: EmbedFn, batch: int = 256, progress: Progress | None = None) -> int:
        """``drain`` until the walk has passed every row; returns the rows looked at. Each batch's
        vectors are written (and the mark moved after them) while the next batch is embedded: one
        writer, batches in order, so the mark never passes a batch whose vectors are not written."""
        with self._draining, ThreadPoolExecutor(1, thread_name_prefix="soulpass-vectors") as writer:
            mark, done = self._mark(), 0
            total = self.catalog.count_after(self.kinds, mark) if progress is not None else 0
            written: Future[None] | None = None
            while rows := self.catalog.rows_after(self.kinds, mark, batch):
                embedded = self._embedded(rows, embed)
                if written is not None:
                    written.result()  # the previous batch's vectors and mark are in
                written = writer.submit(self._write, embedded)
                mark, done = embedded.mark, done + len(rows)
                if progress is not None:
                    progress(done, max(total, done))
            if written is not None:
                written.result()
            return done

    def _embedded(self, rows: list[CatalogRow], embed: EmbedFn) -> _Embedded:
        """The vectors ``rows`` lack (their text has none yet), and their passages'."""
        texts = {r.id: self.embed_text(r) for r in rows}
        known = self.vectors.sources(list(texts))
        work = [r for r in rows if known.get(r.id) != text_hash(texts[r.id])]
        extra = {r.id: self.passages_of(r) for r in work} if self.passages_of else {}
        vectors = None
        if work:
            vectors = self._carried.embed(embed, [texts[r.id] for r in work] + [p for ps in extra.values() for p in ps])
        return _Embedded([r.id for r in work], [text_hash(texts[r.id]) for r in work], extra, vectors,
                         (rows[-1].version, rows[-1].id))

    def _write(self, embedded: _Embedded) -> None:
        """Write the vectors, then move the mark past their rows."""
        if embedded.vectors is not None:
            n = len(embedded.ids)
            self.vectors.upsert(embedded.ids, embedded.vectors[:n], sources=embedded.sources)
            passages.replace(self.vectors, embedded.passages, embedded.vectors[n:],
                             self.vectors.passage_counts(list(embedded.passages)))
        self._move_mark(embedded.mark)


@dataclass(frozen=True)
class _Embedded:
    """One batch of the walk, embedded: what to write and where the mark goes after it."""

    ids: list[str]  # the rows whose own vector is new
    sources: list[str]  # the hash of each one's text
    passages: dict[str, list[str]]  # their passages' texts
    vectors: Vectors | None  # the rows' vectors, then the passages', in order (None: nothing to embed)
    mark: tuple[int, str]  # the last row of the batch
