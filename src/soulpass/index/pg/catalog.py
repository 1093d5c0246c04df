"""The catalog of one account kept in PostgreSQL, beside its store (:class:`PgCatalog`).

The same rows as the SQLite catalog (``soulpass.index.catalog.make_rows.make_row``), in ``index_rows``
keyed by account; ``index_state`` holds the store version they reflect. Every process and host
serving the account reads and follows the same catalog: a catch-up takes the account's state row
``FOR UPDATE``, so two processes never apply one version twice, and writes the rows and the new
version in one transaction.

Full text is a ``tsvector`` (the ``english`` configuration: stemming and stop words, as FTS5's
porter tokenizer) under a GIN index. Its score has BM25's shape with the term frequency saturated
at one: each query term a row holds adds the term's inverse document frequency, and the sum is
divided by ``1 + ln(1 + distinct words of the row)``, so rarer terms weigh more and long rows do
not win by length, as in FTS5. (Per term ``ts_rank`` cost three times as much per row and ranked no
better: LoCoMo R@10 0.7840 against 0.7839.) Search standardises each retriever's scores over its
candidates, so only their order and spread matter, not their scale.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.index.catalog import sync
from soulpass.index.catalog.catalog import CatalogStatus
from soulpass.index.catalog.query import Filters, neighbour_sql, query_terms
from soulpass.index.catalog.query import filter_sql as query_filter_sql
from soulpass.index.catalog.rows import COLUMNS, CatalogRow
from soulpass.index.catalog.sync import CatalogWrite, CatchUpReport, Progress, version_stamp
from soulpass.index.pg import term_weights
from soulpass.index.pg.term_weights import TermWeights
from soulpass.store.contract import AccountBackend, VersionEntry

log = logging.getLogger(__name__)

__all__ = ["FTS_SQL", "TERMS_SQL", "PgCatalog", "filter_sql", "fts_sql", "term_params"]

_SELECT = ", ".join(f"c.{col}" for col in COLUMNS)
_COPY_BATCH = 5_000
# The query's terms as full-text queries, parsed once, with their weights, in their order (rarest
# first): a CTE ``terms`` taking two parameters (``term_params``).
TERMS_SQL = ("terms AS MATERIALIZED (SELECT plainto_tsquery('english', t.term) AS q, t.idf, t.n"
             " FROM unnest(%s::text[], %s::float8[]) WITH ORDINALITY AS t(term, idf, n))")
# A row ``c``'s full-text score: the weights of the terms its vector holds, summed in the terms'
# order (as ``_rank_by_index`` sums them: the same score to the last bit), over its length; NULL
# where it holds none. One statement text for any number of terms (prepared once, as psycopg does
# with a statement run five times): for statements that score a search's few candidates. The
# vector is read in place: it stays in the row (``schema._SEARCH_READS``) unless the row outgrows a
# page. The filters come before the match in each WHERE, so the cheap ones (kind, tags) rule a row out first.
FTS_SQL = "(SELECT sum(t.idf ORDER BY t.n) FROM terms AS t WHERE c.tsv @@ t.q) / (1 + ln(1 + length(c.tsv)))"


def fts_sql(terms: int) -> str:
    """``FTS_SQL`` as one expression per row for a query of ``terms`` terms, each term's query and
    weight read once per statement (every weight is above 0, so a row holding none is NULL): less
    than half the cost per row of a subquery over ``terms``, for the statement that ranks many rows
    (``_rank_by_scan``). Its text changes with the number of terms, and a new text is planned anew
    (a statement scoring a search's few candidates keeps ``FTS_SQL``'s one text)."""
    weights = " + ".join(f"(CASE WHEN c.tsv @@ (SELECT q FROM terms WHERE n = {n})"
                         f" THEN (SELECT idf FROM terms WHERE n = {n}) ELSE 0 END)" for n in range(1, terms + 1))
    return f"NULLIF({weights or '0'}, 0) / (1 + ln(1 + length(c.tsv)))"


RANKED_ROWS = 5_000  # the most matching rows a full-text search ranks (see ``fts_search``)
SETTLE_WAIT_MS = 2_000  # how long ``settle`` waits for a table another ANALYZE or VACUUM holds


def filter_sql(filters: Filters, alias: str = "c") -> tuple[str, list[Any]]:
    """``soulpass.index.catalog.query.filter_sql`` for ``index_rows AS alias``."""
    return query_filter_sql(filters, alias, postgres=True)


def term_params(weights: Sequence[tuple[str, float, int]]) -> tuple[list[str], list[float]]:
    """``TERMS_SQL``'s two parameters from ``PgCatalog``'s weights: the terms and their weights."""
    return [t for t, _, _ in weights], [idf for _, idf, _ in weights]


def _row(values: Sequence[Any]) -> CatalogRow:
    """A row as ``CatalogRow.from_sql`` reads it (tags come back as a list, not JSON)."""
    out = list(values)
    out[COLUMNS.index("tags")] = json.dumps(list(out[COLUMNS.index("tags")] or []))
    return CatalogRow.from_sql(tuple(out))


def _values(row: CatalogRow) -> tuple[Any, ...]:
    values = list(row.to_sql())
    values[COLUMNS.index("tags")] = list(row.tags)
    return tuple(values)


class _PgTables:
    """:class:`soulpass.index.catalog.sync.CatalogTables` over one account's rows: processes
    following the account queue on its state row, taken ``FOR UPDATE`` in each write."""

    def __init__(self, catalog: PgCatalog) -> None:
        self.catalog = catalog

    def stamp(self) -> tuple[int, str]:
        with self.catalog.db.connection() as conn:
            version, stamp, _ = self.catalog._state(conn)
        return version, stamp

    @contextlib.contextmanager
    def writing(self) -> Iterator[CatalogWrite]:
        with self.catalog.db.connection() as conn, conn.transaction():
            yield _PgWrite(conn, self.catalog.account, self.catalog._state(conn, lock=True)[0])


class _PgWrite:
    """One write of the PostgreSQL catalog, buffered: ``finish`` sends the closings as one UPDATE
    and the rows with COPY (a bulk version of 100,000 records is a few statements, not 200,000).
    A rebuild (after ``clear``) copies straight into the table; a catch-up copies into a temporary
    table and inserts what is not catalogued yet. Closings only touch copies older than the closing
    version, so they and the inserts of that version commute."""

    def __init__(self, conn: Any, account: int, version: int) -> None:
        self.conn, self.account, self.version = conn, account, version
        self.bulk = False
        self._pending: list[tuple[Any, ...]] = []
        self._seen: set[tuple[str, int]] = set()
        self._closes: dict[str, list[tuple[str, int]]] = {"id": [], "path": []}

    def insert(self, row: CatalogRow) -> bool:
        key = (row.id, row.version)
        if key in self._seen:
            return False
        self._seen.add(key)
        self._pending.append((self.account, *_values(row)))
        if self.bulk and len(self._pending) >= _COPY_BATCH:
            self._copy("index_rows")
        return True

    def close(self, rid: str, version: int) -> int:
        self._closes["id"].append((rid, version))
        return 0  # counted by ``finish``

    def close_path(self, path: str, version: int) -> int:
        self._closes["path"].append((path, version))
        return 0

    def clear(self) -> None:
        self.conn.execute("DELETE FROM index_rows WHERE account_id = %s", (self.account,))
        self.bulk = True

    def _copy(self, table: str) -> None:
        with self.conn.cursor().copy(f"COPY {table} (account_id, {', '.join(COLUMNS)}) FROM STDIN") as copy:
            for values in self._pending:
                copy.write_row(values)
        self._pending.clear()

    def finish(self, version: int, entry: VersionEntry | None, *, rebuilt: bool = False) -> int:
        """Send what is buffered and stamp ``version``; returns how many copies were closed."""
        closed = 0
        for column, todo in self._closes.items():
            if todo:
                closed += int(self.conn.execute(
                    "UPDATE index_rows AS r SET replaced_at = u.v,"
                    " valid_to = CASE WHEN r.valid_to IS NULL OR r.valid_to > u.v THEN u.v ELSE r.valid_to END"
                    " FROM unnest(%s::text[], %s::int[]) AS u(key, v)"
                    f" WHERE r.account_id = %s AND r.{column} = u.key AND r.replaced_at IS NULL AND r.version < u.v",
                    ([k for k, _ in todo], [v for _, v in todo], self.account)).rowcount)
                todo.clear()
        if self._pending and self.bulk:
            self._copy("index_rows")
        elif self._pending:
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS incoming_rows (LIKE index_rows INCLUDING DEFAULTS)"
                              " ON COMMIT DELETE ROWS")
            self._copy("incoming_rows")
            cols = ", ".join(("account_id", *COLUMNS))
            self.conn.execute(f"INSERT INTO index_rows ({cols}) SELECT {cols} FROM incoming_rows"
                              " ON CONFLICT (account_id, id, version) DO NOTHING")
            self.conn.execute("TRUNCATE incoming_rows")
        self.conn.execute("UPDATE index_state SET store_version = %s, store_timestamp = %s"
                          + (", generation = generation + 1" if rebuilt else "") + " WHERE account_id = %s",
                          (version, version_stamp(entry), self.account))
        return closed


class PgCatalog:
    """The catalog of the account ``account_id`` in ``db`` (a ``soulpass.store.postgres`` Database);
    implements ``soulpass.index.contract.IndexCatalog``. Safe to share between threads."""

    def __init__(self, db: Any, account_id: int, name: str) -> None:
        self.db, self.account, self.name = db, account_id, name
        self.path = f"postgresql index of {name}"
        self._lock = threading.RLock()
        self.terms = TermWeights(account_id, self._state)  # the full-text query terms' weights
        with db.connection() as conn:
            conn.execute("INSERT INTO index_state (account_id) VALUES (%s) ON CONFLICT DO NOTHING", (account_id,))

    def close(self) -> None:
        """Nothing to release: connections are the database's pool's."""

    def __enter__(self) -> PgCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- state ---------------------------------------------------------------------------

    def settle(self, *also: str) -> None:
        """``ANALYZE`` the catalog's table (and the tables ``also`` names: the vectors'), so that the
        planner knows rows written in bulk. Not done, with a warning, where the statistics cannot be
        taken now (a lock held too long): autovacuum will, and the search is right either way."""
        import psycopg

        tables = ", ".join(("index_rows", *also))
        try:
            with self.db.connection() as conn:
                conn.execute(f"SET LOCAL lock_timeout = '{SETTLE_WAIT_MS}ms'")
                conn.execute(f"ANALYZE {tables}")
        except psycopg.errors.LockNotAvailable as exc:
            log.warning("statistics of %s not taken now: %s", tables, exc)

    def _state(self, conn: Any, *, lock: bool = False) -> tuple[int, str, int]:
        row = conn.execute("SELECT store_version, store_timestamp, generation FROM index_state WHERE account_id = %s"
                           + (" FOR UPDATE" if lock else ""), (self.account,)).fetchone()
        if row is None:  # the index was dropped (a forget): start again
            conn.execute("INSERT INTO index_state (account_id) VALUES (%s) ON CONFLICT DO NOTHING", (self.account,))
            return self._state(conn, lock=lock)
        return int(row[0]), str(row[1]), int(row[2])

    def born(self) -> str | None:
        """What tells this index from one made after it was dropped (None: dropped, not made again)."""
        with self.db.reading() as conn:
            row = conn.execute("SELECT born FROM index_state WHERE account_id = %s", (self.account,)).fetchone()
        return None if row is None else str(row[0])

    def version(self) -> int:
        """The store version this catalog reflects."""
        with self.db.reading() as conn:
            return self._state(conn)[0]

    def generation(self) -> int:
        """How many times the catalog was rebuilt (the embedding backlog starts again after one)."""
        with self.db.reading() as conn:
            return self._state(conn)[2]

    def status(self) -> CatalogStatus:
        with self.db.connection() as conn:
            version, _, generation = self._state(conn)
            rows = conn.execute("SELECT count(*) FROM index_rows WHERE account_id = %s", (self.account,)).fetchone()[0]
            by_kind = dict(conn.execute("SELECT kind, count(*) FROM index_rows WHERE account_id = %s"
                                        " AND valid_to IS NULL"
                                        " GROUP BY kind ORDER BY kind", (self.account,)).fetchall())
        return CatalogStatus(path=self.path, store_version=version, schema_version=3, generation=generation,
                             rows=int(rows), in_force={k: int(v) for k, v in by_kind.items()},
                             fulltext="postgresql (tsvector, english)")

    # --- following the store ---------------------------------------------------------------

    def catch_up(self, store: AccountBackend) -> CatchUpReport:
        """Apply the versions newer than the catalog's, one transaction each (idempotent; processes
        following the same account queue on its state row). A catalog ahead of the store, or whose
        last version has another timestamp in the log (the account was replaced), is rebuilt."""
        with self._lock:
            try:
                return sync.catch_up(_PgTables(self), store)
            except _db_errors() as exc:
                raise BackendUnavailable(f"the {self.path} cannot be brought up to date: {exc}") from exc

    def rebuild(self, store: AccountBackend, progress: Progress | None = None) -> CatchUpReport:
        """Recreate every row from the store's copies in one transaction (searches see the old rows
        until it commits); ``progress(done, total)`` every 1,000 copies and at the end."""
        with self._lock:
            try:
                return sync.rebuild(_PgTables(self), store, progress)
            except _db_errors() as exc:
                raise BackendUnavailable(f"the {self.path} cannot be rebuilt: {exc}") from exc

    # --- full text -----------------------------------------------------------------------

    @staticmethod
    def _match(weights: list[tuple[str, float, int]]) -> str:
        """A tsquery ORing the terms (tokens are letters and digits: nothing to escape)."""
        return " | ".join(f"'{t}'" for t, _, _ in weights)

    def fts_search(self, query: str, k: int = 10, filters: Filters | None = None) -> list[tuple[str, float]]:
        """The ``k`` best rows for free text, best first, as ``(id, score)``; ties by id.

        Every matching row is ranked while the terms match at most ``RANKED_ROWS`` rows in all: each
        term's rows found (``_rank_by_index``) and their weights summed over the row's length. Past
        that (common words at scale), the rows ranked are those matching the rarest terms, up to
        ``RANKED_ROWS`` (when every term is that common, the first ``RANKED_ROWS`` rows found): a
        row that matches only the commonest terms may be missed here, and is still found by dense
        search, whose candidates get exact full-text scores (``fts_scores``)."""
        if type(k) is not int or k < 0:
            raise InvalidInput(f"k must be a non-negative integer, not {k!r}", field="k")
        terms = query_terms(query)
        if not terms or k == 0:
            return []
        with self.db.reading() as conn:
            weights = self.terms.counted(conn, terms)
            if not weights:
                return []
            ranked: list[tuple[str, float, int]] = []
            seen = 0
            for w in weights:  # rarest first; a term counted up to DF_CAP matches at least that many
                if ranked and (w[2] >= term_weights.DF_CAP or seen + w[2] > RANKED_ROWS):
                    break
                ranked.append(w)
                seen += w[2]
            if len(ranked) == len(weights):  # every term ranked: each one's rows found by the index
                return self._rank_by_index(conn, weights, filters or Filters(), k)
            return self._rank_by_scan(conn, weights, ranked, filters or Filters(), k)

    def _rank_by_index(self, conn: Any, weights: list[tuple[str, float, int]], filters: Filters,
                       k: int) -> list[tuple[str, float]]:
        """The ``k`` best rows matching any term: each term's rows (found by the GIN index, or by
        reading the account's rows, as the planner sees fit) and its weight summed per row, in the
        terms' order (as ``fts_sql`` sums them: the same score to the last bit, whatever order the
        rows were found in), over the row's length, taken with each match (the filters pass one copy
        of a row: its length is that copy's) below the sort the sum needs (``OFFSET 0``: the sort
        carries numbers, not vectors) instead of each matching row read again for it."""
        where, params = filter_sql(filters)
        rows = conn.execute(
            f"WITH {TERMS_SQL} SELECT m.id, m.w / (1 + ln(1 + m.size)) AS s FROM (SELECT x.id,"
            " sum(x.idf ORDER BY x.n) AS w, max(x.size) AS size FROM (SELECT c.id, t.idf, t.n,"
            " length(c.tsv) AS size FROM terms AS t JOIN index_rows AS c ON c.tsv @@ t.q"
            f" WHERE c.account_id = %s AND {where} OFFSET 0) AS x GROUP BY x.id) AS m ORDER BY s DESC, m.id LIMIT %s",
            (*term_params(weights), self.account, *params, k)).fetchall()
        return [(rid, float(s)) for rid, s in rows]

    def _rank_by_scan(self, conn: Any, weights: list[tuple[str, float, int]], ranked: list[tuple[str, float, int]],
                      filters: Filters, k: int) -> list[tuple[str, float]]:
        """The ``k`` best of the rows (up to ``RANKED_ROWS``) matching a ``ranked`` term, each scored
        by every term of ``weights`` (``fts_sql``): the rows read in turn."""
        where, params = filter_sql(filters)
        # The inner LIMIT never cuts while the ranked terms match at most RANKED_ROWS rows; when
        # even the rarest term is commoner (every term common), it bounds the work.
        rows = conn.execute(
            f"WITH {TERMS_SQL} SELECT c.id, {fts_sql(len(weights))} AS s FROM (SELECT c.id, c.tsv FROM index_rows AS c"
            f" WHERE c.account_id = %s AND {where} AND c.tsv @@ to_tsquery('english', %s) LIMIT %s) AS c"
            " ORDER BY s DESC, c.id LIMIT %s",
            (*term_params(weights), self.account, *params, self._match(ranked), RANKED_ROWS, k)).fetchall()
        return [(rid, float(s)) for rid, s in rows]

    def fts_scores(self, query: str, ids: Iterable[str], filters: Filters | None = None) -> dict[str, float]:
        """Full-text scores of the given rows that pass the filters and match a term."""
        terms = query_terms(query)
        wanted = list(dict.fromkeys(ids))
        if not terms or not wanted:
            return {}
        where, params = filter_sql(filters or Filters())
        with self.db.reading() as conn:
            weights = self.terms.counted(conn, terms)
            if not weights:
                return {}
            rows = conn.execute(
                f"WITH {TERMS_SQL} SELECT c.id, {FTS_SQL} FROM (SELECT c.id, c.tsv FROM index_rows AS c"
                f" WHERE c.account_id = %s AND c.id = ANY(%s) AND {where} AND c.tsv @@ to_tsquery('english', %s)"
                " OFFSET 0) AS c",
                (*term_params(weights), self.account, wanted, *params, self._match(weights))).fetchall()
        return {rid: float(s) for rid, s in rows}

    # --- lookups -------------------------------------------------------------------------

    def passing(self, ids: Iterable[str], filters: Filters | None = None) -> set[str]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        where, params = filter_sql(filters or Filters())
        with self.db.reading() as conn:
            return {rid for (rid,) in conn.execute(
                f"SELECT c.id FROM index_rows AS c WHERE c.account_id = %s AND c.id = ANY(%s) AND {where}",
                (self.account, wanted, *params))}

    def neighbours(self, ids: Iterable[str], kinds: Sequence[str], filters: Filters | None = None,
                   ) -> dict[str, tuple[str | None, str | None]]:
        """For each given row of ``kinds`` with a session: the rows just before and after it in that
        session by event time (then id), among the rows of ``kinds`` passing the filters."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or not kinds:
            return {}
        select, own, params, own_params = neighbour_sql(filters, kinds, "index_rows", postgres=True)
        sql = f"SELECT {select} FROM index_rows AS c WHERE c.account_id = %s AND c.id = ANY(%s) AND {own}"
        with self.db.reading() as conn:
            found = conn.execute(sql, (*params, self.account, wanted, *own_params)).fetchall()
        return {rid: (before, after) for rid, before, after in found}

    def _copies(self, columns: str, ids: list[str], as_of_version: int | None) -> list[tuple[Any, ...]]:
        sql = f"SELECT {columns} FROM index_rows AS c WHERE c.account_id = %s AND c.id = ANY(%s)"
        params: list[Any] = [self.account, ids]
        if as_of_version is not None:
            sql += " AND c.version <= %s AND (c.replaced_at IS NULL OR c.replaced_at > %s)"
            params += [as_of_version, as_of_version]
        with self.db.reading() as conn:
            return list(conn.execute(sql + " ORDER BY c.id, c.version", params).fetchall())

    def get(self, ids: Iterable[str], as_of_version: int | None = None) -> list[CatalogRow]:
        """Rows for ``ids`` in the order given: the latest copy of each, or the one at ``as_of_version``."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        latest = {row.id: row for row in map(_row, self._copies(_SELECT, wanted, as_of_version))}
        return [latest[i] for i in wanted if i in latest]

    def sessions(self, ids: Iterable[str], as_of_version: int | None = None) -> dict[str, str | None]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        return {rid: session for rid, session in self._copies("c.id, c.session_id", wanted, as_of_version)}

    def ids_matching(self, filters: Filters | None = None) -> list[str]:
        where, params = filter_sql(filters or Filters())
        with self.db.reading() as conn:
            return [rid for (rid,) in conn.execute(
                f"SELECT c.id FROM index_rows AS c WHERE c.account_id = %s AND {where} ORDER BY c.id",
                (self.account, *params))]

    def few_matching(self, filters: Filters, most: int) -> list[str] | None:
        where, params = filter_sql(filters)
        with self.db.reading() as conn:
            found = [rid for (rid,) in conn.execute(
                f"SELECT c.id FROM index_rows AS c WHERE c.account_id = %s AND {where} LIMIT %s",
                (self.account, *params, most + 1))]
        return None if len(found) > most else sorted(found)

    def rows(self) -> Iterator[CatalogRow]:
        """Every row, by id and version (audits, comparisons)."""
        with self.db.connection() as conn:
            fetched = conn.execute(f"SELECT {_SELECT} FROM index_rows AS c WHERE c.account_id = %s"
                                   " ORDER BY c.id, c.version", (self.account,)).fetchall()
        yield from map(_row, fetched)

    def with_semantic_hash(self, hashes: Iterable[str], filters: Filters | None = None) -> list[CatalogRow]:
        wanted = [h for h in dict.fromkeys(hashes) if h]
        if not wanted:
            return []
        where, params = filter_sql(filters or Filters())
        with self.db.reading() as conn:
            fetched = conn.execute(
                f"SELECT {_SELECT} FROM index_rows AS c WHERE c.account_id = %s AND c.semantic_hash = ANY(%s)"
                f" AND {where} ORDER BY c.event_us, c.id", (self.account, wanted, *params)).fetchall()
        return [_row(values) for values in fetched]

    def delete_rows(self, keys: Iterable[tuple[str, int]]) -> int:
        """Forget the rows ``(id, version)`` (``soulpass prune``); returns how many were deleted."""
        todo = list(keys)
        if not todo:
            return 0
        with self.db.connection() as conn:
            return int(conn.execute(
                "DELETE FROM index_rows AS r USING unnest(%s::text[], %s::int[]) AS k(id, version)"
                " WHERE r.account_id = %s AND r.id = k.id AND r.version = k.version",
                ([rid for rid, _ in todo], [v for _, v in todo], self.account)).rowcount)

    def rows_after(self, kinds: Sequence[str], after: tuple[int, str], limit: int) -> list[CatalogRow]:
        """Rows in force of ``kinds`` with text, after ``(version, id)`` in that order (the embedding
        backlog's walk)."""
        with self.db.reading() as conn:
            fetched = conn.execute(
                f"SELECT {_SELECT} FROM index_rows AS c WHERE c.account_id = %s AND (c.version, c.id) > (%s, %s)"
                " AND c.valid_to IS NULL AND c.kind = ANY(%s) AND c.text <> '' ORDER BY c.version, c.id LIMIT %s",
                (self.account, after[0], after[1], list(kinds), limit)).fetchall()
        return [_row(values) for values in fetched]


def _db_errors() -> tuple[type[BaseException], ...]:
    import psycopg

    return (psycopg.OperationalError,)


