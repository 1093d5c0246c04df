"""Default backend: exact search while the index is small, a usearch HNSW graph above that.

Why: exact numpy search costs ~0.1 us a row, too slow beyond a few tens of thousands of rows; a
graph over the vectors' sign bits, its candidates re-scored with the float32 rows, reaches the
recall of a float graph for less time and a faster build (the measurements: docs/performance.md).

How:

* below ``ann_threshold`` live rows (16,384) there is no graph: exact, recall 1.0, no build;
* above it the rows ``[0, g)`` are in a graph keyed by row number (``rows.py`` never renumbers
  rows within a generation, so deletes and updates just mark rows dead) and the tail
  ``[g, rows)`` is searched exactly; when the tail reaches ``seal_rows`` it is added to the graph.
  The graph is saved as ``graph-G-<g>.usearch`` (temp + fsync + rename: the file name states the
  rows it covers) when it has grown by a quarter since the last save, and on ``close``, so saves
  cost O(rows) in total however the rows arrive. The saved graph is memory-mapped (read-only,
  nothing read up front) when first needed: a handle's first unfiltered search is answered from
  the saved sign bits (``signs.py``) where they cover the graph's rows, so a one-question process
  neither imports usearch nor maps the graph; the first seal after that copies it into memory to
  add the tail. After a crash the rows the saved graph lacks are
  the tail again (added on open if they reach ``seal_rows``); a lost, unreadable or other-kind
  graph is rebuilt from the rows on open;
* graph candidates are re-scored with the exact float32 rows, so scores are true cosines and
  quantisation only decides which candidates are seen;
* with ``allowed``: a small set (<= ``exact_allowed`` ids) is searched exactly; otherwise the
  graph is asked for enough candidates to expect the usual number of allowed live ones
  (over-fetch by the inverse of the allowed fraction), widening 4x while short, and falling back
  to exact over the allowed rows when the graph would have to return more than ``max_fetch``
  candidates (or, with or without a filter, more than half of what it holds);
* with a row mask (``search_masked``: the caller knows which rows pass, ``index/filtered.py``): a
  few passing rows are searched exactly; a share of at least ``GRAPH_SHARE`` through the graph
  (asking for 1/share times the candidates, checked against the mask in numpy); a smaller share
  ranks the passing rows by the Hamming distance of their sign bits (``signs.py``: 77k of 1M rows
  in a few ms, where the graph would have to return ~13 times the candidates) and re-scores as
  many as the graph would, exactly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, Literal

import numpy as np

from soulpass.errors import BackendUnavailable
from soulpass.store.fsio import atomic_write, dump_json, fsync_dir
from soulpass.vectors.exact import SMALL_PRODUCT, ExactIndex, Rows, Scores
from soulpass.vectors.os_memory import huge_copy, one_blas_thread, populate
from soulpass.vectors.rows import numbered_files
from soulpass.vectors.signs import SignBits, hamming, nearest

__all__ = ["HnswIndex"]


def _usearch_index_class() -> Any:
    # ONNX Runtime must be loaded before usearch when both are used: the other order segfaults at
    # `import onnxruntime` (usearch 2.26.6 + onnxruntime 1.31.1, seen here), i.e. any process
    # that opened a large vector index before loading the embedder would die.
    with contextlib.suppress(ImportError):
        import onnxruntime  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    try:
        from usearch.index import Index
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BackendUnavailable(
            "the default vector index needs usearch above a few thousand rows: pip install 'soulpass[search]'",
            package="usearch",
        ) from exc
    return Index


def _note_path(graph: Path) -> Path:
    """Where a saved graph's note is: ``graph-G-R.json`` beside ``graph-G-R.usearch``."""
    return graph.with_suffix(".json")


def _saved_expansion(graph: Path) -> int:
    """The ``expansion_add`` a saved graph was built with (its note's; before notes: 64)."""
    try:
        value = json.loads(_note_path(graph).read_bytes()).get("expansion_add")
    except (OSError, ValueError, AttributeError):
        return EXPANSION_ADD_BEFORE
    return value if type(value) is int and value > 0 else EXPANSION_ADD_BEFORE


