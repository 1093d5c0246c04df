"""A search's candidates fetched from PostgreSQL in few statements (``soulpass.index.gather.Gather``).

Step by step (``soulpass.index.gather.Stepwise``), gathering a search's candidates asks the
database five questions after its full-text hits: the nearest records (a filtered HNSW walk), the
full-text scores of the records found only by vector, the cosines of those found only by text, the
neighbours of every candidate in its session, and their sessions; and three more for the neighbours
the ranking adds. Each is a round trip and a statement planned and run on its own. Here the
full-text search runs on a connection of its own while one statement walks to the nearest records
and gives each its scores, session and neighbours; one more gives the full-text hits the walk did
not reach theirs; and the last three are one more.

It answers where the steps would walk the HNSW graph with the filter checked in the walk (the
vectors in the database, a broad filter: ``soulpass.index.dense.DatabaseDense.nearest``) and the
walk's first rows hold enough records; anywhere else, and where a record's passages fill the walk,
it asks the steps. Where a tag filter passes few rows (a question's check against the standing
statements), one statement is all: every passing row is scored, its neighbours read off the
passing rows, and the best of each score kept.
Same candidates, same scores (``tests/test_pg_gather.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from soulpass.index.catalog.query import Filters, neighbour_sides
from soulpass.index.dense import WALK_ROWS, DenseScores, best_of, broad
from soulpass.index.gather import Gathered, Stepwise
from soulpass.index.pg.catalog import FTS_SQL, TERMS_SQL, PgCatalog, filter_sql, term_params
from soulpass.index.pg.vectors import PgVectors
from soulpass.side_threads import beside

__all__ = ["SCORED_OUTRIGHT", "PgGather"]

# A tag filter (standing statements) passing at most this many rows: every one is scored, as many
# as the candidates a search scores anyway (the best 50 by each score and their neighbours).
SCORED_OUTRIGHT = 200


class PgGather:
    """``Gather`` over a PostgreSQL catalog and the pgvector vectors beside it."""

    def __init__(self, catalog: PgCatalog, vectors: PgVectors, dense: DenseScores) -> None:
        """``dense``: the vectors' scores for the steps (``DatabaseDense`` over ``vectors``)."""
        self.catalog, self.vectors = catalog, vectors
        self.steps = Stepwise(catalog, dense)

    def around(self, query: str, vector: Callable[[], Any], depth: int, filters: Filters,
               turn_kinds: Sequence[str]) -> Gathered:
        if filters.tag_groups() and broad(filters) and self.vectors.pgvector:
            found = self._outright(query, vector, depth, filters, turn_kinds)
            if found is not None:
                return found
        if not self.vectors.pgvector or not broad(filters):
            return self.steps.around(query, vector, depth, filters, turn_kinds)
        # The full-text search on a connection of its own while the nearest records are walked to.
        searching = beside().submit(self.catalog.fts_search, query, depth, filters)
        qvec = vector()
        if qvec is None:
            return self.steps.around_hits(query, None, dict(searching.result()), depth, filters, turn_kinds)
        fetch = WALK_ROWS * depth
        where, params = filter_sql(filters)
        linked, link_params = _links(filters, turn_kinds)
        account = self.catalog.account
        with self.vectors.walking(fetch) as conn:
            table, distance, query_vector = self.vectors.vector_sql(conn, qvec)
            terms, idfs = self._weights(conn, query)
            rows = conn.execute(
                f"WITH {TERMS_SQL}, walk AS MATERIALIZED (SELECT v.id, v.record, {distance} AS d FROM {table} AS v"
                " WHERE v.account_id = %s AND EXISTS (SELECT 1 FROM index_rows AS c WHERE c.account_id = v.account_id"
                f" AND c.id = v.record AND {where}) ORDER BY d LIMIT %s),"
                " near AS MATERIALIZED (SELECT record AS id FROM walk GROUP BY record"
                " ORDER BY min(d), (array_agg(id ORDER BY d, id))[1] LIMIT %s)"
                f" SELECT c.id, c.session_id, {FTS_SQL}, {_cosine(table, distance)}, {linked},"
                " (SELECT count(*) FROM walk), (SELECT count(*) FROM near)"
                " FROM (SELECT c.* FROM index_rows AS c WHERE c.account_id = %s"
                f" AND c.id IN (SELECT id FROM near) AND {where} OFFSET 0) AS c",
                (terms, idfs, query_vector, account, *params, fetch, depth, query_vector, *link_params,
                 account, *params)).fetchall()
        hits = dict(searching.result())
        walked, near = (rows[0][-2], rows[0][-1]) if rows else (0, 0)
        if near < depth and walked == fetch:  # a record's passages filled the walk: the steps walk again
            return self.steps.around_hits(query, qvec, hits, depth, filters, turn_kinds)
        walked_to = {r[0] for r in rows}
        if missing := [rid for rid in hits if rid not in walked_to]:  # each hit's cosine and neighbours
            with self.catalog.db.reading() as conn:
                table, distance, query_vector = self.vectors.vector_sql(conn, qvec)
                rows.extend(conn.execute(
                    f"SELECT c.id, c.session_id, NULL::float8, {_cosine(table, distance)}, {linked}"
                    f" FROM (SELECT c.* FROM index_rows AS c WHERE c.account_id = %s AND c.id = ANY(%s) AND {where}"
                    " OFFSET 0) AS c", (query_vector, *link_params, account, missing, *params)).fetchall())
        found = _gathered(rows, hits)
        found.links = {rid: (before, after) for rid, _, _, _, own, before, after, *_ in rows if own}
        return found

    def _outright(self, query: str, vector: Callable[[], Any], depth: int, filters: Filters,
                  turn_kinds: Sequence[str]) -> Gathered | None:
        """``around`` where a tag filter passes at most ``SCORED_OUTRIGHT`` rows (the standing
        statements a question is checked against): every one of them scored in one statement and
        the best ``depth`` by each score kept, where the full-text search, the walk through the
        nearest vectors (passing over most of the account's to find the few) and the neighbours
        would be statements of their own. The same candidates and scores; None where more rows pass
        (or there is no query vector)."""
        where, params = filter_sql(filters)
        account = self.catalog.account
        with self.catalog.db.reading() as conn:
            terms, idfs = self._weights(conn, query)  # while the query is embedded
            if (qvec := vector()) is None:
                return None
            table, distance, query_vector = self.vectors.vector_sql(conn, qvec)
            # A turn's neighbours pass the filters with turn kinds (``neighbour_sides``), a subset of
            # the kinds asked for: they are among the passing rows, next to it in its session.
            rows = conn.execute(
                f"WITH {TERMS_SQL}, passing AS MATERIALIZED (SELECT c.id, c.kind, c.session_id, c.event_us"
                f" FROM index_rows AS c WHERE c.account_id = %s AND {where} LIMIT %s),"
                " sides AS MATERIALIZED (SELECT id, lag(id) OVER w AS before, lead(id) OVER w AS after"
                " FROM passing WHERE kind = ANY(%s) AND session_id IS NOT NULL AND event_us IS NOT NULL"
                " WINDOW w AS (PARTITION BY session_id ORDER BY event_us, id))"
                f" SELECT c.id, c.session_id, {FTS_SQL}, {_cosine(table, distance)},"
                " s.id IS NOT NULL, s.before, s.after"
                " FROM (SELECT c.* FROM index_rows AS c WHERE c.account_id = %s AND c.id IN (SELECT id FROM passing)"
                f" AND {where} AND (SELECT count(*) FROM passing) <= %s OFFSET 0) AS c"
                " LEFT JOIN sides AS s ON s.id = c.id",
                (terms, idfs, account, *params, SCORED_OUTRIGHT + 1, list(turn_kinds), query_vector,
                 account, *params, SCORED_OUTRIGHT)).fetchall()
        if not rows and self.catalog.few_matching(filters, SCORED_OUTRIGHT) is None:
            return None  # too many pass (none pass: nothing found, as the search would find)
        every = _gathered(rows, {})
        ids = list(dict.fromkeys([*best_of(every.fts, depth), *best_of(every.dense, depth)]))
        kept = set(ids)
        return Gathered(ids=ids, fts={i: s for i, s in every.fts.items() if i in kept},
                        dense={i: cos for i, cos in every.dense.items() if i in kept},
                        sessions={i: session for i, session in every.sessions.items() if i in kept},
                        links={rid: (before, after) for rid, _, _, _, own, before, after in rows
                               if own and rid in kept})

    def scores(self, query: str, vector: Any, ids: Sequence[str], filters: Filters) -> Gathered:
        if vector is None or not self.vectors.pgvector or not ids:
            return self.steps.scores(query, vector, ids, filters)
        where, params = filter_sql(filters)
        with self.catalog.db.reading() as conn:
            table, distance, query_vector = self.vectors.vector_sql(conn, vector)
            terms, idfs = self._weights(conn, query)
            rows = conn.execute(
                f"WITH {TERMS_SQL} SELECT c.id, c.session_id, {FTS_SQL}, {_cosine(table, distance)}"
                " FROM (SELECT c.* FROM index_rows AS c WHERE c.account_id = %s AND c.id = ANY(%s)"
                f" AND {where} OFFSET 0) AS c",
                (terms, idfs, query_vector, self.catalog.account, list(dict.fromkeys(ids)), *params)).fetchall()
        return _gathered(rows, {})

    def _weights(self, conn: Any, query: str) -> tuple[list[str], list[float]]:
        return term_params(self.catalog.terms.of_query(conn, query))


