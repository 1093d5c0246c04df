"""The rows' sign bits, packed, by row: the first stage of a search among many filtered rows.

A filter that passes a share of the rows (one speaker of 13) makes the HNSW graph a poor first
stage: it must return ~13 times the candidates to find enough that pass. Here every row's sign bits
(48 bytes for 384-d) sit in one array by row number, so the passing rows are ranked by Hamming
distance to the query's signs directly, and the best few hundred are re-scored exactly
(``hnsw.py``). Sign bits keep cosine order well for sentence embeddings (docs/performance.md).

Layout: ``signs-G-R.b1`` holds rows ``[0, R)`` of generation G (rows x dim/8 bytes; the name says
how many rows, temp + fsync + rename like the graph). Rows never change within a generation, so the
file only ever grows: rows after it are packed from the float32 rows when first needed and kept in
memory, and written (a new file, the old one removed) when they have grown by a quarter (a reader
of an index another process writes never writes). Derived:
a lost or short file is recomputed from the rows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from soulpass.store.fsio import fsync_dir
from soulpass.vectors.base import SAVE_MIN_ROWS, Matrix
from soulpass.vectors.os_memory import populate
from soulpass.vectors.rows import numbered_files

__all__ = ["SignBits", "hamming", "nearest"]

Packed = npt.NDArray[np.uint8]


class SignBits:
    """Packed sign bits of the rows of one generation of a ``RowStore`` folder."""

    def __init__(self, folder: Path, generation: int, dim: int, *, read_only: bool) -> None:
        self.folder, self.generation, self.read_only = folder, generation, read_only
        self.width = (dim + 7) // 8
        self._saved: Packed = np.zeros((0, self.width), dtype=np.uint8)  # rows [0, len): the file's
        self._tail: Packed = np.zeros((0, self.width), dtype=np.uint8)  # rows after it (grows by half)
        self._tail_rows = 0
        self._populated = False  # the file's pages mapped (``distances``)
        self._load()

    @property
    def rows(self) -> int:
        """Rows packed: the file's and those after it."""
        return len(self._saved) + self._tail_rows

    def _files(self) -> list[tuple[int, Path]]:
        return numbered_files(self.folder, f"signs-{self.generation}-", ".b1")

    def _load(self) -> None:
        for covered, path in reversed(self._files()):
            try:
                if covered == 0 or path.stat().st_size != covered * self.width:
                    raise OSError(f"{path.name} is not {covered} rows long")
                self._saved = np.memmap(path, dtype=np.uint8, mode="r", shape=(covered, self.width))
            except (OSError, ValueError):
                if not self.read_only:
                    path.unlink(missing_ok=True)
                continue
            return

    def take(self, rows: npt.NDArray[np.int64], upto: int, matrix: Matrix) -> Packed:
        """The packed signs of ``rows`` (each below ``upto``), packing rows ``[self.rows, upto)``
        from ``matrix`` first."""
        if upto > self.rows:
            self._pack(upto, matrix)
        saved = len(self._saved)
        if len(rows) == 0 or int(rows.max()) < saved:
            return np.asarray(self._saved[rows])
        out = np.empty((len(rows), self.width), dtype=np.uint8)
        low = rows < saved
        out[low] = self._saved[rows[low]]
        out[~low] = self._tail[rows[~low] - saved]
        return out

    @property
    def saved_rows(self) -> int:
        """Rows whose signs were found in the file."""
        return len(self._saved)

    def distances(self, query: Packed, upto: int, matrix: Matrix) -> npt.NDArray[np.uint16]:
        """The Hamming distance of every row below ``upto`` to the packed ``query`` (packing rows
        ``[self.rows, upto)`` from ``matrix`` first): no gather of the rows."""
        if upto > self.rows:
            self._pack(upto, matrix)
        saved = min(upto, len(self._saved))
        if not self._populated:  # every page is read: mapped at once, not faulted in one by one
            populate(self._saved)  # 1M rows: a scan 22 -> 14 ms, for 1 ms once
            self._populated = True
        head = hamming(self._saved[:saved], query)
        if upto <= saved:
            return head
        return np.concatenate([head, hamming(self._tail[:upto - saved], query)])

    def _pack(self, upto: int, matrix: Matrix) -> None:
        start = self.rows
        if upto - len(self._saved) > len(self._tail):
            grown = np.zeros((max(upto - len(self._saved), len(self._tail) * 3 // 2), self.width), dtype=np.uint8)
            grown[:self._tail_rows] = self._tail[:self._tail_rows]
            self._tail = grown
        at = start - len(self._saved)
        self._tail[at:at + upto - start] = np.packbits(np.asarray(matrix[start:upto]) > 0, axis=-1)
        self._tail_rows = upto - len(self._saved)
        if not self.read_only and self._tail_rows >= max(SAVE_MIN_ROWS, len(self._saved) // 4):
            self._save()

    def save_if_unsaved(self) -> None:
        """Write the rows packed after the file (on close: the next process finds them packed)."""
        if self._tail_rows and not self.read_only:
            self._save()

    def _save(self) -> None:
        final = self.folder / f"signs-{self.generation}-{self.rows}.b1"
        tmp = self.folder / f".{final.name}.tmp"
        with open(tmp, "wb") as f:
            for start in range(0, len(self._saved), 1 << 16):
                f.write(np.asarray(self._saved[start:start + (1 << 16)]).tobytes())
            f.write(self._tail[:self._tail_rows].tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        fsync_dir(self.folder)
        for _, old in self._files():
            if old != final:
                old.unlink(missing_ok=True)
        rows = self.rows
        self._saved = np.memmap(final, dtype=np.uint8, mode="r", shape=(rows, self.width))
        self._populated = False
        self._tail, self._tail_rows = np.zeros((0, self.width), dtype=np.uint8), 0


CHUNK_ROWS = 1 << 15  # rows per step of ``hamming``: its temporaries stay small (and in cache)


def hamming(packed: Packed, query: Packed) -> npt.NDArray[np.uint16]:
    """Hamming distance of each packed row to the packed ``query`` (whole 64-bit words when they fit).

    In steps of ``CHUNK_ROWS`` into reused buffers: at 1M rows one pass over the whole array made
    two 48 MB temporaries, whose first touch cost a fresh process ~0.15 s (0.012 s in steps)."""
    if len(packed) == 0:
        return np.zeros(0, dtype=np.uint16)
    words: npt.NDArray[np.unsignedinteger[Any]] = packed
    q: npt.NDArray[np.unsignedinteger[Any]] = query
    if packed.shape[1] % 8 == 0 and packed.flags.c_contiguous:
        words = np.ndarray((len(packed), packed.shape[1] // 8), dtype=np.uint64, buffer=packed)
        q = np.ascontiguousarray(query).view(np.uint64)
    out = np.empty(len(words), dtype=np.uint16)
    step = min(CHUNK_ROWS, len(words))
    xor = np.empty((step, words.shape[1]), dtype=words.dtype)
    bits = np.empty((step, words.shape[1]), dtype=np.uint8)
    for start in range(0, len(words), step):
        n = min(step, len(words) - start)
        np.bitwise_xor(words[start:start + n], q, out=xor[:n])
        np.bitwise_count(xor[:n], out=bits[:n])
        total = out[start:start + n]  # the columns added one by one: a sum along 6 columns is 2x slower
        total[:] = bits[:n, 0]
        for column in range(1, words.shape[1]):
            np.add(total, bits[:n, column], out=total)
    return out


def nearest(distance: npt.NDArray[np.uint16], wanted: int) -> npt.NDArray[np.int64]:
    """The positions of the ``wanted`` smallest distances, sorted; of equal distances at the cut,
    the first. Hamming distances are small integers: counting them finds the cut in one pass
    (1M rows: ~4 ms, where ``argpartition`` took ~10)."""
    if wanted >= len(distance):
        return np.arange(len(distance), dtype=np.int64)
    if wanted <= 0:
        return np.zeros(0, dtype=np.int64)
    cut = int(np.searchsorted(np.cumsum(np.bincount(distance)), wanted))  # count(distance <= cut) >= wanted
    below = np.flatnonzero(distance < cut)
    # not np.union1d: its first call imports enough of numpy to cost a fresh process ~40 ms
    return np.sort(np.concatenate([below, np.flatnonzero(distance == cut)[:wanted - len(below)]]))
