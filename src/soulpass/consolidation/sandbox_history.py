"""A kept sandbox's history: what an archive that left items out keeps readable (issue 41).

An archive with exclusions commits what was kept and keeps the sandbox, closed and read-only
(``SandboxClose.keep``), instead of removing it: its whole session log, the excluded items' text
included, stays in the store, never in the master, the index or the vectors. :func:`sandbox_history`
reads it back beside the version entry: each buffer event, whether it went into the archive or was
excluded (and by whom, and why). :func:`delete_sandbox_history` removes it for good.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from soulpass.consolidation.plan_items import item_kind
from soulpass.consolidation.preview import NOT_ITEMS
from soulpass.errors import Conflict, NotFound
from soulpass.records import BufferEvent
from soulpass.sessions import sandbox as sandboxes
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store.contract import AccountBackend, VersionEntry

__all__ = ["HistoryEvent", "Outcome", "SandboxHistory", "delete_sandbox_history", "kept_sandboxes",
           "sandbox_history"]

# archived: the archive read it (the version entry says what became of it: added, merged, rejected,
# a duplicate); excluded: left out, it reached no master, index or vector; late: appended after the
# commit, before the commit's marker was in place (a commit whose last steps failed), never archived.
Outcome = Literal["archived", "excluded", "late"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class HistoryEvent(_Frozen):
    """One event of a kept sandbox's session log and what the archive did with it."""

    event_id: str  # the item id ``exclude`` named, for an item
    type: str  # the buffer event's type (turn, semantic_candidate, profile_update ...)
    kind: str  # the item's kind as the preview names it (turn_user, fact, profile ...)
    at: datetime
    agent: str | None = None
    outcome: Outcome
    record_id: str | None = None  # the permanent id it was committed as (the entry's id map), if any
    text: str = ""
    data: dict[str, Any]


class SandboxHistory(_Frozen):
    """A kept sandbox: its metadata, the version it was archived as, who excluded what and why, and
    every event of its session log in append order."""

    sandbox_id: str
    name: str
    account: str
    parent_version: int
    created_at: datetime
    archived_as: int
    archived_at: datetime | None = None
    excluded_by: str | None = None
    excluded_reason: str | None = None
    events: tuple[HistoryEvent, ...]

    @property
    def excluded(self) -> tuple[HistoryEvent, ...]:
        return tuple(e for e in self.events if e.outcome == "excluded")


def _kept(store: AccountBackend, sandbox_id: str) -> SandboxInfo:
    """The kept sandbox ``sandbox_id``: ``Conflict`` while it is open, ``NotFound`` when no history of
    it is kept (never there, discarded, or archived with nothing left out: removed)."""
    info = sandboxes.load_sandbox(store, sandbox_id)
    if info.archived_as is None:
        raise Conflict(f"sandbox {sandbox_id} is open: it has no history yet (its preview says what an archive "
                       "would do)", sandbox_id=sandbox_id)
    if not info.kept:
        raise NotFound(f"sandbox {sandbox_id} keeps no history: it was archived as version {info.archived_as} "
                       "with nothing left out", sandbox_id=sandbox_id, account=store.name)
    return info


def _entry(store: AccountBackend, version: int) -> VersionEntry | None:
    for entry in store.log(version - 1, lists=False):
        if entry.version == version:
            return entry
    return None  # its commit's last steps are pending: recovery logs it


def _text(event: BufferEvent) -> str:
    data = event.data
    if event.type == "semantic_candidate" and not data.get("content"):
        return " ".join(str(data[k]) for k in ("subject", "predicate", "object") if data.get(k))
    for key in ("text", "content", "text_excerpt", "summary"):
        if isinstance(data.get(key), str):
            return str(data[key])
    # a document change (profile, state, core, clipboard): what it sets, as compact JSON
    return json.dumps(data.get("data", data), ensure_ascii=False, sort_keys=True, default=str)


def sandbox_history(store: AccountBackend, sandbox_id: str) -> SandboxHistory:
    """The history of a kept sandbox (``Conflict`` while it is open, ``NotFound`` when none is kept)."""
    info = _kept(store, sandbox_id)
    assert info.archived_as is not None  # _kept: archived
    entry = _entry(store, info.archived_as)
    fields = entry.fields if entry is not None else {}
    excluded = fields.get("excluded") or {}
    left_out = {str(i["id"]) for i in excluded.get("items") or ()}
    read = excluded.get("events")
    id_map = fields.get("id_map") or {}
    out = []
    for n, event in enumerate(info.buffer().events()):
        if event.type in NOT_ITEMS:
            continue
        outcome: Outcome = ("excluded" if event.event_id in left_out
                            else "late" if isinstance(read, int) and n >= read else "archived")
        temp = event.data.get("id")
        record_id = id_map.get(temp) if outcome == "archived" and isinstance(temp, str) else None
        out.append(HistoryEvent(event_id=event.event_id, type=event.type, kind=item_kind(event), at=event.at,
                                agent=event.agent, outcome=outcome, record_id=record_id, text=_text(event),
                                data=dict(event.data)))
    return SandboxHistory(sandbox_id=info.sandbox_id, name=info.name, account=info.account,
                          parent_version=info.parent_version, created_at=info.created_at,
                          archived_as=info.archived_as, archived_at=entry.timestamp if entry is not None else None,
                          excluded_by=excluded.get("by"), excluded_reason=excluded.get("reason"), events=tuple(out))


def kept_sandboxes(store: AccountBackend) -> list[SandboxInfo]:
    """The account's kept sandboxes, oldest first (never among the open ones)."""
    return [s for s in sandboxes.list_sandboxes(store) if s.kept]


def delete_sandbox_history(store: AccountBackend, sandbox_id: str) -> None:
    """Remove a kept sandbox, its session log with it, for good (``Conflict`` while it is open,
    ``NotFound`` when no history of it is kept). The version entry still names what was excluded
    (ids, kinds, who and why: never the text)."""
    info = _kept(store, sandbox_id)
    with info.buffer().locked():
        info.remove()

