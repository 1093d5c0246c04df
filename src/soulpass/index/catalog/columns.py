"""The catalog's filter columns in memory: which rows pass a broad filter, for every row at once.

A filter that passes many rows (one speaker of 13, a month of a year) is slow to check in SQLite a
row at a time: listing the 77k ids of one speaker at 1M rows costs ~70 ms, checking 1,600 search
hits ~15 ms. Here the columns such filters read are numpy arrays indexed by catalog row number
(kind, agent, event time, in force), so ``mask(filters)`` answers for all rows in a few
milliseconds and a search checks its hits with one array lookup.

Catalog rows are only appended, and a row changes afterwards in one way: a later version closes it
(``valid_to`` and ``replaced_at`` are set together, ``sync.py``). So catching up is two small
reads: the rows after the highest row held, and the rows closed at a version after the one held
(``replaced_at``, indexed). A rebuild (a new ``generation``) or ``delete_rows`` (which counts its
deletions in ``meta``) reloads everything. Filters the columns do not hold (any but kind, agent and
event time) get None: SQLite answers those, and they are selective anyway.

Loading the columns reads every row (~1.5 s at 1M rows), so they are kept beside the catalog
(``catalog.sqlite.columns.npz``, written after a load and each time the rows grew by a quarter) with
what they reflect: the catalog's ``born`` token (a new catalog file has another), its generation,
deletions, store version and rows. A handle that finds the file catches up from there. Derived: an
unreadable file, or one of another catalog, is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from soulpass.index import tuning

from .query import Filters, as_utc
from .rows import to_us
from .schema import transaction

__all__ = ["CatalogColumns", "CatalogMasks", "ColumnStamp", "catalog_born"]

_NO_TIME = np.iinfo(np.int64).min  # a row without an event time: outside every time range
_GROW = 1.25  # arrays grow by a quarter (amortised appends)
MASKS_KEPT = 8  # filter masks kept per catalog state (a search asks twice; agents repeat their filters)
_A = TypeVar("_A", bound="np.ndarray[Any, Any]")


@dataclass(frozen=True)
class ColumnStamp:
    """What the columns reflect: the catalog (its ``born`` token), its generation, deletions and
    store version."""

    born: str
    generation: int
    deleted: int
    version: int


class CatalogColumns:
    """Kind, agent, event time and "in force" by catalog row number (index = ``catalog.row``)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.stamp: ColumnStamp | None = None
        self.saved_rows = 0  # rows the file on disk holds (0: none)
        self._kind_masks: dict[tuple[tuple[str, ...], int, ColumnStamp | None], npt.NDArray[np.bool_]] = {}
        self.rows = 0  # highest row number held (arrays are longer: they grow by a quarter)
        self._kind = np.full(0, -1, dtype=np.int16)  # -1: no such row
        self._agent = np.full(0, -1, dtype=np.int32)  # -1: no agent
        self._event = np.full(0, _NO_TIME, dtype=np.int64)
        self._in_force = np.zeros(0, dtype=np.bool_)
        self._kinds: dict[str, int] = {}
        self._agents: dict[str, int] = {}

    # -- following the catalog -----------------------------------------------------------------

    def sync(self, conn: sqlite3.Connection) -> ColumnStamp:
        """Catch up with the catalog ``conn`` reads (one read transaction: a consistent snapshot);
        returns the stamp now held. The caller serialises calls (the catalog's lock)."""
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN"
                                     " ('born', 'generation', 'deleted_rows', 'store_version')").fetchall())
            stamp = ColumnStamp(meta.get("born", ""), int(meta.get("generation", 0)), int(meta.get("deleted_rows", 0)),
                                int(meta.get("store_version", 0)))
            if stamp == self.stamp:
                return stamp
            held = self.stamp
            if held is None or (held.born, held.generation, held.deleted) != (stamp.born, stamp.generation,
                                                                               stamp.deleted):
                self._reset()  # reload everything
                held = None
            self._add(conn.execute("SELECT row, kind, agent, event_us, valid_to IS NULL FROM catalog WHERE row > ?"
                                   " ORDER BY row", (self.rows,)).fetchall())
            if held is not None:  # rows closed since: their in-force flag drops
                closed = [row for (row,) in conn.execute(
                    "SELECT row FROM catalog WHERE replaced_at > ? AND valid_to IS NOT NULL", (held.version,))]
                closed_rows = np.asarray(closed, dtype=np.int64)
                self._in_force[closed_rows[closed_rows < len(self._in_force)]] = False
            self.stamp = stamp
            return stamp
        finally:
            if own:
                conn.execute("COMMIT")

    def _add(self, found: list[tuple[int, str, str | None, int | None, int]]) -> None:
        if not found:
            return
        last = found[-1][0]
        if last >= len(self._kind):
            size = max(last + 1, int(len(self._kind) * _GROW))
            self._kind = _grown(self._kind, size, -1)
            self._agent = _grown(self._agent, size, -1)
            self._event = _grown(self._event, size, _NO_TIME)
            self._in_force = _grown(self._in_force, size, False)
        rows, kinds, agents, events, in_force = zip(*found, strict=True)
        at = np.asarray(rows, dtype=np.int64)
        self._kind[at] = [self._kinds.setdefault(k, len(self._kinds)) for k in kinds]
        self._agent[at] = [-1 if a is None else self._agents.setdefault(a, len(self._agents)) for a in agents]
        self._event[at] = [_NO_TIME if e is None else e for e in events]
        self._in_force[at] = np.asarray(in_force, dtype=np.bool_)
        self.rows = max(self.rows, last)

    # -- kept on disk ------------------------------------------------------------------------------

    def save_if_grown(self, path: Path) -> None:
        """Write the columns to ``path`` when they hold a quarter more rows than it (temp + rename;
        no fsync: a file lost or torn is only ignored)."""
        if self.stamp is None or self.rows < max(tuning.SAVE_MIN_ROWS, self.saved_rows + self.saved_rows // 4):
            return
        n = self.rows + 1
        meta = {"born": self.stamp.born, "generation": self.stamp.generation, "deleted": self.stamp.deleted,
                "version": self.stamp.version, "rows": self.rows, "kinds": list(self._kinds),
                "agents": list(self._agents)}
        tmp = path.with_name(f"{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")  # unique; remove_catalog takes it
        try:
            with open(tmp, "wb") as f:
                np.savez(f, kind=self._kind[:n], agent=self._agent[:n], event=self._event[:n],
                         in_force=self._in_force[:n], meta=np.array(json.dumps(meta)))
            os.replace(tmp, path)
        except OSError:  # a full disk or a read-only folder: the columns stay in memory only
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        self.saved_rows = self.rows

    @classmethod
    def load(cls, path: Path, born: str, generation: int, deleted: int) -> CatalogColumns:
        """The columns ``path`` holds if they are this catalog's (``born``, ``generation`` and
        ``deleted`` as now), else empty ones; ``sync`` catches either up."""
        out = cls()
        try:
            with np.load(path, allow_pickle=False) as saved:
                meta = json.loads(str(saved["meta"]))
                if (meta["born"], meta["generation"], meta["deleted"]) != (born, generation, deleted):
                    return out
                arrays = [saved[name] for name in ("kind", "agent", "event", "in_force")]
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, json.JSONDecodeError):
            return out
        n = int(meta["rows"]) + 1
        if any(len(a) != n for a in arrays):
            return out
        out._kind, out._agent, out._event, out._in_force = (
            arrays[0].astype(np.int16), arrays[1].astype(np.int32), arrays[2].astype(np.int64),
            arrays[3].astype(np.bool_))
        out._kinds = {k: n for n, k in enumerate(meta["kinds"])}
        out._agents = {a: n for n, a in enumerate(meta["agents"])}
        out.rows = out.saved_rows = n - 1
        out.stamp = ColumnStamp(born, generation, deleted, int(meta["version"]))
        return out

    # -- asking ----------------------------------------------------------------------------------

    @staticmethod
    def handles(filters: Filters) -> bool:
        """Whether ``mask`` can answer ``filters`` (else SQLite must)."""
        return filters.named() <= {"kinds", "agent", "since", "until"}

    def mask(self, filters: Filters) -> npt.NDArray[np.bool_] | None:
        """For each row number up to ``rows``: whether that row passes ``filters`` (in force now);
        None when the columns do not hold what ``filters`` asks about."""
        if not self.handles(filters):
            return None
        n = self.rows + 1
        if filters.agent is not None and filters.agent not in self._agents:
            return np.zeros(n, dtype=np.bool_)
        keep = self._in_force_of(filters.kinds, n).copy()
        if filters.agent is not None:
            keep &= self._agent[:n] == self._agents[filters.agent]
        event = self._event[:n]
        if filters.since is not None:  # rows without an event time hold the least value: left out
            keep &= event >= _us(filters.since)
        if filters.until is not None:
            keep &= event < _us(filters.until)
            if filters.since is None:
                keep &= event != _NO_TIME
        keep.flags.writeable = False  # shared: kept and handed out again for the same filters
        return keep

    def _in_force_of(self, kinds: tuple[str, ...], n: int) -> npt.NDArray[np.bool_]:
        """Rows in force of one of ``kinds`` (any kind when empty); the last few kept until the
        columns change (every search names the same searchable kinds)."""
        key = (kinds, n, self.stamp)
        found = self._kind_masks.get(key)
        if found is None:
            found = self._in_force[:n].copy()
            if kinds:
                wanted = np.zeros(max(len(self._kinds), 1), dtype=np.bool_)
                wanted[[self._kinds[k] for k in kinds if k in self._kinds]] = True
                found &= wanted[np.maximum(self._kind[:n], 0)] & (self._kind[:n] >= 0)
            if len(self._kind_masks) >= 4:
                self._kind_masks.clear()
            self._kind_masks[key] = found
        return found


