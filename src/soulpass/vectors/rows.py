"""The rows behind the local backends: an append-only float32 file and a log of id -> row.

Layout of the folder (``G`` is the generation named in ``state.json``)::

    meta.json          backend, model_id, dim (base.open_meta)
    state.json         {"generation": G}
    vectors-G.f32      row r = dim float32 values at offset r * dim * 4, unit length, never rewritten
    journal-G.log      the row log (its file name kept from earlier releases, so their folders open
                       as they are): frames [u32 length][u32 crc32][JSON]: {"u": [ids], "at": r0, "dead": [rows]} gives
                       ids[j] row r0+j and names the rows that died by it (the ids' older rows),
                       {"d": [ids], "rows": [rows]} forgets ids (their rows). Frames of an earlier
                       release carry no row lists: their dead rows are found by id
    ids-G-R.keys.npy   the live ids of rows [0, R) as sorted fixed-width UTF-8, and beside it
    ids-G-R.rows.npy   their rows: a derived checkpoint (written each time the rows grew by a
                       quarter), memory-mapped to find ids' rows without an id -> row map
    ids-G-R.at.json    where in the row log that checkpoint was taken and the crc32 of its two
                       arrays: opening starts from the checkpoint and replays the row log after it
    signs-G-R.b1       the sign bits of rows [0, R), packed (``signs.py``; derived, the HNSW backend's)
    lock               flock held while the index is open for writing

Why this shape: rows are only ever appended, so an update is "new row, old row dead" and a write
can tear only past the committed end. ``append`` writes the rows, fsyncs, then appends one row log
frame and fsyncs: the frame is the commit point. On open a torn or unchecked row log tail is cut
off and vector bytes past the last committed row are truncated. Because row numbers never change
within a generation, an ANN graph keyed by row stays valid as rows are added and deleted.
``compact`` (when dead rows outweigh live ones) writes generation G+1 with live rows only and
switches by rewriting ``state.json`` atomically; files of other generations are swept on open.

One process writes (it holds ``lock``); a store opened while another process holds it is a reader:
it never writes, truncates or sweeps, reads only intact frames, and ``refresh`` catches it up with
what the writer committed since (a new generation reopens it). Rows are written and fsynced before
the frame that names them, so a reader never sees a row that is not whole.

Opening replays the row log into the row -> id list and the live mask only: because each frame
names the rows it killed, no id -> row map is needed for that (building one for 1M rows costs
~0.5 s). Where a checkpoint says where in the row log it was taken (and its bytes check), the rows
it covers come from its arrays (``row_ids.RowIds``: an id is decoded when asked for) and only the frames
after it are replayed: parsing 1M ids out of the row log's JSON cost a fresh process ~0.15 s.
``rows_for`` finds a few ids' rows by binary search in the sorted-ids checkpoint, then by
a small map of the rows written after it; the whole map is built when a write first needs it and
kept up to date after. A checkpoint row is trusted only if that row still holds that id, so a stale,
lost or damaged checkpoint is only slower, never wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from soulpass.errors import BackendUnavailable, Corrupted
from soulpass.store.fsio import atomic_write, dump_json, file_lock, fsync_dir, load_json, makedirs_durable
from soulpass.vectors.base import SAVE_MIN_ROWS, Matrix
from soulpass.vectors.row_ids import RowIds

__all__ = ["RowIds", "RowStore", "numbered_files"]

_HEADER = struct.Struct("<II")
# The row log's file name and its checkpoint key say "journal": names kept from earlier releases, so
# their folders open as they are (and their code opens ours). In the code it is the row log.
_AT_LOG_END = "journal_end"

_GEN_FILE = re.compile(
    r"^(vectors|journal|graph|ids|signs)-(\d+)(-\d+)?\.(f32|log|usearch|json|keys\.npy|rows\.npy|at\.json|b1)$")
# A sorted-ids checkpoint from SAVE_MIN_ROWS rows on, then one each time the rows grow by a quarter
# ... and on a writer's close when rows grew by a 32nd since: an import that ends 44k rows after the
# last checkpoint (1M rows) made every later open replay them and map their ids (~13 ms); saving one
# costs ~0.2 s at 1M, against the minutes that embedding those rows took.
CLOSE_CHECKPOINT_SHARE = 32


def _row_log_name(generation: int) -> str:
    return f"journal-{generation}.log"


def numbered_files(folder: Path, prefix: str, suffix: str) -> list[tuple[int, Path]]:
    """The files ``<prefix><N><suffix>`` in ``folder`` (a derived file names the rows it covers) as
    ``(N, path)``, fewest rows first."""
    found = []
    for path in folder.glob(f"{prefix}*{suffix}"):
        covered = path.name[len(prefix):-len(suffix)]
        if covered.isdigit():
            found.append((int(covered), path))
    return sorted(found)


class RowStore:
    """Unit vectors by row, the live id of each row, durable appends and deletes."""

    def __init__(self, folder: Path, dim: int) -> None:
        self.folder = folder
        self.dim = dim
        self._row_bytes = dim * 4
        makedirs_durable(folder)
        self._lock: contextlib.ExitStack | None = None  # holds the writer's flock while open
        self._row_of: dict[str, int] | None = None  # built on first use
        self._checkpoint: tuple[npt.NDArray[Any], npt.NDArray[np.int64], int] | None = None
        self._tail: tuple[int, dict[str, int]] | None = None  # rows after the checkpoint: (rows, id -> row)
        self._closed = False
        self.read_only = not self._take_lock()  # another process writes this index: read what it commits
        try:
            self._open_generation()
        except BaseException:
            self._release_lock()
            raise

    # -- reading ---------------------------------------------------------------------------------

    @property
    def rows(self) -> int:
        """Rows written in this generation, dead ones included."""
        return len(self.ids)

    @property
    def live_count(self) -> int:
        return self._live_count

    def rows_for(self, ids: Iterable[str]) -> dict[str, int]:
        """The live row of each of ``ids`` that has one; without building the whole id -> row map
        when the sorted-ids checkpoint covers most rows."""
        if self._row_of is not None or self._checkpoint is None:
            row_of = self.row_of
            return {i: row_of[i] for i in ids if i in row_of}
        keys, rows, covered = self._checkpoint
        tail = self._tail_map(covered)
        found = {i: tail[i] for i in ids if i in tail and self.ids[tail[i]] == i}  # not forgotten since
        rest = [i for i in ids if i not in found]
        if rest:
            encoded = [i.encode("utf-8") for i in rest]
            fits = [n for n, b in enumerate(encoded) if len(b) <= keys.dtype.itemsize]
            wanted = np.array([encoded[n] for n in fits], dtype=keys.dtype)
            at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
            hit = keys[at] == wanted
            for n, pos, ok in zip(fits, at.tolist(), hit.tolist(), strict=True):
                row = int(rows[pos]) if ok else -1
                if ok and self.ids[row] == rest[n]:  # still that id's row (it may have died or moved on)
                    found[rest[n]] = row
        return found

    def _tail_map(self, covered: int) -> dict[str, int]:
        """Id -> row for the rows written after the checkpoint (rebuilt when rows were added)."""
        if self._tail is None or self._tail[0] != self.rows:
            tail: dict[str | None, int] = dict(zip(self.ids[covered:], range(covered, self.rows), strict=True))
            tail.pop(None, None)  # dead rows (a later row of the same id wins, as in ``row_of``)
            self._tail = (self.rows, cast("dict[str, int]", tail))
        return self._tail[1]

    @property
    def row_of(self) -> dict[str, int]:
        """Live id -> its row; built on first use (a search by vector never needs it)."""
        if self._row_of is None:
            row_of: dict[str | None, int] = dict(zip(self.ids, range(len(self.ids)), strict=True))  # C loop
            row_of.pop(None, None)  # a dead row's id is None
            self._row_of = cast("dict[str, int]", row_of)
        return self._row_of

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
        self._check_writable()
        first = self.rows
        data = np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
        _pwrite_all(self._vectors_fd, data, first * self._row_bytes)
        os.fsync(self._vectors_fd)
        dead = self._dying(ids, first)
        self._write_frame({"u": ids, "at": first, "dead": dead})
        self._replay_upsert(ids, first, dead)
        self._remap()
        covered = self._checkpoint[2] if self._checkpoint is not None else 0
        if self.rows >= SAVE_MIN_ROWS and self.rows - covered >= max(SAVE_MIN_ROWS, covered // 4):
            self._save_checkpoint()

    def forget(self, ids: list[str]) -> None:
        """Kill the rows of ids that are live; others are ignored. Durable on return."""
        present = [i for i in ids if i in self.row_of]
        if present:
            self._check_writable()
            self._write_frame({"d": present, "rows": [self.row_of[i] for i in present]})
            self._apply_delete(present)

    def needs_compaction(self) -> bool:
        dead = self.rows - self.live_count
        return dead >= 4096 and dead > self.live_count

    def compact(self) -> None:
        """Write a new generation holding only live rows (renumbered in row order) and switch to it."""
        self._check_writable()
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
        payload = json.dumps({"u": ids, "at": 0, "dead": []}).encode()
        with open(self.folder / _row_log_name(new), "wb") as fh:
            fh.write(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(self.folder)
        atomic_write(self.folder / "state.json", dump_json({"generation": new}))
        self._close_files()
        self._open_generation()
        if self.rows >= SAVE_MIN_ROWS:
            self._save_checkpoint()

    def refresh(self) -> bool:
        """A reader catches up with what the writing process committed since, or becomes the writer
        once that process has let go (a server started beside a short ``soulpass search`` must not
        stay a reader); True when it moved."""
        if not self.read_only or self._closed:
            return False
        if self._take_lock():
            self.read_only = False
            self._close_files()
            self._open_generation()
            return True
        if _generation_in(self.folder / "state.json") != self._generation:  # compacted meanwhile
            self._close_files()
            self._open_generation()
            return True
        if os.fstat(self._log_fd).st_size <= self._log_end:
            return False
        self._apply_frames(self._log_end)
        self._remap()
        return True

    def close(self) -> None:
        if self._closed:
            return
        covered = self._checkpoint[2] if self._checkpoint is not None else 0
        if (not self.read_only and self.rows >= SAVE_MIN_ROWS
                and self.rows - covered >= max(SAVE_MIN_ROWS, covered // CLOSE_CHECKPOINT_SHARE)):
            with contextlib.suppress(OSError):  # derived (a full disk): the next open replays them instead
                self._save_checkpoint()  # the next open replays (and maps) none of these rows
        self._closed = True
        self._close_files()
        self._release_lock()

    def _take_lock(self) -> bool:
        lock = contextlib.ExitStack()
        try:
            lock.enter_context(file_lock(self.folder / "lock", create_parent=False, blocking=False))
        except BlockingIOError:
            return False
        self._lock = lock
        return True

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _check_writable(self) -> None:
        if self.read_only:
            raise BackendUnavailable(f"vector index at {self.folder} is written by another process; "
                                     "this handle only reads it", path=str(self.folder))

    # -- internals -------------------------------------------------------------------------------

    def _open_generation(self) -> None:
        state = self.folder / "state.json"
        if not state.exists() and not self.read_only:
            atomic_write(state, dump_json({"generation": 0}))
        self._generation = _generation_in(state)
        if not self.read_only:
            self._sweep_other_generations()
        self._reset_rows()
        flags = os.O_RDONLY if self.read_only else os.O_RDWR | os.O_CREAT
        self._log_fd = os.open(self.row_log_path, flags, 0o644)
        self._vectors_fd = os.open(self.vectors_path, flags, 0o644)
        self._log_end = 0
        if not self.read_only:
            fsync_dir(self.folder)
        start = self._resume()
        try:
            self._apply_frames(start)
            # no intact frame where the checkpoint says: replaying from there would cut the row log
            moved_on = self._log_end > start or os.fstat(self._log_fd).st_size == start
        except Corrupted:  # the row log after the checkpoint does not follow on from it
            if not start:
                raise
            moved_on = False
        if start and not moved_on:
            self._reset_rows()
            self._apply_frames(0)
        self._checkpoint = self._load_checkpoint()
        if self.read_only:
            self._remap()
            return
        if os.fstat(self._log_fd).st_size > self._log_end:  # a torn last frame: it never committed
            os.ftruncate(self._log_fd, self._log_end)
            os.fsync(self._log_fd)
        os.lseek(self._log_fd, 0, os.SEEK_END)
        size = os.fstat(self._vectors_fd).st_size
        committed = self.rows * self._row_bytes
        if size < committed:
            raise Corrupted(f"{self.vectors_path} holds {size // self._row_bytes} rows, the row log names "
                            f"{self.rows}; rebuild the index", path=str(self.vectors_path))
        if size > committed:  # rows written before a crash, never committed by a frame
            os.ftruncate(self._vectors_fd, committed)
            os.fsync(self._vectors_fd)
        self._remap()

    def _reset_rows(self) -> None:
        self.ids = RowIds()
        self._row_of, self._checkpoint, self._tail = None, None, None
        self._live_count = 0
        self._live = np.zeros(1024, dtype=np.bool_)
        self._log_end = 0

    def _resume(self) -> int:
        """Take the rows the newest checkpoint covers from its arrays, if it says where in the row log
        it was taken and its bytes check: the row log offset to replay from (0: no such checkpoint)."""
        found = self._load_checkpoint(bounded=False)
        if found is None:
            return 0
        keys, rows, covered = found
        try:
            at = load_json(self._checkpoint_paths(covered)[2])
            end, crc = int(at[_AT_LOG_END]), int(at["crc32"])
        except (OSError, ValueError, KeyError, TypeError, Corrupted):  # derived: not there, or damaged
            return 0
        if end > os.fstat(self._log_fd).st_size or _crc(keys, rows, end) != crc:
            return 0
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= covered):
            return 0
        head = np.zeros(covered, dtype=keys.dtype)
        head[rows] = keys
        self.ids = RowIds(head)
        self._grow(covered)
        self._live[rows] = True
        self._live_count = len(rows)
        self._log_end = end
        return end

    def _apply_frames(self, start: int) -> None:
        """Apply the intact frames of the row log from byte ``start`` on."""
        log_path = self.row_log_path
        for end, frame in _read_frames(log_path, start):
            if "u" in frame:
                if frame.get("at") != self.rows:
                    raise Corrupted(f"{log_path}: frame at byte {self._log_end} starts at row {frame.get('at')}, "
                                    f"expected {self.rows}; rebuild the index", path=str(log_path))
                dead = frame.get("dead")
                if isinstance(dead, list) and type(frame["u"]) is list:
                    self._replay_upsert(frame["u"], self.rows, dead)
                else:
                    self._apply_upsert(_ids(frame["u"]), self.rows)
            else:
                rows = frame.get("rows")
                if isinstance(rows, list):
                    self._kill(rows)
                else:
                    self._apply_delete(_ids(frame["d"]))
            self._log_end = end

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def vectors_path(self) -> Path:
        return self.folder / f"vectors-{self._generation}.f32"

    @property
    def row_log_path(self) -> Path:
        return self.folder / _row_log_name(self._generation)

    def _checkpoint_paths(self, covered: int) -> tuple[Path, Path, Path]:
        stem = f"ids-{self._generation}-{covered}"
        return self.folder / f"{stem}.keys.npy", self.folder / f"{stem}.rows.npy", self.folder / f"{stem}.at.json"

    def _save_checkpoint(self) -> None:
        """Sorted live ids of every row now, and their rows (temp + rename; derived, so not fsynced:
        a lost or torn one is ignored on open). Older checkpoints are removed."""
        live = np.flatnonzero(self.live_mask())
        keys, nul = self.ids.encoded(live)
        order = np.argsort(keys, kind="stable")
        keys_path, rows_path, at_path = self._checkpoint_paths(self.rows)
        sorted_keys, sorted_rows = keys[order], live[order].astype(np.int64)
        for path, array in ((keys_path, sorted_keys), (rows_path, sorted_rows)):
            tmp = path.with_name(f".{path.name}.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, array)
            os.replace(tmp, path)
        if not nul:  # fixed-width bytes would lose a trailing NUL
            end = os.lseek(self._log_fd, 0, os.SEEK_CUR)
            at = {_AT_LOG_END: end, "crc32": _crc(sorted_keys, sorted_rows, end)}
            tmp = at_path.with_name(f".{at_path.name}.tmp")
            tmp.write_bytes(dump_json(at))
            os.replace(tmp, at_path)
        old = self._checkpoint
        self._checkpoint, self._tail = self._load_checkpoint(), None
        if old is not None and old[2] != self.rows:  # not the files just written (the same row count)
            for path in self._checkpoint_paths(old[2]):
                path.unlink(missing_ok=True)

    def _load_checkpoint(self, bounded: bool = True) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64], int] | None:
        """The newest readable checkpoint of this generation covering no more rows than there are
        (``bounded``; before the row log is read: any)."""
        found = [n for n, _ in numbered_files(self.folder, f"ids-{self._generation}-", ".keys.npy")
                 if n <= self.rows or not bounded]
        for start in reversed(found):
            keys_path, rows_path, _ = self._checkpoint_paths(start)
            try:
                keys, rows = np.load(keys_path, mmap_mode="r"), np.load(rows_path, mmap_mode="r")
            except (OSError, ValueError):
                continue
            if keys.ndim == 1 and keys.dtype.kind == "S" and rows.shape == keys.shape and rows.dtype == np.int64 \
                    and len(keys) > 0:
                return keys, rows, start
        return None

    def _sweep_other_generations(self) -> None:
        for path in self.folder.iterdir():
            m = _GEN_FILE.match(path.name)
            if (m and int(m.group(2)) != self._generation) or path.name.startswith((".graph-", ".ids-")):
                path.unlink(missing_ok=True)

    def _dying(self, ids: list[str], first: int) -> list[int]:
        """The rows an upsert of ``ids`` at row ``first`` kills: the ids' live rows, and the earlier
        rows of an id twice in the batch (its last row holds)."""
        row_of = self.row_of
        if row_of.keys().isdisjoint(ids) and len(set(ids)) == len(ids):  # new ids: C loops only
            return []
        last = {id_: first + offset for offset, id_ in enumerate(ids)}
        dead = sorted(row for id_ in last if (row := row_of.get(id_)) is not None)
        return dead + [first + offset for offset, id_ in enumerate(ids) if last[id_] != first + offset]

    def _grow(self, end: int) -> None:
        if end > len(self._live):
            grown = np.zeros(max(end, 2 * len(self._live)), dtype=np.bool_)
            grown[: len(self._live)] = self._live
            self._live = grown

    def _replay_upsert(self, ids: list[str], first: int, dead: list[int]) -> None:
        """Give ``ids`` rows ``first``… and kill ``dead`` (what the frame names): no id -> row map is
        needed, so opening stays a few C loops per frame."""
        end = first + len(ids)
        self._grow(end)
        self.ids.extend(ids)
        self._live[first:end] = True
        self._live_count += len(ids)
        if self._row_of is not None:
            self._row_of.update(zip(ids, range(first, end), strict=True))  # an id's last row holds
        self._kill(dead)

    def _kill(self, rows: list[int]) -> None:
        for row in rows:
            if not self._live[row]:
                continue
            self._live[row] = False
            old = self.ids[row]
            self.ids.kill(row)
            self._live_count -= 1
            if self._row_of is not None and old is not None and self._row_of.get(old) == row:
                del self._row_of[old]

    def _apply_upsert(self, ids: list[str], first: int) -> None:
        """An upsert whose dead rows are found by id (an earlier release's frame)."""
        self._replay_upsert(ids, first, self._dying(ids, first))

    def _apply_delete(self, ids: list[str]) -> None:
        row_of = self.row_of
        self._kill([row for id_ in ids if (row := row_of.get(id_)) is not None])

    def _write_frame(self, frame: dict[str, object]) -> None:
        payload = json.dumps(frame, ensure_ascii=False).encode("utf-8")
        start = os.lseek(self._log_fd, 0, os.SEEK_CUR)
        try:
            _pwrite_all(self._log_fd, _HEADER.pack(len(payload), zlib.crc32(payload)) + payload, start)
            os.fsync(self._log_fd)
        except BaseException:  # never leave a torn frame that later frames would be written after
            with contextlib.suppress(OSError):
                os.ftruncate(self._log_fd, start)
            raise
        os.lseek(self._log_fd, start + _HEADER.size + len(payload), os.SEEK_SET)

    def _remap(self) -> None:
        if self.rows == 0:
            self._matrix: Matrix = np.zeros((0, self.dim), dtype=np.float32)
        else:
            mapped = np.memmap(self.vectors_path, dtype=np.float32, mode="r", shape=(self.rows, self.dim))
            self._matrix = mapped.view(np.ndarray)  # same pages; fancy indexing without memmap's overhead

    def _close_files(self) -> None:
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        for fd in (self._log_fd, self._vectors_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


def _ids(values: Any) -> list[str]:
    """A frame's ids as strings (they are written as strings: only a foreign frame converts)."""
    if isinstance(values, list) and all(type(v) is str for v in values):
        return values
    return [str(v) for v in values]


def _crc(keys: npt.NDArray[Any], rows: npt.NDArray[np.int64], log_end: int) -> int:
    """crc32 of a checkpoint's keys, rows and row log offset (what its ``.at.json`` vouches for)."""
    crc = zlib.crc32(np.ascontiguousarray(keys).view(np.uint8).data)
    crc = zlib.crc32(np.ascontiguousarray(rows).view(np.uint8).data, crc)
    return zlib.crc32(str(log_end).encode(), crc)


def _generation_in(state: Path) -> int:
    if not state.exists():
        return 0
    try:
        return int(load_json(state)["generation"])
    except (KeyError, TypeError, ValueError) as exc:
        raise Corrupted(f"{state} names no generation", path=str(state)) from exc


def _read_frames(path: Path, offset: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(end offset, frame)`` for each intact frame from byte ``offset``; stop at the first
    torn or unchecked one."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
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
        yield offset + end, frame
        pos = end
