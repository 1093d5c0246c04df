"""The catalog of one account: rows for every stored copy, full-text search, and catch-up."""

from __future__ import annotations

import itertools
import json
import logging
import math
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.store.contract import AccountBackend

from . import sync
from .kept import Kept, fetch_rows, fetch_sessions, last_row
from .query import Filters, filter_sql, neighbour_sql, query_terms
from .rows import COLUMNS, CatalogRow
from .schema import SCHEMA_VERSION, configure, create, transaction
from .sidecar import TantivySidecar, tantivy_module
from .sync import CatchUpReport, Progress, SqliteTables, logged_entry, version_stamp

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .columns import CatalogMasks, ColumnStamp

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_FULLTEXT", "Catalog", "CatalogStatus", "CatchUpReport", "FullText", "catalog_file", "catalog_path",
           "catch_up", "logged_entry", "remove_catalog", "version_stamp"]

CATALOG_NAME = "catalog.sqlite"  # in the account's index folder (AccountBackend.index_location().folder)
_SELECT = ", ".join(f"c.{col}" for col in COLUMNS)
_WIDEST = 4096  # the most sidecar hits checked against broad filters before searching among the passing rows
_NARROW = 100_000  # the most passing rows a sidecar search is restricted to; beyond, FTS5 ranks
_FEW = 2_000  # selective filters passing at most this many rows skip the over-fetch
_ALL_MATCHES = 20_000  # FTS5 matches of a query scored in one pass and kept for its candidates' scores
FullText = Literal["fts5", "tantivy"]
FULLTEXT_ENGINES: tuple[FullText, ...] = ("fts5", "tantivy")
# What ranks full text when neither the caller nor the catalog names an engine. Never decided by what
# is importable: tantivy's BM25 is on another scale, so a switch is a configuration change.
DEFAULT_FULLTEXT: FullText = "fts5"
# Lookups of given ids go through the (id, version) key: left to itself the planner may walk a
# whole kind through its index instead and test each row against the id list.
_BY_ID = "catalog AS c INDEXED BY sqlite_autoindex_catalog_1"


@dataclass(frozen=True)
class CatalogStatus:
    path: str
    store_version: int
    schema_version: int
    generation: int
    rows: int
    in_force: dict[str, int]
    fulltext: str  # the engine recorded in the catalog ("fts5" or "tantivy"), or "fts5 (default)"


def catalog_path(store: AccountBackend) -> Path:
    return store.index_location().folder / CATALOG_NAME


def catalog_file(store: AccountBackend) -> str:
    """The catalog as reports name it: by the index folder's name (``index/catalog.sqlite``)."""
    return f"{store.index_location().folder.name}/{CATALOG_NAME}"


def remove_catalog(store: AccountBackend) -> None:
    """Delete the account's catalog files and tantivy sidecars (derived: a rebuild makes them again).
    Nobody may have the catalog open."""
    remove_catalog_files(catalog_path(store))


def remove_catalog_files(path: Path) -> None:
    """Delete the catalog at ``path`` and everything derived from it beside it (filter columns,
    tantivy sidecars)."""
    for p in [*path.parent.glob(path.name + "*"), *path.parent.glob(path.stem + ".fulltext-*")]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def catch_up(store: AccountBackend) -> CatchUpReport:
    """Open the account's catalog, bring it up to the store's HEAD, close it."""
    with Catalog.open(store) as catalog:
        return catalog.catch_up(store)


