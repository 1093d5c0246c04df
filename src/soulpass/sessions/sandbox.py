"""Sandboxes: a conversation's private view (master at the parent version + its own buffer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soulpass.errors import Conflict, InvalidInput
from soulpass.ids import check_name
from soulpass.sessions.buffer import Limits, SandboxBuffer
from soulpass.store.contract import AccountBackend, SandboxMeta, SandboxStore

if TYPE_CHECKING:
    from soulpass.records import BufferEvent, SessionBuffer

__all__ = [
    "SandboxInfo",
    "create_sandbox",
    "discard_sandbox",
    "list_sandboxes",
    "load_sandbox",
    "refuse_kept",
    "session_buffer_view",
]

MAX_SANDBOX_LABEL = 200


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox's metadata and the store that keeps it (for its buffer)."""

    sandbox_id: str
    name: str
    account: str
    parent_version: int
    created_at: datetime
    sandboxes: SandboxStore = field(repr=False, compare=False)
    archived_as: int | None = None
    kept: bool = False  # archived with items left out, and kept for its history (closed, read-only)

    @classmethod
    def of(cls, meta: SandboxMeta, sandboxes: SandboxStore) -> SandboxInfo:
        return cls(sandbox_id=meta.sandbox_id, name=meta.name, account=meta.account,
                   parent_version=meta.parent_version, created_at=meta.created_at, sandboxes=sandboxes,
                   archived_as=meta.archived_as, kept=meta.kept)

    def buffer(self, limits: Limits | None = None) -> SandboxBuffer:
        return SandboxBuffer(self.sandboxes, self.sandbox_id, limits or Limits())

    def current(self) -> SandboxInfo:
        """The sandbox as the store keeps it now (``NotFound`` once it is removed)."""
        return SandboxInfo.of(self.sandboxes.get(self.sandbox_id), self.sandboxes)

    def remove(self) -> None:
        """Delete the sandbox and its buffer at once (nobody ever sees a half-deleted sandbox).

        The caller holds the buffer lock, so no append is between its checks and its write.
        """
        self.sandboxes.remove(self.sandbox_id)

    @property
    def meta(self) -> SandboxMeta:
        """What the store keeps about the sandbox, without the store."""
        return SandboxMeta(sandbox_id=self.sandbox_id, name=self.name, account=self.account,
                           parent_version=self.parent_version, created_at=self.created_at,
                           archived_as=self.archived_as, kept=self.kept)

    def to_dict(self) -> dict[str, Any]:
        return self.meta.to_dict()


def _check_label(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("sandbox name is empty", field="name")
    if len(name) > MAX_SANDBOX_LABEL or any(ord(c) < 32 for c in name):
        raise InvalidInput(
            f"sandbox name must be at most {MAX_SANDBOX_LABEL} printable characters", field="name"
        )
    return name


def create_sandbox(store: AccountBackend, name: str, sandbox_id: str | None = None) -> SandboxInfo:
    """Record the parent version (HEAD) and an empty buffer; the master is only read."""
    label = _check_label(name)
    sid = check_name(sandbox_id, "sandbox id") if sandbox_id is not None else None
    return SandboxInfo.of(store.sandboxes.create(label, store.head(), sid), store.sandboxes)


def load_sandbox(store: AccountBackend, sandbox_id: str) -> SandboxInfo:
    return SandboxInfo.of(store.sandboxes.get(sandbox_id), store.sandboxes)


def refuse_kept(info: SandboxInfo) -> SandboxInfo:
    """``info``, unless it is a kept sandbox: that one is closed and read through its history only
    (``consolidation.sandbox_history``): it holds what was left out of memory, which a sandbox's
    reads, open to an agent, must never show again."""
    if info.kept:
        raise Conflict(f"sandbox {info.sandbox_id} was archived as version {info.archived_as} with items left out; "
                       "it is closed: its history is read with sandbox_history (an owner's)",
                       sandbox_id=info.sandbox_id)
    return info


def list_sandboxes(store: AccountBackend) -> list[SandboxInfo]:
    return [SandboxInfo.of(meta, store.sandboxes) for meta in store.sandboxes.list()]


def discard_sandbox(store: AccountBackend, sandbox_id: str) -> None:
    """Delete the sandbox and its buffer; the master is untouched."""
    info = load_sandbox(store, sandbox_id)
    with info.buffer().locked():
        info = info.current()  # still there once we hold the lock?
        if info.archived_as is not None:
            kept = "; its history is kept: delete it with delete_sandbox_history" if info.kept else ""
            raise Conflict(f"sandbox {sandbox_id} was archived as version {info.archived_as}; "
                           f"nothing to discard{kept}", sandbox_id=sandbox_id)
        info.remove()


def session_buffer_view(info: SandboxInfo, events: list[BufferEvent]) -> SessionBuffer:
    """The seed's session-buffer schema, derived from the buffer's events."""
    from soulpass.records import SessionBuffer

    episodes, turns, candidates, proposals, sensory = [], [], [], [], []
    journal: list[dict[str, Any]] = []  # prose records (not in the seed's schema: an extra key)
    deltas: dict[str, dict[str, Any]] = {}
    profile: dict[str, Any] = {}
    for e in events:
        match e.type:
            case "episode":
                episodes.append(e.data)
            case "turn":
                turns.append(e.data)
            case "semantic_candidate":
                candidates.append(e.data)
            case "state_delta":
                deltas.setdefault(f"{e.data['name']}_state", {}).update(e.data["data"])
            case "core_proposal":
                proposals.append(e.data)
            case "profile_update":
                profile.update(e.data["data"])
            case "sensory":
                sensory.append(e.data)
            case "journal":
                journal.append(e.data)
    last = events[-1].at if events else info.created_at
    return SessionBuffer(
        sandbox_id=info.sandbox_id,
        created_at=info.created_at,
        parent_version=info.parent_version,
        new_episodes=tuple(episodes),
        new_turns=tuple(turns),
        semantic_candidates=tuple(candidates),
        state_deltas=deltas,
        core_proposals=tuple(proposals),
        profile_updates=profile,
        sensory=tuple(sensory),
        **({"journal_entries": tuple(journal)} if journal else {}),
        metadata={
            "name": info.name,
            "turn_count": len(turns),
            "event_count": len(events),
            "duration_seconds": max(0.0, (last - info.created_at).total_seconds()),
        },
    )
