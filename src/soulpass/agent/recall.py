"""Search for the agent tiers: what ``Sandbox.search`` finds, with the buffer's rows built once.

``Sandbox.search`` re-reads and re-validates the whole session buffer on every call (about 1.3 s
at 5,000 entries); an agent searches every turn, so the rows of the buffer's records are made
incrementally here, one per event, and reused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.catalog.make_rows import buffer_event_row
from soulpass.index.search import Hit
from soulpass.records import BufferEvent
from soulpass.store.keys import buffer_key

if TYPE_CHECKING:
    from soulpass.engine import Sandbox

__all__ = ["BufferRows"]


class BufferRows:
    """Catalog rows of one sandbox's buffered records, cached by event id."""

    def __init__(self, sandbox_id: str) -> None:
        self.sandbox_id = sandbox_id
        self.path = buffer_key(sandbox_id)
        self._rows: dict[str, CatalogRow | None] = {}

    def rows(self, events: list[BufferEvent]) -> list[CatalogRow]:
        out = []
        for event in events:
            if event.event_id not in self._rows:
                self._rows[event.event_id] = buffer_event_row(event, self.path, self.sandbox_id)
            row = self._rows[event.event_id]
            if row is not None:
                out.append(row)
        return out

    def search(self, sb: Sandbox, query: str, k: int, events: list[BufferEvent],
               kinds: tuple[str, ...] = ()) -> list[Hit]:
        """Hybrid search over the master as of the sandbox's parent version plus its buffer."""
        acct = sb.account
        at = sb.info.parent_version
        filters = Filters(kinds=kinds, as_of_version=None if at == acct.store.head() else at)
        return list(acct.index().search(query, k, filters, extra=self.rows(events)))
