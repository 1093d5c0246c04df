"""What an archive will do, item by item: the preview a person reviews before a sandbox's writes
stick. Every buffer event that could reach the master is one item, under the event's id (stable
between previews and the archive); the planner (``consolidation.plan``) fills in each item as it
plans it, so the preview (``ConsolidationPlan.preview``) is the very plan an archive commits, never a
second calculation.

An item's ``action``: ``add`` (a new record), ``supersede`` (a new fact that retires committed
ones), ``change`` (core memory, the profile, a state or a clipboard), ``reject`` (a rule refused
it: ``rule`` and ``reason`` say which and why), ``skip-duplicate`` (the master already holds it),
``exclude`` (left out of this archive by the caller).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from soulpass.errors import InvalidInput

if TYPE_CHECKING:
    from soulpass.records import BufferEvent

__all__ = ["Action", "ArchivePreview", "Exclusion", "KeyChange", "PreviewItem", "check_exclusion"]

Action = Literal["add", "supersede", "change", "reject", "skip-duplicate", "exclude"]

# Buffer events that never reach the master (the agent tiers' own bookkeeping): not items.
NOT_ITEMS = frozenset({"wake", "inbox"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class KeyChange(_Frozen):
    """One key of a document (``core``, ``profile``, ``state:<name>``, ``clipboard:<agent>``)
    as the master holds it (``before``) and as the archive leaves it (``after``)."""

    document: str
    key: str
    before: Any = None
    after: Any = None


class PreviewItem(_Frozen):
    """One buffer event and what the archive does with it."""

    id: str  # the buffer event's id: what ``exclude`` names
    kind: str  # turn_user, turn_llm, episode, sensory, fact, journal, state, profile, core, clipboard
    action: Action
    text: str = ""
    temp_ids: tuple[str, ...] = ()  # the temporary id(s) the sandbox gave it
    record_id: str | None = None  # its permanent id (add, supersede); the original it duplicates
    supersedes: tuple[str, ...] = ()  # committed facts it retires
    changes: tuple[KeyChange, ...] = ()  # for documents: each key before and after
    rule: str | None = None  # for a reject or a duplicate: the rule that decided
    reason: str | None = None
    confidence: float | None = None
    review: str | None = None  # why the review policy wants a person to approve it (None: it does not)


class ArchivePreview(_Frozen):
    """A sandbox's archive as planned now against HEAD (``base_version``): each item, and the
    conflicts the plan found. ``needs_review`` lists the items the review policy holds back."""

    sandbox_id: str
    base_version: int
    version: int  # the version the archive would commit (``base_version`` when it commits nothing)
    parent_version: int
    rebased: bool
    empty: bool
    items: tuple[PreviewItem, ...]
    conflicts: tuple[dict[str, Any], ...] = ()

    @property
    def needs_review(self) -> tuple[PreviewItem, ...]:
        return tuple(i for i in self.items if i.review is not None)

    def item(self, item_id: str) -> PreviewItem:
        for it in self.items:
            if it.id == item_id:
                return it
        raise InvalidInput(f"sandbox {self.sandbox_id} has no item {item_id}", field="item")


@dataclass(frozen=True)
class Exclusion:
    """Items (buffer event ids) an archive leaves out, who left them out and why. Recorded in the
    version entry (ids and kinds, never the text: nothing excluded reaches the master); the text
    stays in the sandbox, which such an archive keeps (``consolidation.sandbox_history``)."""

    items: frozenset[str] = frozenset()
    by: str | None = None
    reason: str | None = None

    def entry(self, kinds: dict[str, str], events: int) -> dict[str, Any] | None:
        """The version entry's ``excluded``; ``events``: how many buffer events the archive read
        (the kept sandbox's history tells them from any appended after the commit)."""
        if not self.items:
            return None
        return {"items": [{"id": i, "kind": kinds.get(i, "")} for i in sorted(self.items)],
                "by": self.by, "reason": self.reason, "events": events}


def check_exclusion(exclude: Iterable[str], events: Iterable[BufferEvent], sandbox_id: str) -> frozenset[str]:
    """``exclude`` as a set of item ids, each one an item of this sandbox (``InvalidInput`` naming
    the first that is not)."""
    if isinstance(exclude, str):
        raise InvalidInput("exclude must be a list of item ids, not one string", field="exclude")
    wanted = list(exclude)
    for item in wanted:
        if not isinstance(item, str):
            raise InvalidInput(f"exclude holds {item!r}, which is no item id", field="exclude")
    known = {e.event_id for e in events if e.type not in NOT_ITEMS}
    for item in wanted:
        if item not in known:
            raise InvalidInput(f"sandbox {sandbox_id} has no item {item} to exclude (preview lists its items)",
                               field="exclude")
    return frozenset(wanted)

