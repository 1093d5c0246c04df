"""The embedding backlog of an index kept in PostgreSQL (:class:`PgBacklog`).

The same promise as the files' backlog (``soulpass.index.backlog``): every record the catalog holds
ends up embedded exactly once per text, none lost to a crash. Here nothing is queued: each vector
row says what it was made of (``source``: the hash of the text embedded), and a drain walks the
catalog's rows in force in ``(version, id)`` order from where the last drain stopped
(``index_embedded``), embeds the rows whose text has no vector yet and only then moves the mark
on. A crash before the mark moves means the next drain looks at those rows again and finds their
vectors there. A rebuilt catalog (a new generation) is walked again from the start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from soulpass.index import passages
from soulpass.index.backlog import CarriedFirst, EmbedFn, drain_until_empty, text_hash
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
        """Rows the walk has not passed yet (some may hold vectors already: a rebuilt catalog): one
        statement, the mark read in it (``_mark``'s rule: none, or one of another generation, is the
        start), as each search asks."""
        account = self.catalog.account
        with self.catalog.db.reading() as conn:
            return int(conn.execute(
                "SELECT count(*) FROM index_rows AS c WHERE c.account_id = %s AND (c.version, c.id) > ("
                "SELECT coalesce(max(e.after_version), 0), coalesce(max(e.after_id), '') FROM index_embedded AS e"
                " WHERE e.account_id = %s AND e.model = %s AND e.generation = coalesce("
                "(SELECT s.generation FROM index_state AS s WHERE s.account_id = %s), 0))"
                " AND c.valid_to IS NULL AND c.kind = ANY(%s) AND c.text <> ''",
                (account, account, self.key, account, list(self.kinds))).fetchone()[0])

    def reset(self) -> None:
        """Walk every row again at the next drain."""
        self._move_mark((0, ""))

    def enqueue(self) -> int:
        """Nothing to queue: the walk reads the catalog (kept for the backlog's interface)."""
        return 0

    def drain(self, embed: EmbedFn, limit: int = 256) -> int:
        """Embed what the next ``limit`` rows of the walk lack; returns how many rows were looked at."""
        with self._draining:
            mark = self._mark()
            rows = self.catalog.rows_after(self.kinds, mark, limit)
            if not rows:
                return 0
            texts = {r.id: self.embed_text(r) for r in rows}
            known = self.vectors.sources(list(texts))
            work = [r for r in rows if known.get(r.id) != text_hash(texts[r.id])]
            if work:
                extra = {r.id: self.passages_of(r) for r in work} if self.passages_of else {}
                batch = [texts[r.id] for r in work] + [p for ps in extra.values() for p in ps]
                vectors = self._carried.embed(embed, batch)
                own = vectors[:len(work)]
                self.vectors.upsert([r.id for r in work], own, sources=[text_hash(texts[r.id]) for r in work])
                passages.replace(self.vectors, extra, vectors[len(work):], self.vectors.passage_counts(list(extra)))
            self._move_mark((rows[-1].version, rows[-1].id))
            return len(rows)

    def drain_all(self, embed: EmbedFn, batch: int = 256, progress: Progress | None = None) -> int:
        return drain_until_empty(self, embed, batch, progress)