SMALL_GRAPH = 20_000  # rows up to which the graph is built on one thread (deterministic, well connected)
# A row mask passing at least this share of the live rows is searched through the graph (asking for
# at most 1/share times the candidates); a smaller share ranks the passing rows by their sign bits.
GRAPH_SHARE = 0.3


# How widely a new row looks for its neighbours when it joins the graph (usearch's expansion_add, the
# ef_construction of HNSW): a graph built wider is better connected, so a walk finds as many of the
# true top 10 among fewer candidates (docs/performance.md). A graph's value is kept beside it
# (``graph-G-R.json``): one saved without it was built with 64, and rows added to such a graph leave
# it counted as 64.
EXPANSION_ADD = 200
EXPANSION_ADD_BEFORE = 64
WIDE_FIRST = (150, 170)  # candidates for a top 10 in a graph built with EXPANSION_ADD: at 100k, at 1M rows


def _b1_candidates(k: int, graph_rows: int, base: int | None = None, projections: int = 1,
                   expansion_add: int = EXPANSION_ADD_BEFORE) -> int:
    """How many sign-bit neighbours to re-score for a top ``k``: for a top 10, rising with log(rows)
    from 100k to 1M rows, fewer by two projections than by one, fewer again in a graph built with
    ``expansion_add`` of at least ``EXPANSION_ADD`` (``WIDE_FIRST``); the recall each reaches is in
    docs/performance.md."""
    growth = min(1.0, max(0.0, math.log10(max(1, graph_rows) / 100_000)))
    # Beyond the first 10, four more a row: a hybrid search asks for ~75 candidates to fuse, which
    # need not be as exact as a top 10 (25 per row would re-score ~1,900 at 1M: ~20 ms).
    if base is not None:
        first = base
    elif projections > 1 and expansion_add >= EXPANSION_ADD:
        first = math.ceil(WIDE_FIRST[0] + (WIDE_FIRST[1] - WIDE_FIRST[0]) * growth)
    else:
        first = math.ceil(10 * (15 + (10 if projections == 1 else 7) * growth))
    return first + 4 * max(0, k - 10)


# A new sign-bit graph holds 2 x dim bits a row: the signs of the vector and of the vector turned by
# one fixed rotation. Hamming distance over twice the bits tracks the angle more closely, so fewer
# candidates reach the same recall, for 48 more bytes a node. A graph saved with dim bits (before)
# is still searched with the signs alone.
GRAPH_PROJECTIONS = 2


