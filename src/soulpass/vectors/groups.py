"""The best score of each group of vector rows (a record: its own vector and its passages') for one
query, from one product over every row.

A hybrid search asks the vector index twice per query: the records nearest the query (the best of
their own and their passages' cosines), then the exact cosines of its candidates. Where the index
scores every row anyway (exact search: no graph yet), one product answers both: each row's group is
known once per generation (extended as rows are added), the best per group is one ``np.maximum.at``,
and the nearest records and any candidate's cosine are read off it: no vector id parsed, no id
looked up row by row (what it saves: docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["GROUPED_MOST", "GroupBest", "RowGroups"]

GROUPED_MOST = 1 << 17  # rows: beyond this a search does not score every row (a graph answers)
_NONE = 0  # the group of a row dead when it was grouped (its id is gone): never returned


class RowGroups:
    """The group (``group_of(vector id)``) of each row of one generation of a ``RowStore``."""

    def __init__(self, generation: int, group_of: Callable[[str], str]) -> None:
        self.generation, self.group_of = generation, group_of
        self.keys: list[str | None] = [None]  # group number -> its key (0: rows with no id)
        self.slot: dict[str, int] = {}  # key -> group number
        self.row_group = np.zeros(0, dtype=np.intp)

    @property
    def rows(self) -> int:
        """Rows grouped so far (the generation's first ones)."""
        return len(self.row_group)

    def extend(self, ids: Sequence[str | None]) -> None:
        """Group the next rows, whose ids (None: dead) are ``ids``."""
        keys, slot, group_of = self.keys, self.slot, self.group_of
        new = np.empty(len(ids), dtype=np.intp)
        for n, vid in enumerate(ids):
            if vid is None:
                new[n] = _NONE
                continue
            key = group_of(vid)
            at = slot.get(key)
            if at is None:
                at = slot[key] = len(keys)
                keys.append(key)
            new[n] = at
        self.row_group = np.concatenate([self.row_group, new])

    def best(self, rows: npt.NDArray[np.int64], scores: npt.NDArray[np.float32]) -> GroupBest:
        """The best of ``scores`` (those of the live ``rows``) in each group."""
        best = np.full(len(self.keys), -np.inf, dtype=np.float32)
        if len(rows):
            np.maximum.at(best, self.row_group[rows], scores)
        best[_NONE] = -np.inf
        return GroupBest(self.keys, self.slot, best)


@dataclass
class GroupBest:
    """One query's best score per group: ``-inf`` for a group without a live row."""

    keys: list[str | None]
    slot: dict[str, int]
    best: npt.NDArray[np.float32]
    _listed: list[float] | None = field(default=None, repr=False)

    def top(self, n: int) -> list[str]:
        """The keys of the ``n`` best groups that have a live row, best first (ties: first grouped first)."""
        best = self.best
        count = int(np.count_nonzero(best > -np.inf))
        if count == 0 or n <= 0:
            return []
        n = min(n, count)
        part = np.argpartition(-best, n - 1)[:n] if n < len(best) else np.arange(len(best))
        order = part[np.lexsort((part, -best[part]))]
        keys = self.keys
        return [k for k in (keys[g] for g in order.tolist()) if k is not None]

    def of(self, ids: Iterable[str]) -> dict[str, float]:
        """The best score of each of ``ids`` that has a live row (the others left out)."""
        if self._listed is None:
            self._listed = self.best.tolist()
        listed, slot, known = self._listed, self.slot, len(self._listed)  # groups made since: not scored here
        return {i: score for i in ids
                if (at := slot.get(i)) is not None and at < known and (score := listed[at]) > -np.inf}
