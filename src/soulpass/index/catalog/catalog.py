"""The catalog of one account: rows for every stored copy, what passes the filters, and catch-up
(full text is ``fulltext.py``'s, following the store ``sync.py``'s)."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.store.contract import AccountBackend

from . import sync
from .fulltext import DEFAULT_FULLTEXT, FULLTEXT_ENGINES, FullText, FullTextSearch
from .kept import Kept, fetch_rows, fetch_sessions, last_row
from .query import Filters, filter_sql, neighbour_sql, query_terms
from .rows import COLUMNS, CatalogRow
from .schema import SCHEMA_VERSION, configure, create, transaction
from .sidecar import tantivy_module
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
        (``record_fulltext``), else ``DEFAULT_FULLTEXT``. ``heal``: a damaged catalog file, or one of
        another schema version, is deleted and made again (the next catch-up rebuilds it); False (an
        audit): it is reported."""
        if fulltext is not None and fulltext not in FULLTEXT_ENGINES:
            raise InvalidInput(f"fulltext must be one of {', '.join(FULLTEXT_ENGINES)}, not {fulltext!r}",
                               field="fulltext")
        self._masks: CatalogMasks | None = None  # broad filters checked in numpy (columns.py), on first use
        self._kept = Kept(rows=last_row)  # candidates' sessions and neighbours, while the catalog is unchanged
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
        tantivy = tantivy_module() if self.fulltext == "tantivy" else None
        if self.fulltext == "tantivy" and tantivy is None:
            self._conn.close()
            raise BackendUnavailable(f"the catalog {path} ranks full text with tantivy: install the 'search' "
                                     "extra (pip install 'soulpass[search]') or open it with fulltext='fts5'",
                                     path=str(path))
        self._full_text = FullTextSearch(self._conn, path, tantivy, self.filter_mask)

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
                self._full_text.synced_sidecar()  # the search after a big catch-up should not pay for it
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
            return self._full_text.search(terms, k, filters)

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
            return self._full_text.scores(terms, rows)

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

    def few_matching(self, filters: Filters, most: int) -> list[str] | None:
        """``ids_matching(filters)`` where at most ``most`` rows pass, else None."""
        where, params = filter_sql(filters)
        with self._lock:
            found = [rid for (rid,) in self._conn.execute(
                f"SELECT c.id FROM catalog AS c WHERE {where} LIMIT ?", (*params, most + 1))]
        return None if len(found) > most else sorted(found)

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
