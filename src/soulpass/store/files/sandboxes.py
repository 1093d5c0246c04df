"""Sandbox folders: ``sandboxes/<id>/metadata.json`` beside the session buffer (:class:`SandboxStore`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import check_name, new_sandbox_id, utc_now
from soulpass.store.contract import PendingEvent, SandboxMeta
from soulpass.store.files.session_log import (
    DEFAULT_MAX_EVENT_BYTES,
    SANDBOXES,
    FileSessionLog,
    archived_marker,
    remove_folder,
)
from soulpass.store.fsio import atomic_write, dump_json, fsync_dir, load_json, makedirs_durable
from soulpass.store.keys import BUFFER_FILE, sandbox_dir

__all__ = ["METADATA_FILE", "FilesSandboxes"]

METADATA_FILE = "metadata.json"


class FilesSandboxes:
    """The sandboxes of the account folder ``account`` (named ``name``)."""

    def __init__(self, account: Path, name: str, head: Callable[[], int]) -> None:
        self._root, self._name, self._head = account, name, head

    def _folder(self, sandbox_id: str) -> Path:
        return self._root / sandbox_dir(check_name(sandbox_id, "sandbox id"))

    def create(self, name: str, parent_version: int, sandbox_id: str | None = None) -> SandboxMeta:
        sid = check_name(sandbox_id, "sandbox id") if sandbox_id is not None else new_sandbox_id()
        folder = self._folder(sid)
        if folder.exists():
            raise InvalidInput(f"sandbox {sid} already exists", sandbox_id=sid)
        meta = {"sandbox_id": sid, "name": name, "account": self._name, "parent_version": parent_version,
                "created_at": utc_now().isoformat()}
        body = dump_json(meta)  # refuses bad text before anything is created
        makedirs_durable(folder)
        atomic_write(folder / METADATA_FILE, body)
        (folder / BUFFER_FILE).touch()
        fsync_dir(folder)
        return self._meta(folder, meta)

    def get(self, sandbox_id: str) -> SandboxMeta:
        folder = self._folder(sandbox_id)
        try:
            return self._meta(folder, load_json(folder / METADATA_FILE))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"sandbox {sandbox_id} does not exist in account {self._name}",
                           sandbox_id=sandbox_id, account=self._name) from None

    def list(self) -> list[SandboxMeta]:
        root = self._root / SANDBOXES
        if not root.is_dir():
            return []
        out = []
        for folder in root.iterdir():
            if folder.name.startswith("."):
                continue
            try:
                out.append(self._meta(folder, load_json(folder / METADATA_FILE)))
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed (archived or discarded) while we looked, or not a sandbox
        return sorted(out, key=lambda s: (s.created_at, s.sandbox_id))

    def session_log(self, sandbox_id: str, *, max_event_bytes: int | None = None,
                    check: Callable[[PendingEvent], None] | None = None) -> FileSessionLog:
        kwargs: dict[str, Any] = {} if check is None else {"check": check}
        return FileSessionLog(self._folder(sandbox_id), max_event_bytes=max_event_bytes or DEFAULT_MAX_EVENT_BYTES,
                              **kwargs)

    def remove(self, sandbox_id: str) -> None:
        remove_folder(self._folder(sandbox_id))

    def _meta(self, folder: Path, meta: dict[str, Any]) -> SandboxMeta:
        marker = archived_marker(folder)
        return SandboxMeta(sandbox_id=meta["sandbox_id"], name=meta["name"], account=self._name,
                           parent_version=int(meta["parent_version"]),
                           created_at=datetime.fromisoformat(meta["created_at"]),
                           archived_as=None if marker is None else int(marker["version"]),
                           kept=marker is not None and marker.get("keep") is True)