@functools.cache
def _rotation(dim: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The fixed rotation of ``dim``-d vectors: the Q of the QR of a seeded Gaussian matrix, columns
    signed so that R's diagonal is positive (the QR is then unique: every LAPACK gives this Q up to
    rounding, and numpy's legacy ``RandomState`` stream never changes)."""
    gauss = np.random.RandomState(19_2026).standard_normal((dim, dim))
    with one_blas_thread():  # LAPACK's threads would spin on after it, beside the searches (~0.1 s)
        q, r = np.linalg.qr(gauss)
    return (q * np.where(np.diag(r) < 0, -1.0, 1.0)).astype(np.float32)


def graph_bits(vectors: Scores, projections: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """What a sign-bit graph holds for these unit vectors: their signs, packed, and with two
    projections the signs of the rotated vectors after them."""
    signs = vectors > 0
    if projections == 2:
        signs = np.concatenate([signs, (vectors @ _rotation(vectors.shape[-1])) > 0], axis=-1)  # a query: ~7 us
    return np.packbits(signs, axis=-1)


class HnswIndex(ExactIndex):
    """A ``VectorIndex``: exact below ``ann_threshold`` rows, a usearch HNSW graph (sign bits from
    256-d on, else f16) with exact re-scoring above."""

    BACKEND = "hnsw"

    def __init__(
        self,
        folder: str | Path,
        *,
        model_id: str,
        dim: int,
        ann_threshold: int = 16_384,
        seal_rows: int = 4096,
        exact_allowed: int = 2048,
        max_fetch: int | None = None,
        quantization: Literal["auto", "b1", "f16"] = "auto",
        connectivity: int = 16,
        expansion_add: int = EXPANSION_ADD,
        expansion_search: int | None = None,
    ) -> None:
        super().__init__(folder, model_id=model_id, dim=dim)
        self.ann_threshold = ann_threshold
        self.seal_rows = seal_rows
        self.exact_allowed = exact_allowed
        self.quantization = quantization if quantization != "auto" else ("b1" if dim >= 256 else "f16")
        self.max_fetch = max_fetch or (8192 if self.quantization == "b1" else 1024)
        self._graph_options = {"connectivity": connectivity, "expansion_add": expansion_add}
        self._expansion_search = expansion_search
        self.b1_base: int | None = None  # sign-bit neighbours re-scored for a top 10 (None: by size)
        self._graph: Any = None
        self._graph_mapped = False  # the saved graph is searched from its file's pages
        self._viewed = False  # ``_graph`` memory-maps its file (read-only)
        self._graph_rows = 0  # rows [0, _graph_rows) are in the graph in memory
        self._saved_rows = 0  # ... and [0, _saved_rows) in the graph file
        self._generation = self._rows.generation
        self._signs: SignBits | None = None  # the rows' packed sign bits (filtered searches), on first use
        self._pending_rows = 0  # rows of the saved graph not loaded yet (``_has_graph`` loads it)
        self._cold = True  # no search yet: the first may be answered from the saved sign bits
        self._graph_path: Path | None = None  # the saved graph memory-mapped, if it is
        self._graph_expansion = expansion_add  # the narrowest expansion_add any row of the graph joined with
        try:
            self._find_graph()
            self._seal_if_due()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._lock:
            if self._graph is not None and self._saved_rows < self._graph_rows and not self.read_only:
                self._save_graph()
            if self._signs is not None and not self.read_only:
                self._signs.save_if_unsaved()
            self._graph, self._viewed, self._signs = None, False, None
            super().close()

    # -- writing ---------------------------------------------------------------------------------

    def _after_write(self) -> None:
        super()._after_write()
        if self._rows.generation != self._generation:  # compacted: rows were renumbered
            self._generation = self._rows.generation
            self._no_graph()
            self._signs = None
        self._seal_if_due()

    def _no_graph(self) -> None:
        """Hold no graph (none loaded, none waiting): the next seal builds one from row 0."""
        self._graph, self._viewed, self._graph_path = None, False, None
        self._graph_rows, self._saved_rows, self._pending_rows = 0, 0, 0

    def _refreshed(self) -> None:
        if self._rows.generation != self._generation:  # the writer compacted: its graph is saved for it
            self._generation = self._rows.generation
            self._no_graph()
            self._signs = None
            self._find_graph()
        self._seal_if_due()

    def _seal_if_due(self) -> None:
        rows = self._rows.rows
        covered = max(self._graph_rows, self._pending_rows)
        if self._rows.live_count >= self.ann_threshold and rows - covered >= self.seal_rows:
            self._has_graph()  # the saved graph first: the seal adds to it
            if rows - self._graph_rows >= self.seal_rows:
                self._seal()

    def _seal(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Add the tail's live rows to the graph (``progress(added, to_add)`` after each chunk);
        save it when it grew by a quarter since the last save."""
        if self._viewed:  # a memory-mapped graph is read-only: a copy in memory takes the new rows
            self._graph, self._viewed = self._graph.copy(), False
        if self._graph is None:
            metric, dtype = ("hamming", "b1x8") if self.quantization == "b1" else ("cos", "f16")
            ndim = self._meta.dim * (GRAPH_PROJECTIONS if self.quantization == "b1" else 1)
            self._graph = _usearch_index_class()(ndim=ndim, metric=metric, dtype=dtype, **self._graph_options)
            self._graph_expansion = self._graph_options["expansion_add"]
        self._graph_expansion = min(self._graph_expansion, self._graph_options["expansion_add"])
        start, end = self._graph_rows, self._rows.rows
        keys = start + np.flatnonzero(self._rows.live_mask()[start:end])
        for chunk in range(0, len(keys), 65536):
            part = keys[chunk:chunk + 65536]
            # Threads insert at once; into a small graph they race for the same few nodes and can
            # leave one hard to reach (a test's 400-row graph missed an exact match 1 run in 20).
            threads = 1 if len(self._graph) + len(part) <= SMALL_GRAPH else 0
            self._graph.add(part.astype(np.uint64), self._graph_vectors(np.asarray(self._rows.matrix()[part])),
                            threads=threads)
            if progress is not None:
                progress(chunk + len(part), len(keys))
        self._graph_rows = end
        self._graph.expansion_search = self._ef_for(len(self._graph))
        if end - self._saved_rows >= max(self.seal_rows, self._saved_rows // 4) and not self.read_only:
            self._save_graph()

    def _save_graph(self) -> None:
        gen, end = self._rows.generation, self._graph_rows
        final = self.folder / f"graph-{gen}-{end}.usearch"
        tmp = self.folder / f".graph-{gen}-{end}.usearch.tmp"
        # How it was built goes beside it after it: a crash between the two leaves a graph without
        # a note, searched as one built with 64 (more candidates: slower, never less recall), and
        # no older note may describe a graph that replaces one of the same name.
        _note_path(final).unlink(missing_ok=True)
        self._graph.save(str(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        fsync_dir(self.folder)
        atomic_write(_note_path(final), dump_json({"expansion_add": self._graph_expansion}))
        for old in self._graph_files():
            if old[1] != final:
                old[1].unlink(missing_ok=True)
                _note_path(old[1]).unlink(missing_ok=True)
        self._saved_rows = end

    def rebuild_graph(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Build the graph again from the stored rows (nothing is embedded again), as new graphs are
        built (``EXPANSION_ADD``), and save it: a graph built before is searched with more
        candidates for the same recall. ``progress(rows_added, rows_to_add)`` as it goes. The rows
        it holds (0: too few rows for a graph)."""
        with self._lock:
            if self.read_only:
                raise BackendUnavailable(f"another process writes the vector index in {self.folder}: "
                                         "rebuild its graph there, or when it has closed it")
            if self._rows.refresh():
                self._refreshed()
            self._no_graph()
            self._graph_expansion = self._graph_options["expansion_add"]
            if self._rows.live_count >= self.ann_threshold:
                self._seal(progress)
            return self._graph_rows if self._graph is not None else 0

    def _projections(self) -> int:
        """How many sign projections the graph holds (``GRAPH_PROJECTIONS``; 1 in a graph saved before)."""
        return int(self._graph.ndim) // self._meta.dim if self._graph is not None else GRAPH_PROJECTIONS

    def _graph_vectors(self, vectors: Scores) -> Any:
        """What the graph holds for these unit vectors: their sign bits, packed (b1), or themselves (f16)."""
        return graph_bits(vectors, self._projections()) if self.quantization == "b1" else vectors

    def _ef_for(self, size: int) -> int:
        """``expansion_search``: as given, else 64 up to 100k vectors growing as sqrt(size) to 256
        (recall falls with the graph's size; docs/performance.md)."""
        if self._expansion_search is not None:
            return self._expansion_search
        if self.quantization == "b1":
            # measured: as good as a wider search, and faster
            return _b1_candidates(10, size, self.b1_base, self._projections(), self._graph_expansion)
        return int(min(256, max(64, round(64 * math.sqrt(size / 100_000)))))

    def _graph_files(self) -> list[tuple[int, Path]]:
        return numbered_files(self.folder, f"graph-{self._rows.generation}-", ".usearch")

    def _drop(self, path: Path) -> None:
        if not self.read_only:  # a reader leaves the writer's files alone
            path.unlink(missing_ok=True)
            _note_path(path).unlink(missing_ok=True)

    def _find_graph(self) -> None:
        """Note the newest saved graph the row log covers, to be loaded when first needed: a process
        that only asks one question (a CLI search) need not import usearch nor map the graph."""
        self._pending_rows = max((n for n, _ in self._graph_files() if n <= self._rows.rows), default=0)

    def _has_graph(self) -> bool:
        """Whether there is a graph, loading the saved one first if it waits."""
        if self._pending_rows:
            self._pending_rows = 0
            self._load_graph()
            if self._graph is None:  # unreadable or of another kind: rebuilt from the rows
                self._seal_if_due()
            else:  # a handle that searches the graph will search again: map its pages now
                populate(self._rows.matrix(), self._graph_path if self._graph_mapped else None)
        return self._graph is not None

    def _scans_every_row(self) -> bool:
        """No graph, none saved waiting to be loaded: searches are exact."""
        return self._graph is None and not self._pending_rows

    def _answer_cold(self) -> bool:
        """Whether this (unfiltered) search is answered from the sign bits, leaving the graph unloaded:
        only a handle's first search, and only where a saved sign-bit file covers the saved graph's
        rows. The rows nearest by Hamming distance are re-scored, found exactly instead of
        approximately (~20 ms at 1M rows, where importing usearch and mapping the graph cost ~0.3 s);
        the next search loads the graph."""
        cold, self._cold = self._cold, False
        return (cold and self._pending_rows > 0 and self.quantization == "b1"
                and self._sign_bits().saved_rows >= self._pending_rows)

    def _load_graph(self) -> None:
        files = self._graph_files()
        for covered, path in reversed(files):
            if covered > self._rows.rows:  # names rows the row log never committed
                self._drop(path)
                continue
            copy = huge_copy(path)  # a large graph: its bytes in huge pages, walked faster than the file's
            try:  # mapped, and with no key -> slot table (keys are rows, never looked up):
                # 0.09 s at 1M rows instead of 0.33 s with the table, 0.3+ s loading it whole
                graph = _usearch_index_class().restore(str(path) if copy is None else copy, view=True,
                                                       enable_key_lookups=False)
            except (RuntimeError, ValueError, OSError):  # OSError: a reader saw the writer replace it
                graph = None
            if graph is not None and copy is not None:
                graph.soulpass_copy = copy  # the bytes it maps live as long as the graph does
            binary = graph is not None and str(graph.dtype).endswith(".B1")
            dims = (self._meta.dim, self._meta.dim * GRAPH_PROJECTIONS) if binary else (self._meta.dim,)
            if graph is None or graph.ndim not in dims or binary != (self.quantization == "b1"):
                self._drop(path)  # unreadable or of another kind: rebuilt from the rows
                continue
            self._graph, self._graph_rows, self._saved_rows, self._graph_path = graph, covered, covered, path
            self._graph_mapped = copy is None  # the file's pages, not a copy in huge pages
            self._graph_expansion = _saved_expansion(path)
            graph.expansion_search = self._ef_for(len(graph))  # after: the width depends on the graph's bits
            self._viewed = True
            return

    # -- searching -------------------------------------------------------------------------------

    def _ranked(self, query: Scores, k: int, allowed: Collection[str] | None) -> tuple[Rows, Scores]:
        if allowed is None and self._answer_cold():
            return self._exact_rows(query, k, self._sign_candidates(query, k, None))
        self._cold = False
        if allowed is not None and len(allowed) <= self.exact_allowed:
            return self._exact_rows(query, k, self._rows_of(allowed))
        if not self._has_graph():
            return super()._ranked(query, k, allowed)
        start, end = self._graph_rows, self._rows.rows
        live = self._rows.live_mask()
        tail = start + np.flatnonzero(live[start:end])
        if allowed is not None:
            tail = self._keep_allowed(tail, allowed)
        graph_live = max(1, self._rows.live_count)
        from_graph = self._graph_candidates(
            query, k, 1.0 if allowed is None else min(1.0, len(allowed) / graph_live),
            lambda keys: keys[live[keys]] if allowed is None else self._keep_allowed(keys[live[keys]], allowed),
            most=self.max_fetch if allowed is not None else None)
        if from_graph is None:  # the graph cannot find k (allowed) rows cheaply: exact over them all
            return super()._ranked(query, k, allowed)
        return self._exact_rows(query, k, np.concatenate([from_graph, tail]))

    def _graph_candidates(self, query: Scores, k: int, share: float, keep: Callable[[Rows], Rows],
                          most: int | None) -> Rows | None:
        """At least ``k`` of the graph rows nearest ``query`` that ``keep`` keeps (live and passing;
        ``share``: the part of the live rows expected to pass), sorted; asking for more while short.
        None when the graph would have to return more than ``most`` or half of what it holds:
        cheaper (and exact) to scan."""
        graph_live = max(1, self._rows.live_count)
        fraction = min(1.0, graph_live / max(1, len(self._graph))) * share
        wanted = (_b1_candidates(k, len(self._graph), self.b1_base, self._projections(), self._graph_expansion)
                  if self.quantization == "b1"
                  else math.ceil(1.25 * k) + 8)
        fetch = math.ceil(wanted / max(fraction, 1e-9))
        while (most is None or fetch <= most) and 2 * fetch <= len(self._graph):
            keys = keep(np.asarray(self._graph.search(self._graph_vectors(query), fetch).keys, dtype=np.int64))
            if len(keys) >= k:
                return np.sort(keys)
            fetch *= 4
        return None

    def _ranked_mask(self, query: Scores, k: int, mask: np.ndarray[Any, np.dtype[np.bool_]]) -> tuple[Rows, Scores]:
        allowed = np.flatnonzero(mask)
        if (self._graph is None and not self._pending_rows) or len(allowed) <= self.exact_allowed:
            return self._exact_rows(query, k, allowed)
        share = len(allowed) / max(1, self._rows.live_count)
        if self.quantization == "b1" and share < GRAPH_SHARE:
            return self._exact_rows(query, k, self._sign_candidates(query, k, allowed))
        if not self._has_graph():
            return self._exact_rows(query, k, allowed)
        start, end = self._graph_rows, self._rows.rows
        tail = start + np.flatnonzero(mask[start:end])
        from_graph = self._graph_candidates(query, max(0, k - len(tail)), share, lambda keys: keys[mask[keys]],
                                            most=None)
        if from_graph is None:  # the graph cannot find k cheaply: exact over them all
            return self._exact_rows(query, k, allowed)
        return self._exact_rows(query, k, np.concatenate([from_graph, tail]))

    def _prepare_mask(self) -> None:
        """Pack every row's sign bits (and keep them on disk) when a graph will rank masked rows by them."""
        if self.quantization == "b1" and (self._graph is not None or self._pending_rows):
            self._sign_bits().take(np.zeros(0, dtype=np.int64), self._rows.rows, self._rows.matrix())

    def _sign_bits(self) -> SignBits:
        if self._signs is None:
            self._signs = SignBits(self.folder, self._rows.generation, self._meta.dim, read_only=self.read_only)
        return self._signs

    def _sign_candidates(self, query: Scores, k: int, allowed: Rows | None) -> Rows:
        """The allowed (None: live) rows nearest ``query`` by the Hamming distance of their sign
        bits, as many as a graph of the signs alone would re-score for a top ``k`` among that many
        rows (unfiltered: up to twice that, see below), sorted."""
        signs, packed_query = self._sign_bits(), np.packbits(query > 0)
        if allowed is None:
            distance = signs.distances(packed_query, self._rows.rows, self._rows.matrix())
            live = self._rows.live_mask()
            distance[~live] = np.iinfo(np.uint16).max  # dead rows last, and dropped below
            count = self._rows.live_count
        else:
            distance = hamming(signs.take(allowed, self._rows.rows, self._rows.matrix()), packed_query)
            count = len(allowed)
        wanted = _b1_candidates(k, count, self.b1_base)
        if allowed is None:  # a handle's first search: up to twice as many, as the graph's two projections
            # find more among as many; no more than one product without BLAS re-scores (threadpoolctl's
            # import alone would cost a cold start ~10 ms)
            wanted = max(wanted, min(2 * wanted, SMALL_PRODUCT))
        wanted = min(count, wanted)
        picked = nearest(distance, wanted)
        if allowed is None:
            return picked[live[picked]]
        return np.sort(allowed[picked])

    def _keep_allowed(self, rows: Rows, allowed: Collection[str]) -> Rows:
        ids = self._rows.ids
        return rows[[ids[r] in allowed for r in rows.tolist()]] if len(rows) else rows
