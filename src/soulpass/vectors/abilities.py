"""What a vector index may do beyond the ``VectorIndex`` contract, each a Protocol of its own, and
which of them an open index has: checked once, where the index is opened (``abilities_of``), never
probed by its callers.

* ``ScoresRows``: exact cosines of given rows, in their order (every local index: exact, HNSW, Chroma);
* ``GroupsRows``: each record's best cosine from one product over every row, where a search scores
  every row anyway (exact search, no graph yet);
* ``SearchesMasked``: a search among the rows a mask allows (``soulpass.index.filtered``);
* ``RebuildsGraph``: a graph that can be built again from the rows (HNSW);
* ``SharesFolder``: an index another process may be writing, then read only here;
* ``GivesVectors``: the stored vectors themselves (a passport's ``--vectors``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from soulpass.vectors.groups import GroupBest
    from soulpass.vectors.rows import RowStore

__all__ = ["Abilities", "GivesVectors", "GroupsRows", "RebuildsGraph", "RowMask", "ScoresRows", "SearchesMasked",
           "SharesFolder", "abilities_of"]

RowMask = Callable[["RowStore"], npt.NDArray[np.bool_]]  # which of a local index's rows may be returned


@runtime_checkable
class ScoresRows(Protocol):
    def cosine_array(self, vector: npt.ArrayLike, ids: Sequence[str]) -> npt.NDArray[np.float32]:
        """The exact cosine of each of ``ids`` in their order, below -1 for an id without a vector."""
        ...


@runtime_checkable
class GroupsRows(Protocol):
    def group_best(self, vector: npt.ArrayLike, group_of: Callable[[str], str], *,
                   scan: bool = True) -> GroupBest | None:
        """The best cosine of each group of rows from one product over every row; None where a
        search would not score every row. ``scan=False``: only what the last call kept for this query."""
        ...


@runtime_checkable
class SearchesMasked(Protocol):
    def search_masked(self, vector: npt.ArrayLike, k: int, mask_of: RowMask) -> list[tuple[str, float]]:
        """``search`` among the rows ``mask_of(rows)`` allows."""
        ...

    def prepare_masked(self, mask_of: RowMask) -> None:
        """Build what ``search_masked`` needs before the first one."""
        ...


@runtime_checkable
class RebuildsGraph(Protocol):
    def rebuild_graph(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Build the graph again from the rows; returns the rows it holds."""
        ...


@runtime_checkable
class SharesFolder(Protocol):
    @property
    def read_only(self) -> bool:
        """Another process writes the folder: writes raise ``BackendUnavailable`` here."""
        ...


@runtime_checkable
class GivesVectors(Protocol):
    def vectors_of(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored (unit) vector of each of ``ids`` that has one."""
        ...


@dataclass(frozen=True)
class Abilities:
    """The optional abilities of one open index: each the index itself, or None where it has not that one."""

    rows: ScoresRows | None = None
    groups: GroupsRows | None = None
    masked: SearchesMasked | None = None
    graph: RebuildsGraph | None = None
    shared: SharesFolder | None = None
    vectors: GivesVectors | None = None


def abilities_of(index: object) -> Abilities:
    """Which abilities ``index`` has (asked once, when it is opened)."""
    return Abilities(rows=index if isinstance(index, ScoresRows) else None,
                     groups=index if isinstance(index, GroupsRows) else None,
                     masked=index if isinstance(index, SearchesMasked) else None,
                     graph=index if isinstance(index, RebuildsGraph) else None,
                     shared=index if isinstance(index, SharesFolder) else None,
                     vectors=index if isinstance(index, GivesVectors) else None)
