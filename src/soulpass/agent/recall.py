"""Search for the agent tiers: what ``Sandbox.search`` finds, with the buffer's rows built once.

``Sandbox.search`` re-reads and re-validates the whole session buffer on every call (about 1.3 s
at 5,000 entries); an agent searches every turn, so the rows of the buffer's records are made
incrementally here, one per event, and reused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.catalog.rows import buffer_row
from soulpass.index.search import Hit
from soulpass.records import RECORD_MODELS, BufferEvent, SemanticCandidate

if TYPE_CHECKING:
    from soulpass.engine import Sandbox

__all__ = ["BufferRows"]


class BufferRows:
    """Catalog rows of one sandbox's buffered records, cached by event id."""

    def __init__(self, sandbox_id: str) -> None:
        self.sandbox_id = sandbox_id
        self.path = f"sandboxes/{sandbox_id}/session_buffer.jsonl"
        self._rows: dict[str, CatalogRow | None] = {}

    def rows(self, events: list[BufferEvent]) -> list[CatalogRow]:
        out = []
        for event in events:
            if event.event_id not in self._rows:
                self._rows[event.event_id] = self._row(event)
            row = self._rows[event.event_id]
            if row is not None:
                out.append(row)
        return out

    def _row(self, event: BufferEvent) -> CatalogRow | None:
        data = event.data
        if event.type in ("turn", "episode", "sensory") and data.get("kind") in RECORD_MODELS:
            return buffer_row(RECORD_MODELS[data["kind"]].model_validate(data), self.path, self.sandbox_id)
        if event.type == "semantic_candidate" and data.get("id"):
            fact = SemanticCandidate.model_validate(data)
            text = fact.content or " ".join(p for p in (fact.subject, fact.predicate, fact.object) if p)
            return CatalogRow(id=fact.id, kind="fact", version=0, valid_to=None, replaced_at=None,
                              event_time=event.at, agent=event.agent, session_id=self.sandbox_id, persona_id=None,
                              event_id=None, tags=(), superseded_by=None, path=self.path, text=text,
                              semantic_hash="", content_hash="")
        return None

    def search(self, sb: Sandbox, query: str, k: int, events: list[BufferEvent],
               kinds: tuple[str, ...] = ()) -> list[Hit]:
        """Hybrid search over the master as of the sandbox's parent version plus its buffer."""
        acct = sb.account
        at = sb.info.parent_version
        filters = Filters(kinds=kinds, as_of_version=None if at == acct.store.head() else at)
        extra = [r for r in self.rows(events) if not kinds or r.kind in kinds]
        return list(acct.index().search(query, k, filters, extra=extra))