class CatalogMasks:
    """The filter columns of one catalog, loaded (from their file, else from SQLite) on first use
    and caught up at each ask, and the masks of the last few filters asked for."""

    def __init__(self, path: Path) -> None:
        self.path = path  # where the columns are kept
        self.columns: CatalogColumns | None = None
        self._masks: dict[tuple[ColumnStamp, Filters], npt.NDArray[np.bool_]] = {}

    def mask(self, conn: sqlite3.Connection, filters: Filters) -> tuple[npt.NDArray[np.bool_], ColumnStamp] | None:
        """``CatalogColumns.mask`` of the catalog ``conn`` reads, as it is now, and the stamp it
        reflects; None for filters the columns do not hold. The caller serialises calls."""
        if not CatalogColumns.handles(filters):
            return None
        if self.columns is None:
            born = catalog_born(conn)
            meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('generation', 'deleted_rows')"))
            self.columns = CatalogColumns.load(self.path, born, int(meta.get("generation", 0)),
                                               int(meta.get("deleted_rows", 0)))
        stamp = self.columns.sync(conn)
        self.columns.save_if_grown(self.path)
        if self._masks and next(iter(self._masks))[0] != stamp:
            self._masks.clear()  # the catalog moved on
        mask = self._masks.get((stamp, filters))
        if mask is None:
            mask = self.columns.mask(filters)
            if mask is None:
                return None
            while len(self._masks) >= MASKS_KEPT:
                del self._masks[next(iter(self._masks))]
            self._masks[(stamp, filters)] = mask
        return mask, stamp


def catalog_born(conn: sqlite3.Connection) -> str:
    """A token made once per catalog file: what is derived from the catalog carries it (a catalog
    deleted and made again starts at the same generation and version)."""
    found = conn.execute("SELECT value FROM meta WHERE key = 'born'").fetchone()
    if found is None:
        with transaction(conn):
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('born', ?)", (os.urandom(8).hex(),))
        found = conn.execute("SELECT value FROM meta WHERE key = 'born'").fetchone()
    return str(found[0])


def _us(when: datetime) -> int:
    us = to_us(as_utc(when))
    assert us is not None
    return us


def _grown(array: _A, size: int, fill: object) -> _A:
    out = np.full(size, fill, dtype=array.dtype)
    out[:len(array)] = array
    return cast("_A", out)
