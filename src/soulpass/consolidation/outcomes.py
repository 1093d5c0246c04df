"""What archiving a sandbox came to: a closed union the adapters (CLI, REST, MCP) ``match`` on.

``Committed``: the sandbox became a version; ``Unchanged``: it held nothing to store, no version;
``Planned``: a dry run; ``AlreadyArchived``: an earlier archive committed it; ``AwaitingReview``:
the review policy wants a person to approve some items first, nothing was committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type here only: importing the planner is an archive's cost, not a search's
    from soulpass.consolidation.plan import ConsolidationPlan
    from soulpass.consolidation.preview import PreviewItem

__all__ = ["AlreadyArchived", "ArchiveResult", "AwaitingReview", "Committed", "Planned", "Unchanged"]


@dataclass(frozen=True)
class Committed:
    """The sandbox became ``version``; ``plan`` says what was added, merged and rejected.
    ``warning``: a step after the commit point failed (a full disk); the version is durable and
    recovery finishes the rest at the next commit or open (None when nothing is left)."""

    version: int
    plan: ConsolidationPlan
    warning: str | None = None


@dataclass(frozen=True)
class AlreadyArchived:
    sandbox_id: str
    version: int


@dataclass(frozen=True)
class Planned:
    """A dry run: what archiving would do, nothing written (``plan.empty``: it would commit nothing)."""

    plan: ConsolidationPlan


@dataclass(frozen=True)
class Unchanged:
    """The sandbox held nothing to store (it was empty, or held only exact repeats of what the
    master has; ``plan.duplicates`` names them): no version was committed, HEAD is still
    ``version``, and the sandbox is removed as an archive would leave it (a second archive of
    it raises ``NotFound``, as after a discard)."""

    sandbox_id: str
    version: int
    plan: ConsolidationPlan


@dataclass(frozen=True)
class AwaitingReview:
    """The archive touches what the review policy (``rules.review``) leaves to a person, and the
    caller may not approve: nothing was committed, the sandbox stays open with all it holds, and
    an approval (``Account.approve``) archives it. ``plan`` is the archive as planned now
    (``plan.preview()`` shows it); ``items`` are the items that need the person."""

    sandbox_id: str
    version: int  # HEAD, unchanged
    plan: ConsolidationPlan

    @property
    def items(self) -> tuple[PreviewItem, ...]:
        return tuple(i for i in self.plan.items if i.review is not None)


ArchiveResult = Committed | AlreadyArchived | Planned | Unchanged | AwaitingReview
