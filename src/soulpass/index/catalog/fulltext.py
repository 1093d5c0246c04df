"""Full-text search of the SQLite catalog: BM25 by FTS5 or by the optional tantivy sidecar, with
the filters checked the cheapest way for how many rows pass them (``FullTextSearch.search``)."""

from __future__ import annotations

import itertools
import json
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .query import Filters, filter_sql
from .sidecar import TantivySidecar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .columns import ColumnStamp

__all__ = ["DEFAULT_FULLTEXT", "FULLTEXT_ENGINES", "FullText", "FullTextSearch"]

FullText = Literal["fts5", "tantivy"]
FULLTEXT_ENGINES: tuple[FullText, ...] = ("fts5", "tantivy")
# What ranks full text when neither the caller nor the catalog names an engine. Never decided by what
# is importable: tantivy's BM25 is on another scale, so a switch is a configuration change.
DEFAULT_FULLTEXT: FullText = "fts5"
_WIDEST = 4096  # the most sidecar hits checked against broad filters before searching among the passing rows
_NARROW = 100_000  # the most passing rows a sidecar search is restricted to; beyond, FTS5 ranks
_FEW = 2_000  # selective filters passing at most this many rows skip the over-fetch
_ALL_MATCHES = 20_000  # FTS5 matches of a query scored in one pass and kept for its candidates' scores
Mask = Callable[[Filters], "tuple[npt.NDArray[np.bool_], ColumnStamp] | None"]