def _cosine(table: str, distance: str) -> str:
    """A record's best cosine over its own and its passages' vectors (``PgVectors.best_per_record``)."""
    return (f"(SELECT max(-({distance})) FROM {table} AS v WHERE v.account_id = c.account_id"
            " AND v.record = c.id AND v.embedding IS NOT NULL)")


def _links(filters: Filters, turn_kinds: Sequence[str]) -> tuple[str, list[Any]]:
    """Three columns: whether a candidate ``c`` is a turn with neighbours (``PgCatalog.neighbours``'s
    condition), and the ids of the rows before and after it."""
    if not turn_kinds:
        return "false, NULL::text, NULL::text", []
    before, after, own, params, own_params = neighbour_sides(filters, turn_kinds, "index_rows", postgres=True)
    return f"{own}, {before}, {after}", [*own_params, *params, *params]


def _gathered(rows: Sequence[Sequence[Any]], hits: dict[str, float]) -> Gathered:
    """Candidates from rows ``(id, session, full-text score, cosine, ...)``; a full-text hit keeps
    the score its search gave."""
    fts = {rid: float(s) for rid, _, s, *_ in rows if s is not None}
    fts.update(hits)
    return Gathered(ids=list(dict.fromkeys([*hits, *(r[0] for r in rows)])), fts=fts,
                    dense={rid: float(cos) for rid, _, _, cos, *_ in rows if cos is not None},
                    sessions={rid: session for rid, session, *_ in rows})

