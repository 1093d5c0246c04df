"""The store contract's sandboxes: a sandbox's append-only session log, its metadata, and the
store of an account's sandboxes (re-exported by ``soulpass.store.contract``). Protocols and frozen
values only, no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from soulpass.records import BufferEvent

__all__ = ["PendingEvent", "SandboxMeta", "SandboxStore", "SessionLog", "SessionTail"]


@dataclass(frozen=True)
class PendingEvent:
    """An event to append; ``derived`` names top-level fields Soulpass computed (not size-checked)."""

    type: str
    data: Mapping[str, Any]
    agent: str | None = None
    derived: frozenset[str] = frozenset()


class SessionLog(Protocol):
    """A sandbox's append-only session buffer, shared by several writers."""

    def append_many(self, events: Sequence[PendingEvent], at: datetime | None = None) -> list[BufferEvent]:
        """Append all of ``events`` or none of them; refused once the sandbox is closed.

        The caller checks the values (``sessions.buffer.check_json_safe``: text limits, no NaN);
        the backend refuses what it cannot store and events over its size limit."""
        ...

    def events(self, after: int = 0) -> list[BufferEvent]:
        """Whole events in append order, skipping the first ``after`` (a cursor: events seen)."""
        ...

    def exclusive(self) -> AbstractContextManager[None]:
        """A section no append (nor another archive or discard) runs concurrently with."""
        ...

    def close(self, archived_as: int | None = None) -> None:
        """Remove the buffer: after the archive that made ``archived_as``, or a discard (None); a
        kept sandbox's buffer (``SandboxMeta.kept``) is removed only by deleting its history.

        The caller holds :meth:`exclusive`."""
        ...

    def section(self, name: str) -> AbstractContextManager[None]:
        """A named exclusive section of the sandbox across processes that appends never take
        (``"buffer"`` is :meth:`exclusive`); ``Conflict`` once the sandbox is gone."""
        ...

    def tail(self) -> SessionTail:
        """A reader that parses only what was appended since its last read."""
        ...

    def torn_lines(self) -> int:
        """Lines of the log that hold no whole event (a crash mid-append); they are skipped."""
        ...


class SessionTail(Protocol):
    def events(self) -> list[BufferEvent]:
        """Every whole event so far, in append order."""
        ...


@dataclass(frozen=True)
class SandboxMeta:
    """What a backend keeps about a sandbox besides its session log."""

    sandbox_id: str
    name: str
    account: str
    parent_version: int
    created_at: datetime
    archived_as: int | None = None
    kept: bool = False  # archived and kept, closed and read-only, for its history (``SandboxClose.keep``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sandbox_id": self.sandbox_id,
            "name": self.name,
            "account": self.account,
            "parent_version": self.parent_version,
            "created_at": self.created_at.isoformat(),
            "archived_as": self.archived_as,
            "kept": self.kept,
        }


class SandboxStore(Protocol):
    """An account's sandboxes: their metadata and one :class:`SessionLog` each.

    A sandbox is archived by the commit whose ``Change.closes`` names it (``archived_as`` is set
    from then on) and then removed, unless the commit keeps it (``SandboxClose.keep``: ``kept`` is
    set in the same commit, the sandbox stays closed and read-only, and recovery leaves it); a
    discard removes it without a version, as :meth:`remove` removes a kept one."""

    def create(self, name: str, parent_version: int, sandbox_id: str | None = None) -> SandboxMeta:
        """A new sandbox reading ``parent_version``, with an empty log; ``InvalidInput`` if the id is taken."""
        ...

    def get(self, sandbox_id: str) -> SandboxMeta:
        """The sandbox's metadata; ``NotFound`` once it is removed (or never existed)."""
        ...

    def list(self) -> list[SandboxMeta]:
        """Every sandbox still stored (kept ones, and archived ones whose removal is pending,
        included), oldest first."""
        ...

    def session_log(self, sandbox_id: str, *, max_event_bytes: int | None = None,
                    check: Callable[[PendingEvent], None] | None = None) -> SessionLog:
        """The sandbox's session log; ``check`` refuses an event before it is stored."""
        ...

    def remove(self, sandbox_id: str) -> None:
        """Delete the sandbox and its log at once (nobody sees half of it); the caller holds the
        log's :meth:`SessionLog.exclusive` section."""
        ...
