"""One open vector index per folder in a process, shared by every handle that opens it.

A local index is written by one process at a time (``rows.py``); inside that process any number of
account handles may open it: they get a :class:`SharedIndex` over the same open index (whose own
lock serialises writes and searches), and the folder is released when the last one closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from soulpass.errors import ConfigError
from soulpass.index.vectors.base import IndexMeta, VectorIndex
from soulpass.index.vectors.groups import GroupBest

__all__ = ["SharedIndex", "open_shared"]

_guard = threading.Lock()
_open: dict[Path, tuple[VectorIndex, int]] = {}  # folder -> (the index, handles on it)


class SharedIndex:
    """A handle on a process-wide open index: a ``VectorIndex`` whose ``close`` releases this handle."""

    def __init__(self, folder: Path, index: VectorIndex) -> None:
        self._folder, self._index, self._closed = folder, index, False

    @property
    def meta(self) -> IndexMeta:
        return self._index.meta

    @property
    def read_only(self) -> bool:
        """Another process writes the folder (see ``rows.py``): writes raise ``BackendUnavailable``."""
        return bool(getattr(self._index, "read_only", False))

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        self._index.upsert(ids, vectors)

    def delete(self, ids: Sequence[str]) -> None:
        self._index.delete(ids)

    def search(self, vector: npt.ArrayLike, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        return self._index.search(vector, k, allowed)

    def cosines(self, vector: npt.ArrayLike, ids: Collection[str]) -> dict[str, float] | None:
        """The index's exact cosines of ``ids`` (``ExactIndex.cosines``); None where it has none."""
        cosines = getattr(self._index, "cosines", None)
        return cosines(vector, ids) if cosines is not None else None

    def cosine_array(self, vector: npt.ArrayLike, ids: Sequence[str]) -> npt.NDArray[np.float32] | None:
        """The index's ``ExactIndex.cosine_array``; None where it has none."""
        cosine_array = getattr(self._index, "cosine_array", None)
        return cosine_array(vector, ids) if cosine_array is not None else None

    def group_best(self, vector: npt.ArrayLike, group_of: Callable[[str], str], *,
                   scan: bool = True) -> GroupBest | None:
        """The index's ``ExactIndex.group_best``; None where it has none."""
        group_best = getattr(self._index, "group_best", None)
        return group_best(vector, group_of, scan=scan) if group_best is not None else None

    def rebuild_graph(self, progress: Callable[[int, int], None] | None = None) -> int | None:
        """The index's ``HnswIndex.rebuild_graph``; None where it has no graph to rebuild."""
        rebuild = getattr(self._index, "rebuild_graph", None)
        return int(rebuild(progress)) if rebuild is not None else None

    @property
    def inner(self) -> VectorIndex:
        """The shared open index this handle searches."""
        return self._index

    def count(self) -> int:
        return self._index.count()

    def close(self) -> None:
        with _guard:
            if self._closed:
                return
            self._closed = True
            index, handles = _open[self._folder]
            if handles > 1:
                _open[self._folder] = (index, handles - 1)
                return
            del _open[self._folder]
            index.close()


def open_shared(folder: str | Path, wanted: IndexMeta, opener: Callable[[Path], VectorIndex]) -> SharedIndex:
    """A handle on the index in ``folder``: the one already open in this process, else ``opener``'s."""
    key = Path(folder).resolve()
    with _guard:
        found = _open.get(key)
        if found is None:
            index = opener(key)
            _open[key] = (index, 1)
        else:
            index, handles = found
            if index.meta != wanted:
                raise ConfigError(f"vector index at {key} is open as {index.meta}, not {wanted}", path=str(key))
            _open[key] = (index, handles + 1)
        return SharedIndex(key, index)
