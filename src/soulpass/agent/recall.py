"""The rows of the agent's buffer for ``Sandbox.search_buffered``, built once per event.

``Sandbox.search`` re-reads and re-validates the whole session buffer on every call (about 1.3 s
at 5,000 entries); an agent searches every turn, so its events come from a tail reader and the
rows of the buffer's records are made incrementally here, one per event, and reused. The search
itself is the sandbox's one search (with its demotion of facts the session supersedes).
"""

from __future__ import annotations

from soulpass.index.catalog import CatalogRow
from soulpass.index.catalog.make_rows import buffer_event_row
from soulpass.records import BufferEvent
from soulpass.store.keys import buffer_key

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