class FullTextSearch:
    """The full text of one catalog connection; its caller (the catalog) holds the catalog's lock."""

    def __init__(self, conn: sqlite3.Connection, path: Path, tantivy: Any, mask: Mask) -> None:
        """``tantivy``: the tantivy module when the sidecar ranks (else FTS5); ``mask``: the rows
        passing broad filters (``Catalog.filter_mask``)."""
        self._conn, self.path, self._tantivy, self._mask = conn, path, tantivy, mask
        self._matches: tuple[tuple[Any, ...], dict[int, float] | None] | None = None  # _fts5_matches' last query
        self._sidecar: TantivySidecar | None = None
        self._sidecar_generation = self._sidecar_upto = -1

    def search(self, terms: list[str], k: int, filters: Filters) -> list[tuple[str, float]]:
        """The one place the full-text strategy is chosen. BM25 ranks every match the same way in
        each; what differs is how the filters are checked, so the rule goes by how many rows pass:

        1. a broad filter the filter columns answer (a speaker, a time range): each of the best
           hits is checked against the passing rows' mask in numpy, asking for as many as the
           passing share needs (``_search_masked``; with tantivy and a handful of passing rows,
           a search among those rows);
        2. with the tantivy sidecar (``fulltext="tantivy"``): a selective filter with few passing
           rows is searched among them; else the best hits are over-fetched and checked in SQLite,
           widening while short, then searched among the passing rows, or by FTS5 when too many
           pass (``_search_sidecar``);
        3. FTS5: a selective filter with few passing rows (a tag on a handful of statements) is
           ranked among them from every match's score, kept for the query (``_fts5_among``); else
           the best matches ranked alone and checked in SQLite (twice, then eight times k), else
           every passing match ranked in one SQL query (``_search_fts5``).
        """
        where, params = filter_sql(filters)
        sidecar = self.synced_sidecar()
        masked = self._search_masked(sidecar, terms, k, filters, where, params)
        if masked is not None:
            return masked
        if sidecar is not None:
            return self._search_sidecar(sidecar, terms, k, filters, where, params)
        if filters.selective and (among := self._fts5_among(terms, k, where, params)) is not None:
            return among
        return self._search_fts5(terms, k, where, params)

    def _passing(self, hits: list[tuple[int, float]], where: str, params: list[Any]) -> list[tuple[float, str]]:
        """The hits whose rows pass the filters, as ``(-score, id)`` in result order."""
        score = dict(hits)
        # CROSS JOIN: look the hits up by row id; left to itself the planner may scan a whole
        # kind through its index instead (190 ms instead of 0.2 at 1M rows).
        return sorted((-score[row], rid) for row, rid in self._conn.execute(
            f"SELECT c.row, c.id FROM json_each(?) AS hit CROSS JOIN catalog AS c ON c.row = hit.value WHERE {where}",
            (json.dumps(list(score)), *params)))

    @staticmethod
    def _exact(hits: list[tuple[int, float]], kept: list[tuple[float, str]], k: int, limit: int) -> bool:
        # Rows not fetched score at most the last hit: the top k is settled when it ends strictly
        # above that score, or when nothing was left out.
        return len(hits) < limit or (len(kept) >= k and -kept[k - 1][0] > hits[-1][1])

    def _search_masked(self, sidecar: TantivySidecar | None, terms: list[str], k: int, filters: Filters, where: str,
                       params: list[Any]) -> list[tuple[str, float]] | None:
        """Broad filters the filter columns answer (a speaker, a time range): the best hits are
        checked against the passing rows' mask, asking for as many as the passing share needs
        (and four times more while short); only the kept ones go to SQLite, which confirms them.
        None: not for these filters, or the share is too small (the other paths take over)."""
        if not filters.selective:  # kinds alone: nearly every hit passes, the plain paths are as fast
            return None
        got = self._mask(filters)
        if got is None:
            return None
        mask = got[0]
        passing = int(mask.sum())
        if passing == 0:
            return []
        if sidecar is not None and passing <= _FEW:
            rows = [int(r) for r in mask.nonzero()[0]]
            return self._search_among(sidecar, terms, k, rows, where, params)
        limit = max(2 * k, 64, math.ceil(2 * k * len(mask) / passing))
        while limit <= _WIDEST * 4:
            hits = sidecar.search(terms, limit) if sidecar is not None else self._fts5_hits(terms, limit)
            kept = self._passing([(row, score) for row, score in hits if row >= len(mask) or mask[row]],
                                 where, params)
            if self._exact(hits, kept, k, limit):
                return [(rid, -s) for s, rid in kept[:k]]
            limit *= 4
        return None

    def _fts5_hits(self, terms: list[str], limit: int) -> list[tuple[int, float]]:
        """The best ``limit`` FTS5 matches of the OR of ``terms`` as ``(row, score)``, higher better."""
        matches = self._fts5_matches(terms)
        if matches is not None:
            return list(itertools.islice(matches.items(), limit))  # kept in rank order
        return [(row, -s) for row, s in self._conn.execute(
            "SELECT rowid, bm25(catalog_fts) AS s FROM catalog_fts WHERE catalog_fts MATCH ? ORDER BY s LIMIT ?",
            (" OR ".join(f'"{t}"' for t in terms), limit))]

    def _fts5_matches(self, terms: list[str]) -> dict[int, float] | None:
        """Every FTS5 match of the OR of ``terms`` with its score (higher better), or None when
        there are more than ``_ALL_MATCHES``. FTS5 scores every match to rank them anyway; kept
        for the last query, the exact scores of the candidates (``fts_scores``) are lookups instead
        of a second pass (~5 ms whatever the candidates: it walks the terms' doclists again). The
        catalog changing, by this handle or another, drops what was kept."""
        state = (tuple(terms), self._conn.total_changes,
                 self._conn.execute("PRAGMA data_version").fetchone()[0])
        if self._matches is not None and self._matches[0] == state:
            return self._matches[1]
        cursor = self._conn.execute("SELECT rowid, bm25(catalog_fts) FROM catalog_fts WHERE catalog_fts MATCH ?",
                                    (" OR ".join(f'"{t}"' for t in terms),))
        found = cursor.fetchmany(_ALL_MATCHES + 1)
        cursor.close()
        # In rank order: best (lowest bm25) first, ties by row; the best few are then a slice.
        matches = None if len(found) > _ALL_MATCHES else {row: -s for s, row in sorted((s, r) for r, s in found)}
        self._matches = (state, matches)
        return matches

    def _fts5_among(self, terms: list[str], k: int, where: str, params: list[Any]) -> list[tuple[str, float]] | None:
        """The ``k`` best of the at most ``_FEW`` rows passing the filters, each scored by a lookup
        among the query's matches (``_fts5_matches``: scored once, and read again by the search's
        candidates); None where more rows pass, or the query matches too many rows to keep."""
        matches = self._fts5_matches(terms)
        if matches is None:
            return None
        ids = self._passing_ids(where, params, _FEW)
        if ids is None:
            return None
        ranked = sorted((-matches[row], rid) for row, rid in ids.items() if row in matches)
        return [(rid, -s) for s, rid in ranked[:k]]

    def _search_fts5(self, terms: list[str], k: int, where: str, params: list[Any]) -> list[tuple[str, float]]:
        match = " OR ".join(f'"{t}"' for t in terms)
        # Most searches ask for rows in force now, which nearly every hit is: rank the FTS matches
        # alone, keep the best few, filter those. BM25 over all matches costs the same either
        # way; only the join is saved. Twice k first (where nearly all pass, as a rule), eight
        # times when fewer than half did (the matches are kept: asking again is a lookup).
        for limit in (max(2 * k, 64), max(8 * k, 64)):
            hits = self._fts5_hits(terms, limit)
            kept = self._passing(hits, where, params)
            if self._exact(hits, kept, k, limit):
                return [(rid, -s) for s, rid in kept[:k]]
        # Narrow filters: rank every match that passes them (CROSS JOIN keeps FTS5 outermost).
        rows = self._conn.execute(
            "SELECT c.id, bm25(catalog_fts) AS s FROM catalog_fts CROSS JOIN catalog AS c ON c.row = "
            f"catalog_fts.rowid WHERE catalog_fts MATCH ? AND {where} ORDER BY s, c.id LIMIT ?",
            (match, *params, k)).fetchall()
        return [(rid, -s) for rid, s in rows]

    def _search_sidecar(self, sidecar: TantivySidecar, terms: list[str], k: int, filters: Filters, where: str,
                        params: list[Any]) -> list[tuple[str, float]]:
        if filters.selective:  # a session, an event, a tag: search among its rows from the start
            passing = self._passing_rows(where, params, _FEW)
            if passing is not None:
                return self._search_among(sidecar, terms, k, passing, where, params)
        # Broad filters pass nearly every hit: twice what is asked for settles the top k (checking
        # 8x as many rows cost ~2 ms a search at 1M rows); widen 16x while short.
        limit = max(2 * k, 64)
        while limit <= _WIDEST:  # broad filters: over-fetch, check the filters here, widen if short
            hits = sidecar.search(terms, limit)
            kept = self._passing(hits, where, params)
            if self._exact(hits, kept, k, limit):
                return [(rid, -s) for s, rid in kept[:k]]
            limit *= 16
        passing = self._passing_rows(where, params, _NARROW)
        if passing is None:
            return self._search_fts5(terms, k, where, params)
        return self._search_among(sidecar, terms, k, passing, where, params)

    def _passing_rows(self, where: str, params: list[Any], most: int) -> list[int] | None:
        """The row ids that pass the filters, or None when there are more than ``most``."""
        ids = self._passing_ids(where, params, most)
        return None if ids is None else list(ids)

    def _passing_ids(self, where: str, params: list[Any], most: int) -> dict[int, str] | None:
        """The rows that pass the filters with their ids, or None when there are more than ``most``."""
        rows = dict(self._conn.execute(f"SELECT c.row, c.id FROM catalog AS c WHERE {where} LIMIT {most + 1}", params))
        return None if len(rows) > most else rows

    def _search_among(self, sidecar: TantivySidecar, terms: list[str], k: int, rows: list[int], where: str,
                      params: list[Any]) -> list[tuple[str, float]]:
        if not rows:
            return []
        limit = k + 1
        while True:
            hits = sidecar.search(terms, limit, rows=rows)
            kept = self._passing(hits, where, params)
            if self._exact(hits, kept, k, limit):
                return [(rid, -s) for s, rid in kept[:k]]
            limit *= 8

    def synced_sidecar(self) -> TantivySidecar | None:
        """The sidecar of the current generation, caught up with the catalog; None means FTS5."""
        if self._tantivy is None:
            return None
        generation = int(self._conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
        if self._sidecar is None or self._sidecar_generation != generation:
            self._sidecar = TantivySidecar(self._tantivy, self.path, generation)
            self._sidecar_generation, self._sidecar_upto = generation, -1
        if self._sidecar_upto < 0:
            last = self._conn.execute("SELECT row FROM catalog WHERE text != '' ORDER BY row DESC LIMIT 1").fetchone()
            self._sidecar_upto = self._sidecar.indexed_upto(last[0] if last else None)
        newer = self._conn.execute("SELECT max(row) FROM catalog WHERE row > ? AND text != ''",
                                   (self._sidecar_upto,)).fetchone()[0]
        if newer is None:
            return self._sidecar
        if not self._sidecar.sync(self._conn):
            return None  # another process is writing it: answer from FTS5 this time
        self._sidecar_upto = newer
        return self._sidecar

    def scores(self, terms: list[str], rows: dict[int, str]) -> dict[str, float]:
        """BM25 of the given catalog rows (row -> id) that match a term, on the scale of ``search``."""
        sidecar = self.synced_sidecar()
        matches = self._fts5_matches(terms) if sidecar is None else None
        if matches is not None:  # every match scored already (this query's fts_search, as a rule)
            return {rid: matches[row] for row, rid in rows.items() if row in matches}
        if sidecar is not None:
            hits = sidecar.search(terms, len(rows), rows=list(rows))
        else:
            hits = [(row, -s) for row, s in self._conn.execute(
                "SELECT rowid, bm25(catalog_fts) FROM catalog_fts WHERE catalog_fts MATCH ? AND rowid IN "
                "(SELECT value FROM json_each(?))", (" OR ".join(f'"{t}"' for t in terms), json.dumps(list(rows))))]
        return {rows[row]: score for row, score in hits if row in rows}
