"""One open vector index per folder in a process, shared by every handle that opens it.

A local index is written by one process at a time (``rows.py``); inside that process any number of
account handles may open it: they get a :class:`SharedIndex` over the same open index (whose own
lock serialises writes and searches), and the folder is released when the last one closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from soulpass.errors import ConfigError
from soulpass.vectors.abilities import ScoresRows, abilities_of
from soulpass.vectors.base import IndexMeta, VectorIndex

__all__ = ["LocalVectorIndex", "SharedIndex", "open_shared"]


class LocalVectorIndex(VectorIndex, ScoresRows, Protocol):
    """A vector index kept in a local folder: it also scores given rows exactly."""


_guard = threading.Lock()
_open: dict[Path, tuple[LocalVectorIndex, int]] = {}  # folder -> (the index, handles on it)


class SharedIndex:
    """A handle on a process-wide open index: a ``VectorIndex`` whose ``close`` releases this handle.
    ``abilities`` says, once, what the index behind it can do besides (``abilities.py``)."""

    def __init__(self, folder: Path, index: LocalVectorIndex) -> None:
        self._folder, self._index, self._closed = folder, index, False
        self.abilities = abilities_of(index)

    @property
    def meta(self) -> IndexMeta:
        return self._index.meta

    @property
    def read_only(self) -> bool:
        """Another process writes the folder (see ``rows.py``): writes raise ``BackendUnavailable``."""
        return self.abilities.shared is not None and self.abilities.shared.read_only

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        self._index.upsert(ids, vectors)

    def delete(self, ids: Sequence[str]) -> None:
        self._index.delete(ids)

    def search(self, vector: npt.ArrayLike, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        return self._index.search(vector, k, allowed)

    def cosine_array(self, vector: npt.ArrayLike, ids: Sequence[str]) -> npt.NDArray[np.float32]:
        """The exact cosine of each of ``ids`` in their order, ``NO_ROW`` for one without a vector."""
        return self._index.cosine_array(vector, ids)

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


def open_shared(folder: str | Path, wanted: IndexMeta, opener: Callable[[Path], LocalVectorIndex]) -> SharedIndex:
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
