"""What ``soulpass audit`` asks of a files account (``AccountBackend.audit`` and ``current_copies``).

The audit compares the index with the store; only this backend knows its commit folders, its
version file and log, and where the copies in force lie, so it reports on them here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted
from soulpass.store.contract import StoredCopy, StoreFinding, UnreadableCopy
from soulpass.store.files.copies import COPY_SUFFIXES, parse_copy
from soulpass.store.files.layout import LOG_FILE
from soulpass.store.keys import CORE

__all__ = ["current_copies", "log_drift", "unfinished_txns"]

TXN = "txn"


def unfinished_txns(account: Path) -> list[StoreFinding]:
    """The commit folders a process that died left (and what opening the account does with them)."""
    txn = account / TXN
    if not txn.is_dir():
        return []
    out = []
    for item in sorted(txn.iterdir()):
        state = "committed: redone on open" if (item / "COMMITTED").exists() else "uncommitted: discarded on open"
        out.append(StoreFinding("leftover_txn", f"{TXN}/{item.name}", state if item.is_dir() else "stray temp file"))
    return out


def log_drift(head: int, log: Sequence[Mapping[str, Any]]) -> list[StoreFinding]:
    """``VERSION.json`` and the version log disagree on HEAD."""
    if log and int(log[-1]["version"]) != head:
        ends = log[-1]["version"]
        return [StoreFinding("version_drift", LOG_FILE, f"VERSION.json says {head}, the log ends at {ends}")]
    return []


def current_copies(account: Path) -> Iterator[StoredCopy | UnreadableCopy]:
    """Every file under ``core/`` (not temp files), sorted by key, with its bytes parsed."""
    keys = []
    for dirpath, dirs, names in os.walk(account / CORE):
        dirs.sort()
        keys += [Path(dirpath, n).relative_to(account).as_posix() for n in names
                 if n.endswith(COPY_SUFFIXES) and not n.startswith(".")]
    for key in sorted(keys):
        try:
            data = (account / key).read_bytes()
        except FileNotFoundError:
            continue  # retired by a commit since it was listed
        yield _parsed(key, data)


def _parsed(key: str, data: bytes) -> StoredCopy | UnreadableCopy:
    try:
        return StoredCopy(key, data, parse_copy(key, data))
    except Corrupted as exc:
        return UnreadableCopy(key, data, str(exc))