class Catalog:
    """SQLite catalog in the account's index folder (``catalog_path``); safe to share between threads."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0, fulltext: FullText | None = None,
                 heal: bool = True) -> None:
        """``fulltext``: what ranks full text for this handle: "fts5" (SQLite's, always there) or
        "tantivy" (the sidecar, extra ``search``); None: the engine the catalog records
        (``record_fulltext``), else ``DEFAULT_FULLTEXT``. ``heal``: a damaged catalog file is deleted
        and started again (the next catch-up rebuilds it); False (an audit): it is reported."""
        if fulltext is not None and fulltext not in FULLTEXT_ENGINES:
            raise InvalidInput(f"fulltext must be one of {', '.join(FULLTEXT_ENGINES)}, not {fulltext!r}",
                               field="fulltext")
        self._tantivy: Any = None
        self._masks: CatalogMasks | None = None  # broad filters checked in numpy (columns.py), on first use
        self._matches: tuple[tuple[Any, ...], dict[int, float] | None] | None = None  # _fts5_matches' last query
        self._kept = Kept(rows=last_row)  # candidates' sessions and neighbours, while the catalog is unchanged
        self._sidecar: TantivySidecar | None = None
        self._sidecar_generation = self._sidecar_upto = -1
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        for attempt in (1, 2):
            self._conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            try:
                configure(self._conn, int(busy_timeout * 1000))
                if create(self._conn):
                    break
                problem = f"its schema is not version {SCHEMA_VERSION}"
            except sqlite3.Error as exc:
                if not _damaged(exc):
                    self._conn.close()
                    raise BackendUnavailable(f"cannot open the catalog {path}: {exc}", path=str(path)) from exc
                problem = f"it is damaged ({exc})"
            self._conn.close()
            if attempt == 2 or not heal:
                raise BackendUnavailable(f"cannot open the catalog {path}: {problem}; run `soulpass index rebuild`",
                                         path=str(path))
            # Derived data: made again, and the next catch-up rebuilds its rows from the store.
            log.warning("the catalog %s is deleted and rebuilt from the store: %s", path, problem)
            remove_catalog_files(path)
        self.fulltext: FullText = fulltext or self.recorded_fulltext() or DEFAULT_FULLTEXT
        if self.fulltext == "tantivy":
            self._tantivy = tantivy_module()
            if self._tantivy is None:
                self._conn.close()
                raise BackendUnavailable(f"the catalog {path} ranks full text with tantivy: install the 'search' "
                                         "extra (pip install 'soulpass[search]') or open it with fulltext='fts5'",
                                         path=str(path))

    @classmethod
    def open(cls, store: AccountBackend, *, busy_timeout: float = 30.0, fulltext: FullText | None = None,
             heal: bool = True) -> Catalog:
        return cls(catalog_path(store), busy_timeout=busy_timeout, fulltext=fulltext, heal=heal)

    def recorded_fulltext(self) -> FullText | None:
        """The full-text engine recorded in the catalog, if one was."""
        with self._lock:
            found = self._meta().get("fulltext")
        return found if found in FULLTEXT_ENGINES else None

    def record_fulltext(self, engine: FullText) -> None:
        """Record ``engine`` as the one that ranks this catalog's full text: every handle opened later
        without a choice of its own (another process, ``soulpass search``) uses it."""
        if engine not in FULLTEXT_ENGINES:
            raise InvalidInput(f"fulltext must be one of {', '.join(FULLTEXT_ENGINES)}, not {engine!r}",
                               field="fulltext")
        with self._lock, transaction(self._conn):
            self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('fulltext', ?)", (engine,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- state ---------------------------------------------------------------------------

    def _meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def version(self) -> int:
        """The store version this catalog reflects."""
        with self._lock:
            return int(self._meta()["store_version"])

    def status(self) -> CatalogStatus:
        with self._lock:
            meta = self._meta()
            rows = self._conn.execute("SELECT count(*) FROM catalog").fetchone()[0]
            by_kind = dict(self._conn.execute(
                "SELECT kind, count(*) FROM catalog WHERE valid_to IS NULL GROUP BY kind ORDER BY kind").fetchall())
        return CatalogStatus(path=str(self.path), store_version=int(meta["store_version"]),
                             schema_version=int(meta["schema_version"]), generation=int(meta["generation"]),
                             rows=rows, in_force=by_kind,
                             fulltext=meta.get("fulltext") or f"{DEFAULT_FULLTEXT} (default)")

    # --- following the store ---------------------------------------------------------------

    def catch_up(self, store: AccountBackend) -> CatchUpReport:
        """Apply the versions newer than the catalog's, one transaction each (idempotent).

        Only the copies those versions put are read (``store.changes``). A catalog that is ahead of the
        store, or whose last version has another timestamp in the log (the account was replaced),
        is rebuilt instead.
        """
        return self._following(lambda: sync.catch_up(SqliteTables(self._conn), store))

    def rebuild(self, store: AccountBackend, progress: Progress | None = None) -> CatchUpReport:
        """Recreate every row from the store's copies (``store.copies``), in one transaction:
        searches see the old catalog until it commits. ``progress(done, total)`` is called every
        1,000 copies and at the end."""
        return self._following(lambda: sync.rebuild(SqliteTables(self._conn), store, progress))

    def _following(self, follow: Callable[[], CatchUpReport]) -> CatchUpReport:
        with self._lock:
            try:
                report = follow()
                self._synced_sidecar()  # the search after a big catch-up should not pay for it
                return report
            except sqlite3.OperationalError as exc:
                raise BackendUnavailable(f"catalog {self.path} is busy or unwritable: {exc}",
                                         path=str(self.path)) from exc

    # --- queries -------------------------------------------------------------------------

    def fts_search(self, query: str, k: int = 10, filters: Filters | None = None) -> list[tuple[str, float]]:
        """The ``k`` best rows for free text by BM25, best first, as ``(id, score)``.

        Higher scores are better; their scale depends on the engine (tantivy's BM25 when the
        sidecar is in use, else FTS5's bm25 negated), so fuse by rank, not by score. Ties are
        broken by id, so the order is reproducible and survives a rebuild.
        """
        if type(k) is not int or k < 0:
            raise InvalidInput(f"k must be a non-negative integer, not {k!r}", field="k")
        terms = query_terms(query)
        if not terms or k == 0:
            return []
        filters = filters or Filters()
        with self._lock:
            return self._full_text(terms, k, filters)

    def _full_text(self, terms: list[str], k: int, filters: Filters) -> list[tuple[str, float]]:
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
        3. FTS5: the best matches ranked alone and checked in SQLite (twice, then eight times k),
           else every passing match ranked in one SQL query (``_search_fts5``).
        """
        where, params = filter_sql(filters)
        sidecar = self._synced_sidecar()
        masked = self._search_masked(sidecar, terms, k, filters, where, params)
        if masked is not None:
            return masked
        if sidecar is not None:
            return self._search_sidecar(sidecar, terms, k, filters, where, params)
        return self._search_fts5(terms, k, where, params)

    def fts_scores(self, query: str, ids: Iterable[str], filters: Filters | None = None) -> dict[str, float]:
        """BM25 scores of the given rows for ``query``, on the same scale as ``fts_search`` (rows
        that pass the filters and match at least one term; the others are left out)."""
        terms = query_terms(query)
        wanted = list(dict.fromkeys(ids))
        if not terms or not wanted:
            return {}
        with self._lock:
            rows = {row: rid for rid, found in self._rows_of(wanted, filters or Filters()).items() for row in found}
            if not rows:
                return {}
            sidecar = self._synced_sidecar()
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

    def passing(self, ids: Iterable[str], filters: Filters | None = None) -> set[str]:
        """The given ids whose rows pass the filters (in force now unless ``as_of_version``)."""
        wanted = list(dict.fromkeys(ids))
        with self._lock:
            return set(self._rows_of(wanted, filters or Filters())) if wanted else set()

    def _rows_of(self, wanted: list[str], filters: Filters) -> dict[str, tuple[int, ...]]:
        """The rows of each of ``wanted`` passing ``filters``, kept while the catalog is unchanged."""
        where, params = filter_sql(filters)
        return self._kept.get(self._conn, ("rows", filters), wanted,
                              lambda ids: fetch_rows(self._conn, _BY_ID, where, params, ids))

    def neighbours(self, ids: Iterable[str], kinds: Sequence[str], filters: Filters | None = None,
                   ) -> dict[str, tuple[str | None, str | None]]:
        """For each given row of one of ``kinds`` that has a session: the rows just before and after
        it in that session by event time (then id), among the rows of ``kinds`` passing the filters."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or not kinds:
            return {}
        select, own, params, own_params = neighbour_sql(filters, kinds, "catalog")
        sql = f"SELECT {select} FROM json_each(?) AS w CROSS JOIN {_BY_ID} ON c.id = w.value WHERE {own}"

        def fetch(missing: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
            found = self._conn.execute(sql, (*params, json.dumps(list(missing)), *own_params)).fetchall()
            return {rid: (before, after) for rid, before, after in found}

        with self._lock:
            return self._kept.get(self._conn, ("neighbours", tuple(kinds), filters), wanted, fetch)

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
        got = self.filter_mask(filters)
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
        rows = [row for (row,) in self._conn.execute(
            f"SELECT c.row FROM catalog AS c WHERE {where} LIMIT {most + 1}", params)]
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

    # --- the optional tantivy sidecar ------------------------------------------------------

    def _synced_sidecar(self) -> TantivySidecar | None:
        """The sidecar of the current generation, caught up with the catalog; None means FTS5."""
        if self._tantivy is None:
            return None
        generation = int(self._meta()["generation"])
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

    def filter_mask(self, filters: Filters) -> tuple[npt.NDArray[np.bool_], ColumnStamp] | None:
        """Whether each catalog row (by row number) passes ``filters``, from the filter columns
        caught up now, and what they reflect; None for filters only SQLite answers (``columns.py``)."""
        with self._lock:
            if self._masks is None:
                from .columns import CatalogMasks

                # Beside the catalog, named after it: remove_catalog removes it too.
                self._masks = CatalogMasks(self.path.with_name(self.path.name + ".columns.npz"))
            return self._masks.mask(self._conn, filters)

    def rows_in_force(self, ids: Iterable[str] | None = None) -> dict[str, int]:
        """The row number of each id's copy in force now (of the given ids, or of all)."""
        with self._lock:
            if ids is None:
                return dict(self._conn.execute("SELECT id, row FROM catalog WHERE valid_to IS NULL"))
            return dict(self._conn.execute(
                f"SELECT c.id, c.row FROM json_each(?) AS w CROSS JOIN {_BY_ID} ON c.id = w.value"
                " WHERE c.valid_to IS NULL", (json.dumps(list(dict.fromkeys(ids))),)))

    def ids_after(self, row: int, upto: int) -> list[str]:
        """The ids of the rows numbered ``(row, upto]`` (copies catalogued since ``row``)."""
        with self._lock:
            return [rid for (rid,) in self._conn.execute(
                "SELECT id FROM catalog WHERE row > ? AND row <= ?", (row, upto))]

    def ids_matching(self, filters: Filters | None = None) -> list[str]:
        """Ids of the rows that pass ``filters`` (in force now unless ``as_of_version``), sorted."""
        where, params = filter_sql(filters or Filters())
        with self._lock:
            return [rid for (rid,) in self._conn.execute(
                f"SELECT c.id FROM catalog AS c WHERE {where} ORDER BY c.id", params)]

    def get(self, ids: Iterable[str], as_of_version: int | None = None) -> list[CatalogRow]:
        """Rows for ``ids`` in the order given, unknown ids left out: the latest copy of each, or
        the copy on disk at ``as_of_version`` (which may be superseded: see ``valid_to``)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        sql = f"SELECT {_SELECT} FROM catalog AS c WHERE c.id IN (SELECT value FROM json_each(?))"
        params: list[Any] = [json.dumps(wanted)]
        if as_of_version is not None:
            sql += " AND c.version <= ? AND (c.replaced_at IS NULL OR c.replaced_at > ?)"
            params += [as_of_version, as_of_version]
        latest: dict[str, CatalogRow] = {}
        with self._lock:
            for values in self._conn.execute(sql + " ORDER BY c.id, c.version", params):
                row = CatalogRow.from_sql(values)
                latest[row.id] = row
        return [latest[i] for i in wanted if i in latest]

    def sessions(self, ids: Iterable[str], as_of_version: int | None = None) -> dict[str, str | None]:
        """The session (None: none) of each known id (the latest copy, or the one on disk at
        ``as_of_version``): what ranking needs, without the text."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        with self._lock:
            if as_of_version is not None:
                return fetch_sessions(self._conn, _BY_ID, wanted, as_of_version)
            return self._kept.get(self._conn, "sessions", wanted, lambda ids: fetch_sessions(self._conn, _BY_ID, ids))

    def rows(self) -> Iterator[CatalogRow]:
        """Every row, by id and version (audits, comparisons)."""
        with self._lock:
            fetched = self._conn.execute(f"SELECT {_SELECT} FROM catalog AS c ORDER BY c.id, c.version").fetchall()
        for values in fetched:
            yield CatalogRow.from_sql(values)

    def with_semantic_hash(self, hashes: Iterable[str], filters: Filters | None = None) -> list[CatalogRow]:
        """Rows passing ``filters`` (in force now by default) whose semantic hash is one of ``hashes``,
        oldest event first (an index lookup: the Mira "fast lookup by semantic hash")."""
        wanted = [h for h in dict.fromkeys(hashes) if h]
        if not wanted:
            return []
        where, params = filter_sql(filters or Filters())
        with self._lock:
            fetched = self._conn.execute(
                f"SELECT {_SELECT} FROM json_each(?) AS w CROSS JOIN catalog AS c ON c.semantic_hash = w.value"
                f" WHERE c.semantic_hash != '' AND {where} ORDER BY c.event_us, c.id",
                (json.dumps(wanted), *params)).fetchall()
        return [CatalogRow.from_sql(values) for values in fetched]

    def delete_rows(self, keys: Iterable[tuple[str, int]]) -> int:
        """Forget the rows ``(id, version)`` (``soulpass prune``: rows whose file is gone); returns
        how many were deleted. Files are never touched."""
        n = 0
        with self._lock, transaction(self._conn):
            for rid, version in keys:
                found = self._conn.execute("SELECT row, text, agent FROM catalog WHERE id = ? AND version = ?",
                                           (rid, version)).fetchone()
                if found is None:
                    continue
                row, text, agent = found
                if text:  # external-content FTS5: a delete names the old values
                    self._conn.execute("INSERT INTO catalog_fts (catalog_fts, rowid, text, agent)"
                                       " VALUES ('delete', ?, ?, ?)", (row, text, agent))
                self._conn.execute("DELETE FROM catalog_tags WHERE row = ?", (row,))
                self._conn.execute("DELETE FROM catalog WHERE row = ?", (row,))
                n += 1
            if n:  # rows gone: every handle's filter columns (columns.py) reload
                self._conn.execute("INSERT INTO meta (key, value) VALUES ('deleted_rows', ?) ON CONFLICT (key)"
                                   " DO UPDATE SET value = CAST(value AS INTEGER) + excluded.value", (str(n),))
        return n


def _damaged(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file itself is damaged (not busy, locked or unwritable)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text)
