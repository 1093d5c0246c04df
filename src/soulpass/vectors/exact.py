"""Exact backend: brute-force cosine search with numpy over the memory-mapped rows.

Recall is 1.0 by construction and there is no build step; its time grows with the rows
(docs/performance.md), so it is the right tool for small accounts and for selective filters, and the
HNSW backend (``hnsw.py``) builds on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from soulpass.errors import InvalidInput
from soulpass.vectors.abilities import RowMask
from soulpass.vectors.base import (
    IndexMeta,
    as_id_set,
    check_ids,
    open_meta,
    unit_query,
    unit_rows,
)
from soulpass.vectors.groups import GROUPED_MOST, GroupBest, RowGroups
from soulpass.vectors.os_memory import one_blas_thread
from soulpass.vectors.rows import RowStore

__all__ = ["NO_ROW", "ExactIndex", "top_k"]

Scores = npt.NDArray[np.float32]
NO_ROW = -2.0  # ``cosine_array``'s score of an id without a live row (below every cosine)
Rows = npt.NDArray[np.int64]


def top_k(rows: Rows, scores: Scores, k: int) -> tuple[Rows, Scores]:
    """The ``k`` best ``(rows, scores)`` pairs, best first (ties broken by row, so results repeat)."""
    if len(rows) > k:
        part = np.argpartition(-scores, k - 1)[:k]
        rows, scores = rows[part], scores[part]
    order = np.lexsort((rows, -scores))
    return rows[order], scores[order]


# Up to this many rows a product is numpy's own loop (``einsum``: one thread, no BLAS): as fast as
# BLAS on one thread there, without threadpoolctl's import and its cost a call; above it BLAS on one
# thread (``one_blas_thread``).
SMALL_PRODUCT = 512


class ExactIndex:
    """A ``VectorIndex`` answering every query by a full (or filtered) matrix-vector product."""

    BACKEND = "exact"

    def __init__(self, folder: str | Path, *, model_id: str, dim: int) -> None:
        self.folder = Path(folder)
        self._meta = open_meta(self.folder, IndexMeta(backend=self.BACKEND, model_id=model_id, dim=dim))
        self._rows = RowStore(self.folder, dim)
        self._lock = threading.RLock()  # one writer or searcher at a time (the server runs a threadpool)
        self._groups: RowGroups | None = None
        self._group_best: tuple[tuple[bytes, int, int, int], GroupBest] | None = None  # the last query's

    @property
    def meta(self) -> IndexMeta:
        return self._meta

    @property
    def read_only(self) -> bool:
        """Another process writes this folder: this handle searches what it commits, writes raise
        ``BackendUnavailable``."""
        return self._rows.read_only

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        id_list = check_ids(ids)
        rows = unit_rows(vectors, len(id_list), self._meta.dim)
        with self._lock:
            self._rows.append(id_list, rows)
            self._after_write()

    def delete(self, ids: Sequence[str]) -> None:
        id_list = check_ids(ids)
        with self._lock:
            self._rows.forget(id_list)
            self._after_write()

    def search(self, vector: npt.ArrayLike, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        if k <= 0:
            raise InvalidInput(f"k must be positive, got {k}", k=k)
        query = unit_query(vector, self._meta.dim)
        if allowed is not None:
            allowed = as_id_set(allowed)
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            rows, scores = self._ranked(query, k, allowed)
            ids = self._rows.ids.take(rows.tolist())
            return [(i or "", s) for i, s in zip(ids, scores.tolist(), strict=True)]

    def cosine_array(self, vector: npt.ArrayLike, ids: Sequence[str]) -> Scores:
        """The exact cosine of each of ``ids``, in their order (``NO_ROW`` for an id without a live
        row): the scores ``search(vector, len(ids), allowed=ids)`` gives them, without ranking them
        (a hybrid search completes its candidates' scores by this)."""
        query = unit_query(vector, self._meta.dim)
        out = np.full(len(ids), NO_ROW, dtype=np.float32)
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            found = self._rows.rows_for(ids)
            if not found:
                return out
            rows = np.fromiter((found.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
            have = np.flatnonzero(rows >= 0)
            order = np.argsort(rows[have])  # rows are scored in their order in the file: sorted
            out[have[order]] = self._scores(query, rows[have[order]])
        return out

    def group_best(self, vector: npt.ArrayLike, group_of: Callable[[str], str], *,
                   scan: bool = True) -> GroupBest | None:
        """The best cosine of each group of rows (``group_of(id)``: a record, of its own vector and its
        passages') from one product over every live row, or None where a search would not score
        every row (a graph answers; more than ``GROUPED_MOST`` rows). ``scan=False``: only what the
        last call kept for this query (None otherwise): nothing is scored."""
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            scans = scan and self._scans_every_row() and self._rows.rows <= GROUPED_MOST
            kept = self._group_best
            if kept is None and not scans:  # a graph answers here: nothing to look at
                return None
            query = unit_query(vector, self._meta.dim)
            # Within a generation rows are only added or die: their count and the live count say what changed.
            key = (query.tobytes(), self._rows.generation, self._rows.rows, self._rows.live_count)
            if kept is not None and kept[0] == key and self._groups is not None and self._groups.group_of is group_of:
                return kept[1]
            if not scans:
                return None
            groups = self._groups
            if groups is None or groups.generation != self._rows.generation or groups.group_of is not group_of:
                groups = self._groups = RowGroups(self._rows.generation, group_of)
            if groups.rows < self._rows.rows:
                groups.extend(self._rows.ids[groups.rows:self._rows.rows])
            live = np.flatnonzero(self._rows.live_mask())
            found = groups.best(live, self._scores(query, live) if len(live) else np.zeros(0, dtype=np.float32))
            self._group_best = (key, found)
            return found

    def _scans_every_row(self) -> bool:
        """Whether an unfiltered search scores every live row (always, for exact search)."""
        return True

    def search_masked(self, vector: npt.ArrayLike, k: int, mask_of: RowMask) -> list[tuple[str, float]]:
        """Like ``search`` among the rows ``mask_of(rows)`` allows: one bool per row of the
        ``RowStore`` (dead rows are left out whatever it says). ``mask_of`` is called under this
        index's lock, after it caught up with another process's writes, so it sees the rows searched."""
        if k <= 0:
            raise InvalidInput(f"k must be positive, got {k}", k=k)
        query = unit_query(vector, self._meta.dim)
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            mask = np.asarray(mask_of(self._rows), dtype=np.bool_)
            if len(mask) != self._rows.rows:
                raise ValueError(f"the row mask has {len(mask)} rows, the index {self._rows.rows}")
            rows, scores = self._ranked_mask(query, k, mask & self._rows.live_mask())
            ids = self._rows.ids.take(rows.tolist())
            return [(i or "", s) for i, s in zip(ids, scores.tolist(), strict=True)]

    def prepare_masked(self, mask_of: RowMask) -> None:
        """Build what ``search_masked`` needs before the first one: ``mask_of`` once, under the lock
        (its caller keeps what it builds) and whatever this backend ranks masked rows by."""
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            mask_of(self._rows)
            self._prepare_mask()

    def _prepare_mask(self) -> None:
        """Nothing for exact search."""

    def vectors_of(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored (unit) vector of each of ``ids`` that has one (a passport's ``--vectors``)."""
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            matrix = self._rows.matrix()
            return {i: np.array(matrix[row], dtype=np.float32) for i, row in self._rows.rows_for(ids).items()}

    def count(self) -> int:
        with self._lock:
            if self._rows.refresh():
                self._refreshed()
            return self._rows.live_count

    def close(self) -> None:
        with self._lock:
            self._rows.close()

    # -- for subclasses --------------------------------------------------------------------------

    def _after_write(self) -> None:
        if not self.read_only and self._rows.needs_compaction():
            self._rows.compact()

    def _refreshed(self) -> None:
        """A reader's rows moved on (``RowStore.refresh``)."""

    def _ranked(self, query: Scores, k: int, allowed: Collection[str] | None) -> tuple[Rows, Scores]:
        if allowed is not None:
            return self._exact_rows(query, k, self._rows_of(allowed))
        return self._exact_rows(query, k, np.flatnonzero(self._rows.live_mask()))

    def _ranked_mask(self, query: Scores, k: int, mask: npt.NDArray[np.bool_]) -> tuple[Rows, Scores]:
        """The exact top ``k`` among the rows ``mask`` (live ones only) allows."""
        return self._exact_rows(query, k, np.flatnonzero(mask))

    def _rows_of(self, allowed: Collection[str]) -> Rows:
        if len(allowed) <= self._rows.live_count:
            found = list(self._rows.rows_for(allowed).values())
        else:  # walk the (smaller) index instead of the filter
            found = [r for i, r in self._rows.row_of.items() if i in allowed]
        return np.sort(np.asarray(found, dtype=np.int64))

    def _exact_rows(self, query: Scores, k: int, rows: Rows) -> tuple[Rows, Scores]:
        """Exact top ``k`` among ``rows`` (live, sorted)."""
        if len(rows) == 0:
            return rows, np.zeros(0, dtype=np.float32)
        return top_k(rows, self._scores(query, rows), k)

    def _scores(self, query: Scores, rows: Rows) -> Scores:
        """The exact scores of ``rows`` (live, sorted, at least one), in their order: a gather then
        one product, or one product over the whole map when most rows are asked for."""
        matrix = self._rows.matrix()
        gather = 4 * len(rows) <= len(matrix)  # most rows: one product over the whole map beats a gather
        block = matrix[rows] if gather else matrix
        scores: Scores
        if len(block) <= SMALL_PRODUCT:
            scores = np.einsum("ij,j->i", block, query)
        else:
            with one_blas_thread():
                scores = np.asarray(block @ query, dtype=np.float32)
        return scores if gather else scores[rows]
