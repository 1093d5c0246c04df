"""Deleting a whole account of the files backend, and the home's tombstones of deleted accounts.

The account folder is renamed aside under the account's lock (no commit lands meanwhile), so it
leaves ``accounts/`` at one instant; then its bytes are removed. A folder left aside by a process
that died is removed by the next deletion (``list_accounts`` never lists a dot name).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soulpass.store.files.account import AccountStore
from soulpass.store.fsio import file_lock, fsync_dir

__all__ = ["DELETIONS_FILE", "delete_account", "read_deletions"]

DELETIONS_FILE = "deletions.jsonl"  # in the home: one tombstone line per deleted account
_ASIDE = ".deleting-"


def delete_account(home: Path, name: str, tombstone: Mapping[str, Any]) -> None:
    """Remove account ``name`` (``NotFound`` if there is none) and append ``tombstone`` to the
    home's deletion log."""
    store = AccountStore(home, name)
    root = home / "accounts"
    with store.locked():
        os.replace(store.path, root / f"{_ASIDE}{store.name}-{time.time_ns()}")
        fsync_dir(root)
    line = (json.dumps(dict(tombstone), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    with file_lock(home / ".deletions.lock"):
        fd = os.open(home / DELETIONS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    for aside in root.glob(f"{_ASIDE}*"):  # this one, and any a process that died left
        shutil.rmtree(aside, ignore_errors=True)


def read_deletions(home: Path) -> list[dict[str, Any]]:
    """The tombstones of the accounts deleted from ``home``, oldest first."""
    try:
        raw = (home / DELETIONS_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in raw.splitlines() if line.strip()]
