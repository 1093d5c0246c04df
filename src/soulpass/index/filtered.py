"""Which rows of the local vector index pass a broad filter: vector row -> catalog row -> mask.

The catalog's filter columns (``catalog/columns.py``) say which catalog rows pass a filter; the
vector index holds rows by record id (and a record's passages as ``<id>#<n>``). This map gives, for
each vector row, the number of the catalog row in force for its record (-1: none), so a filtered
dense search masks the vector rows with one array lookup instead of listing the passing ids
(~70 ms for a speaker's 77k of 1M) or checking over-fetched hits in SQLite.

Kept in memory per open index and caught up, like the columns, in small steps: new vector rows are
looked up by id; catalog rows added since (a record's new copy: a new row number) re-point the
vector rows of their ids. A new vector generation (compaction), another or rebuilt catalog or
deleted catalog rows rebuild it (~3 s at 1M records with their passages), so it is kept on disk
beside the vector folder (``<folder>.catalog-rows.npz``, written after a build and each time the
rows grew by a quarter) with what it reflects, and the ids of a few rows to recognise the vector
rows it was made from. Derived: a file that does not match is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import zipfile
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from soulpass.index import passages, tuning
from soulpass.index.catalog.query import Filters
from soulpass.index.recipe import SEARCHABLE_KINDS

if TYPE_CHECKING:
    from soulpass.index.catalog import Catalog
    from soulpass.index.catalog.columns import ColumnStamp
    from soulpass.vectors import SharedIndex
    from soulpass.vectors.abilities import SearchesMasked
    from soulpass.vectors.rows import RowStore

__all__ = ["MaskedDense", "VectorCatalogRows"]

PassageCounts = Callable[[list[str]], dict[str, int]]
_SAMPLES = 16  # vector rows whose ids the file keeps, to recognise the rows it was made from


class MaskedDense:
    """The dense part of a search with a broad filter, over a local vector index: the catalog's
    mask of passing rows (``Catalog.filter_mask``) becomes a mask of vector rows, the index searches
    among those (``search_masked``), and SQLite confirms only the ``depth`` records kept."""

    def __init__(self, index: SearchesMasked, catalog: Catalog, state: sqlite3.Connection, path: Path | None) -> None:
        self._index, self._catalog, self._state = index, catalog, state
        self._rows = VectorCatalogRows(path)

    @classmethod
    def over(cls, vectors: SharedIndex, catalog: Catalog, state: sqlite3.Connection, path: Path | None,
             ) -> MaskedDense | None:
        """For ``vectors`` and the SQLite ``catalog``; None where the index does not search masked
        rows (Chroma)."""
        masked = vectors.abilities.masked
        return cls(masked, catalog, state, path) if masked is not None else None

    def nearest(self, vector: Any, depth: int, filters: Filters) -> list[str] | None:
        """Ids of the ``depth`` records nearest ``vector`` (by their own or a passage's vector)
        passing ``filters``, best first; None for filters the masks do not answer (none at all
        but kinds, a session, tags, "as of")."""
        if not filters.selective:
            return None
        got = self._catalog.filter_mask(filters)
        if got is None:
            return None
        # A record's passages may fill several of the nearest rows: half as many again as needed.
        hits = self._index.search_masked(vector, depth + depth // 2, self._mask_of(*got))
        nearest = list(passages.best_per_record(hits))
        ok = self._catalog.passing(nearest, filters)
        return [i for i in nearest if i in ok][:depth]

    def prepare(self) -> None:
        """Build (and keep on disk) the columns, the row map and what the index ranks masked rows by."""
        got = self._catalog.filter_mask(Filters(kinds=SEARCHABLE_KINDS, until=datetime.max.replace(tzinfo=UTC)))
        if got is not None:
            self._index.prepare_masked(self._mask_of(*got))

    def _mask_of(self, passing: npt.NDArray[np.bool_], stamp: ColumnStamp) -> Callable[[RowStore], Any]:
        state = self._state
        return lambda rows: self._rows.mask(rows, self._catalog, passing, stamp,
                                            lambda ids: passages.passage_counts(state, ids))


class VectorCatalogRows:
    """Vector row -> catalog row of its record's copy in force, for one local vector index."""

    def __init__(self, path: Path | None = None) -> None:
        """``path``: where the map is kept between processes (None: memory only)."""
        self._path = path
        self._saved_rows = 0
        self._key: tuple[int, str, int, int] | None = None  # vector generation; catalog: born, generation, deletions
        self._catalog_rows: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._upto = 0  # catalog rows up to this number are reflected
        self._last: tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None = None  # catalog mask, its rows' mask

    def mask(self, store: RowStore, catalog: Catalog, passing: npt.NDArray[np.bool_], stamp: ColumnStamp,
             passage_counts: PassageCounts) -> npt.NDArray[np.bool_]:
        """For each row of ``store``: whether its record's copy passes (``passing``, by catalog row
        number, as of ``stamp``). A copy newer than ``passing`` counts as passing: the caller
        confirms what it keeps in SQLite."""
        changed = self._catch_up(store, catalog, len(passing) - 1, stamp, passage_counts)
        if changed:
            self._save_if_grown(store)
        if not changed and self._last is not None and self._last[0] is passing and len(self._last[1]) == store.rows:
            return self._last[1]  # the same filter's mask (the catalog caches it) over the same rows
        rows = self._catalog_rows[:store.rows]
        out = np.zeros(store.rows, dtype=np.bool_)
        known = (rows >= 0) & (rows < len(passing))
        out[known] = passing[rows[known]]
        out[rows >= len(passing)] = True
        out.flags.writeable = False
        self._last = (passing, out)
        return out

    def _catch_up(self, store: RowStore, catalog: Catalog, upto: int, stamp: ColumnStamp,
                  passage_counts: PassageCounts) -> bool:
        """Catch up with ``store``'s rows and the catalog's rows up to ``upto``; True when anything changed."""
        key = (store.generation, stamp.born, stamp.generation, stamp.deleted)
        ids = store.ids
        if self._key is None and self._path is not None:
            self._load(store, key)
        if key != self._key or len(self._catalog_rows) > store.rows:
            in_force = catalog.rows_in_force()
            self._catalog_rows = np.fromiter((_row(in_force, i) for i in ids), dtype=np.int64, count=len(ids))
            self._key, self._upto = key, upto
            return True
        held, upto_held = len(self._catalog_rows), self._upto
        if store.rows > held:  # rows written since: look their records up
            new = ids[held:store.rows]
            in_force = catalog.rows_in_force({passages.record_of(i) for i in new if i is not None})
            self._catalog_rows = np.concatenate(
                [self._catalog_rows, np.fromiter((_row(in_force, i) for i in new), dtype=np.int64, count=len(new))])
        if upto > self._upto:  # copies catalogued since: their records' vector rows point at them
            changed = sorted(set(catalog.ids_after(self._upto, upto)))
            if changed:
                in_force = catalog.rows_in_force(changed)
                counts = passage_counts(changed)
                wanted = [*changed, *_passage_ids(counts.items())]
                for vector_id, row in store.rows_for(wanted).items():
                    self._catalog_rows[row] = in_force.get(passages.record_of(vector_id), -1)
            self._upto = upto
        return store.rows != held or self._upto != upto_held

    def _load(self, store: RowStore, key: tuple[int, str, int, int]) -> None:
        """Take the map kept on disk if it was made from these vector rows and this catalog."""
        assert self._path is not None
        try:
            with np.load(self._path, allow_pickle=False) as saved:
                meta = json.loads(str(saved["meta"]))
                rows = saved["rows"].astype(np.int64)
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, json.JSONDecodeError):
            return
        if tuple(meta["key"]) != key or len(rows) > store.rows or meta["samples"] != _samples(store.ids, len(rows)):
            return
        self._catalog_rows, self._upto, self._key = rows, int(meta["upto"]), key
        self._saved_rows = len(rows)

    def _save_if_grown(self, store: RowStore) -> None:
        n = len(self._catalog_rows)
        grown = max(tuning.SAVE_MIN_ROWS, self._saved_rows + self._saved_rows // 4)
        if self._path is None or self._key is None or n < grown:
            return
        meta: dict[str, Any] = {"key": list(self._key), "upto": self._upto, "samples": _samples(store.ids, n)}
        tmp = self._path.with_name(f".{self._path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
        try:
            with open(tmp, "wb") as f:
                np.savez(f, rows=self._catalog_rows, meta=np.array(json.dumps(meta)))
            os.replace(tmp, self._path)
        except OSError:  # a full disk or a read-only folder: the map stays in memory only
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        self._saved_rows = n


def _samples(ids: Sequence[str | None], n: int) -> list[str | None]:
    """The ids of ``_SAMPLES`` rows spread over the first ``n`` (the last one included)."""
    return [ids[int(r)] for r in np.unique(np.linspace(0, n - 1, _SAMPLES).astype(np.int64))] if n else []


def _row(in_force: dict[str, int], vector_id: str | None) -> int:
    return -1 if vector_id is None else in_force.get(passages.record_of(vector_id), -1)


def _passage_ids(counts: Iterable[tuple[str, int]]) -> list[str]:
    return [passages.passage_id(rid, n) for rid, k in counts for n in range(k)]
