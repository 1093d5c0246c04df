"""Sandboxes: a conversation's private view (master at the parent version + its own buffer)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from soulpass.errors import Conflict, InvalidInput, NotFound
from soulpass.ids import check_name, new_sandbox_id, utc_now
from soulpass.records import BufferEvent, SessionBuffer
from soulpass.sessions.buffer import Limits, SessionBufferFile
from soulpass.store.files.account import AccountStore
from soulpass.store.files.session_log import ARCHIVED_MARKER, remove_folder
from soulpass.store.fsio import atomic_write, dump_json, fsync_dir, load_json, makedirs_durable
from soulpass.store.keys import sandbox_dir

__all__ = [
    "SandboxInfo",
    "create_sandbox",
    "discard_sandbox",
    "list_sandboxes",
    "load_sandbox",
    "session_buffer_view",
]

MAX_SANDBOX_LABEL = 200


@dataclass(frozen=True)
class SandboxInfo:
    sandbox_id: str
    name: str
    account: str
    parent_version: int
    created_at: datetime
    folder: Path
    archived_as: int | None = None

    def buffer(self, limits: Limits | None = None) -> SessionBufferFile:
        return SessionBufferFile(self.folder, limits or Limits())

    def to_dict(self) -> dict[str, Any]:
        return {
            "sandbox_id": self.sandbox_id,
            "name": self.name,
            "account": self.account,
            "parent_version": self.parent_version,
            "created_at": self.created_at.isoformat(),
            "archived_as": self.archived_as,
        }


def _check_label(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("sandbox name is empty", field="name")
    if len(name) > MAX_SANDBOX_LABEL or any(ord(c) < 32 for c in name):
        raise InvalidInput(
            f"sandbox name must be at most {MAX_SANDBOX_LABEL} printable characters", field="name"
        )
    return name


def create_sandbox(store: AccountStore, name: str, sandbox_id: str | None = None) -> SandboxInfo:
    """Record the parent version and an empty buffer; the master is only read."""
    label = _check_label(name)
    sid = check_name(sandbox_id, "sandbox id") if sandbox_id is not None else new_sandbox_id()
    folder = store.path / sandbox_dir(sid)
    if folder.exists():
        raise InvalidInput(f"sandbox {sid} already exists", sandbox_id=sid)
    meta = {
        "sandbox_id": sid,
        "name": label,
        "account": store.name,
        "parent_version": store.head(),
        "created_at": utc_now().isoformat(),
    }
    body = dump_json(meta)  # refuses bad text before anything is created
    makedirs_durable(folder)
    atomic_write(folder / "metadata.json", body)
    (folder / "session_buffer.jsonl").touch()
    fsync_dir(folder)
    return _info(store, folder, meta)


def _info(store: AccountStore, folder: Path, meta: dict[str, Any]) -> SandboxInfo:
    try:
        archived: int | None = int(load_json(folder / ARCHIVED_MARKER)["version"])
    except FileNotFoundError:
        archived = None
    return SandboxInfo(
        sandbox_id=meta["sandbox_id"],
        name=meta["name"],
        account=store.name,
        parent_version=int(meta["parent_version"]),
        created_at=datetime.fromisoformat(meta["created_at"]),
        folder=folder,
        archived_as=archived,
    )


def load_sandbox(store: AccountStore, sandbox_id: str) -> SandboxInfo:
    folder = store.path / sandbox_dir(sandbox_id)
    try:
        return _info(store, folder, load_json(folder / "metadata.json"))
    except FileNotFoundError:
        raise NotFound(f"sandbox {sandbox_id} does not exist in account {store.name}",
                       sandbox_id=sandbox_id, account=store.name) from None


def list_sandboxes(store: AccountStore) -> list[SandboxInfo]:
    root = store.path / "sandboxes"
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith("."):
            continue
        try:
            out.append(_info(store, folder, load_json(folder / "metadata.json")))
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed (archived or discarded) while we looked, or not a sandbox
    return sorted(out, key=lambda s: s.created_at)


def remove_sandbox_folder(info: SandboxInfo) -> None:
    """Rename, then delete: nobody ever sees a half-deleted sandbox (metadata but no buffer).

    The caller holds the buffer lock, so no append is between its checks and its write.
    """
    remove_folder(info.folder)


def discard_sandbox(store: AccountStore, sandbox_id: str) -> None:
    """Delete the sandbox and its buffer; the master is untouched."""
    info = load_sandbox(store, sandbox_id)
    with info.buffer().locked():
        info = load_sandbox(store, sandbox_id)  # still there once we hold the lock?
        if info.archived_as is not None:
            raise Conflict(f"sandbox {sandbox_id} was archived as version {info.archived_as}; "
                           "nothing to discard", sandbox_id=sandbox_id)
        remove_sandbox_folder(info)


def session_buffer_view(info: SandboxInfo, events: list[BufferEvent]) -> SessionBuffer:
    """The seed's session-buffer schema, derived from the buffer's events."""
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
