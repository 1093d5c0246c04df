"""Row -> id of the local vector rows (``rows.py``): a checkpoint's array, then a list.

A ``RowStore`` resumed from its sorted-ids checkpoint holds the ids of the rows it covers as that
checkpoint's fixed-width UTF-8 array put in row order (decoded only when asked for: 1M ids decoded
up front cost a fresh process ~0.15 s) and the ids of later rows in a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

__all__ = ["RowIds"]


class RowIds(Sequence[str | None]):
    """Row -> its live id, None for a dead row, as a list of them would answer: rows below
    ``len(head)`` from a checkpoint's fixed-width UTF-8 array (b"" for a dead row; decoded when
    asked for), later ones from a list."""

    def __init__(self, head: npt.NDArray[Any] | None = None) -> None:
        self._head = head if head is not None else np.zeros(0, dtype="S1")
        self._split = len(self._head)
        self._tail: list[str | None] = []

    def __len__(self) -> int:
        return self._split + len(self._tail)

    @overload
    def __getitem__(self, row: int) -> str | None: ...

    @overload
    def __getitem__(self, row: slice) -> list[str | None]: ...

    def __getitem__(self, row: int | slice) -> str | list[str | None] | None:
        if isinstance(row, slice):
            start, stop, step = row.indices(len(self))
            if step != 1:
                return [self[r] for r in range(start, stop, step)]
            head = [raw.decode("utf-8") if raw else None for raw in self._head[start:min(stop, self._split)].tolist()]
            return head + self._tail[max(0, start - self._split):max(0, stop - self._split)]
        if row < 0:
            row += len(self)
        if 0 <= row < self._split:
            raw = self._head[row]
            return raw.decode("utf-8") if raw else None
        return self._tail[row - self._split]

    def take(self, rows: Sequence[int]) -> list[str | None]:
        """``[self[r] for r in rows]`` (rows in range), without a call per row where no checkpoint
        holds any: a search reads the ids of its best rows so."""
        if not self._split:
            tail = self._tail
            return [tail[r] for r in rows]
        return [self[r] for r in rows]

    def __iter__(self) -> Iterator[str | None]:
        for raw in self._head.tolist():
            yield raw.decode("utf-8") if raw else None
        yield from self._tail

    def kill(self, row: int) -> None:
        """Row ``row`` is dead: it holds no id any more."""
        if row < self._split:
            self._head[row] = b""
        else:
            self._tail[row - self._split] = None

    def extend(self, ids: Iterable[str | None]) -> None:
        self._tail.extend(ids)

    def encoded(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[Any], bool]:
        """The ids of live ``rows`` (ascending) as one fixed-width bytes array, in their order, and
        whether one ends with NUL (which such an array drops). The checkpoint's rows are taken as the
        bytes they are (1M ids: a checkpoint saved in ~0.15 s, not ~0.6 s); none of them ends with NUL, or
        they would not have been resumed from."""
        head = self._head[rows[rows < self._split]]
        tail = [str(self._tail[r - self._split]).encode("utf-8") for r in rows[rows >= self._split].tolist()]
        width = max(1, head.dtype.itemsize if len(head) else 1, max(map(len, tail), default=1))
        keys = np.concatenate([head.astype(f"S{width}"), np.array(tail, dtype=f"S{width}")])
        return keys, any(key.endswith(b"\0") for key in tail)
