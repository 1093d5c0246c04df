"""The rows behind the local backends: an append-only float32 file and a journal of id -> row.

Layout of the folder (``G`` is the generation named in ``state.json``)::

    meta.json          backend, model_id, dim (base.open_meta)
    state.json         {"generation": G}
    vectors-G.f32      row r = dim float32 values at offset r * dim * 4, unit length, never rewritten
    journal-G.log      frames [u32 length][u32 crc32][JSON]: {"u": [ids], "at": r0} gives ids[j] row r0+j
                       (an id's older row dies), {"d": [ids]} forgets ids
    lock               flock held while the index is open

Why this shape: rows are only ever appended, so an update is "new row, old row dead" and a write
can tear only past the committed end. ``append`` writes the rows, fsyncs, then appends one journal
frame and fsyncs: the frame is the commit point. On open a torn or unchecked journal tail is cut
off and vector bytes past the last committed row are truncated. Because row numbers never change
within a generation, an ANN graph keyed by row stays valid as rows are added and deleted.
``compact`` (when dead rows outweigh live ones) writes generation G+1 with live rows only and
switches by rewriting ``state.json`` atomically; files of other generations are swept on open.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from soulpass.errors import Conflict, Corrupted
from soulpass.index.vectors.base import Matrix
from soulpass.store.files.fsio import atomic_write, dump_json, fsync_dir, load_json, makedirs_durable

__all__ = ["RowStore"]

_HEADER = struct.Struct("<II")
_GEN_FILE = re.compile(r"^(vectors|journal|graph)-(\d+)(-\d+)?\.(f32|log|usearch)$")


class RowStore:
    """Unit vectors by row, the live id of each row, durable appends and deletes."""

    def __init__(self, folder: Path, dim: int) -> None:
        self.folder = folder
        self.dim = dim
        self._row_bytes = dim * 4
        makedirs_durable(folder)
        self._lock_fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(self._lock_fd)
            raise Conflict(f"vector index at {folder} is open elsewhere", path=str(folder)) from exc
        try:
            self._open_generation()
        except BaseException:
            os.close(self._lock_fd)
            raise

    # -- reading ---------------------------------------------------------------------------------

    @property
    def rows(self) -> int:
        """Rows written in this generation, dead ones included."""
        return len(self.ids)

    @property
    def live_count(self) -> int:
        return len(self.row_of)

    def live_mask(self) -> npt.NDArray[np.bool_]:
        return self._live[: self.rows]

    def matrix(self) -> Matrix:
        """All rows as a read-only ``(rows, dim)`` float32 array (memory-mapped)."""
        return self._matrix

    # -- writing ---------------------------------------------------------------------------------

    def append(self, ids: list[str], vectors: Matrix) -> None:
        """Give each id a new row holding its vector; an id's previous row dies. Durable on return."""
        if not ids:
            return
        first = self.rows
        data = np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
        _pwrite_all(self._vectors_fd, data, first * self._row_bytes)
        os.fsync(self._vectors_fd)
        self._write_frame({"u": ids, "at": first})
        self._apply_upsert(ids, first)
        self._remap()

    def forget(self, ids: list[str]) -> None:
        """Kill the rows of ids that are live; others are ignored. Durable on return."""
        present = [i for i in ids if i in self.row_of]
        if present:
            self._write_frame({"d": present})
            self._apply_delete(present)

    def needs_compaction(self) -> bool:
        dead = self.rows - self.live_count
        return dead >= 4096 and dead > self.live_count

    def compact(self) -> None:
        """Write a new generation holding only live rows (renumbered in row order) and switch to it."""
        old = self._generation
        new = old + 1
        keep = np.flatnonzero(self.live_mask())
        ids = [self.ids[r] for r in keep.tolist()]
        vec_path = self.folder / f"vectors-{new}.f32"
        with open(vec_path, "wb") as fh:
            for start in range(0, len(keep), 65536):
                fh.write(np.ascontiguousarray(self._matrix[keep[start:start + 65536]]).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        payload = json.dumps({"u": ids, "at": 0}).encode()
        with open(self.folder / f"journal-{new}.log", "wb") as fh:
            fh.write(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(self.folder)
        atomic_write(self.folder / "state.json", dump_json({"generation": new}))
        self._close_files()
        self._open_generation()

    def close(self) -> None:
        if self._lock_fd < 0:
            return
        self._close_files()
        os.close(self._lock_fd)
        self._lock_fd = -1

    # -- internals -------------------------------------------------------------------------------

    def _open_generation(self) -> None:
        state = self.folder / "state.json"
        if not state.exists():
            atomic_write(state, dump_json({"generation": 0}))
        try:
            self._generation = int(load_json(state)["generation"])
        except (KeyError, TypeError, ValueError) as exc:
            raise Corrupted(f"{state} names no generation", path=str(state)) from exc
        self._sweep_other_generations()
        self.ids: list[str | None] = []
        self.row_of: dict[str, int] = {}
        self._live = np.zeros(1024, dtype=np.bool_)
        journal = self.journal_path
        self._journal_fd = os.open(journal, os.O_RDWR | os.O_CREAT, 0o644)
        self._vectors_fd = os.open(self.vectors_path, os.O_RDWR | os.O_CREAT, 0o644)
        fsync_dir(self.folder)
        good_end = 0
        for end, frame in _read_frames(journal):
            if "u" in frame:
                if frame.get("at") != self.rows:
                    raise Corrupted(f"{journal}: frame at byte {good_end} starts at row {frame.get('at')}, "
                                    f"expected {self.rows}; rebuild the index", path=str(journal))
                self._apply_upsert([str(i) for i in frame["u"]], self.rows)
            else:
                self._apply_delete([str(i) for i in frame["d"]])
            good_end = end
        if os.fstat(self._journal_fd).st_size > good_end:  # a torn last frame: it never committed
            os.ftruncate(self._journal_fd, good_end)
            os.fsync(self._journal_fd)
        os.lseek(self._journal_fd, 0, os.SEEK_END)
        size = os.fstat(self._vectors_fd).st_size
        committed = self.rows * self._row_bytes
        if size < committed:
            raise Corrupted(f"{self.vectors_path} holds {size // self._row_bytes} rows, the journal names "
                            f"{self.rows}; rebuild the index", path=str(self.vectors_path))
        if size > committed:  # rows written before a crash, never committed by a frame
            os.ftruncate(self._vectors_fd, committed)
            os.fsync(self._vectors_fd)
        self._remap()

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def vectors_path(self) -> Path:
        return self.folder / f"vectors-{self._generation}.f32"

    @property
    def journal_path(self) -> Path:
        return self.folder / f"journal-{self._generation}.log"

    def _sweep_other_generations(self) -> None:
        for path in self.folder.iterdir():
            m = _GEN_FILE.match(path.name)
            if (m and int(m.group(2)) != self._generation) or path.name.startswith(".graph-"):
                path.unlink(missing_ok=True)

    def _apply_upsert(self, ids: list[str], first: int) -> None:
        end = first + len(ids)
        if end > len(self._live):
            grown = np.zeros(max(end, 2 * len(self._live)), dtype=np.bool_)
            grown[: len(self._live)] = self._live
            self._live = grown
        for offset, id_ in enumerate(ids):
            old = self.row_of.get(id_)
            if old is not None:
                self._live[old] = False
                self.ids[old] = None
            self.row_of[id_] = first + offset
        self.ids.extend(ids)
        self._live[first:end] = True

    def _apply_delete(self, ids: list[str]) -> None:
        for id_ in ids:
            row = self.row_of.pop(id_, None)
            if row is not None:
                self._live[row] = False
                self.ids[row] = None

    def _write_frame(self, frame: dict[str, object]) -> None:
        payload = json.dumps(frame, ensure_ascii=False).encode("utf-8")
        start = os.lseek(self._journal_fd, 0, os.SEEK_CUR)
        try:
            _pwrite_all(self._journal_fd, _HEADER.pack(len(payload), zlib.crc32(payload)) + payload, start)
            os.fsync(self._journal_fd)
        except BaseException:  # never leave a torn frame that later frames would be written after
            with contextlib.suppress(OSError):
                os.ftruncate(self._journal_fd, start)
            raise
        os.lseek(self._journal_fd, start + _HEADER.size + len(payload), os.SEEK_SET)

    def _remap(self) -> None:
        if self.rows == 0:
            self._matrix: Matrix = np.zeros((0, self.dim), dtype=np.float32)
        else:
            mapped = np.memmap(self.vectors_path, dtype=np.float32, mode="r", shape=(self.rows, self.dim))
            self._matrix = mapped.view(np.ndarray)  # same pages; fancy indexing without memmap's overhead

    def _close_files(self) -> None:
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        for fd in (self._journal_fd, self._vectors_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


def _read_frames(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(end offset, frame)`` for each intact frame; stop at the first torn or unchecked one."""
    data = path.read_bytes()
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, pos)
        start, end = pos + _HEADER.size, pos + _HEADER.size + length
        payload = data[start:end]
        if end > len(data) or zlib.crc32(payload) != crc:
            return
        try:
            frame = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return
        if not isinstance(frame, dict) or not ("u" in frame or "d" in frame):
            return
        yield end, frame
        pos = end
