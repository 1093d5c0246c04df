"""``SearchResults``: the hits of a search, and whether records not embedded yet may be missing."""

from __future__ import annotations

from collections.abc import Iterable

from soulpass.index.account import AccountIndex
from soulpass.index.search import Hit

__all__ = ["SearchResults", "search_results"]


class SearchResults(list[Hit]):
    """A list of hits, best first. ``pending_embeddings`` records are committed and found by full text
    but have no vector yet (background indexing is behind): the dense half of the ranking cannot see
    them, so ``incomplete`` results may miss some that only match by meaning."""

    def __init__(self, hits: Iterable[Hit] = (), pending_embeddings: int = 0, dense_error: str | None = None) -> None:
        super().__init__(hits)
        self.pending_embeddings = pending_embeddings
        self.dense_error = dense_error  # why the query could not be embedded: full-text results only

    @property
    def incomplete(self) -> bool:
        return self.pending_embeddings > 0 or self.dense_error is not None

    @property
    def note(self) -> str | None:
        """One line for people when ``incomplete``, else None."""
        if not self.incomplete:
            return None
        if self.dense_error is not None:
            return f"full-text results only: the query could not be embedded ({self.dense_error})"
        return (f"{self.pending_embeddings} record(s) are not embedded yet: results may be missing some of them "
                "(full text still finds them)")


def search_results(index: AccountIndex, hits: Iterable[Hit]) -> SearchResults:
    """``hits`` with the index's embedding backlog at this moment."""
    pending = index.backlog.pending() if index.backlog is not None and index.embedder is not None else 0
    return SearchResults(hits, pending, index.dense_error)
