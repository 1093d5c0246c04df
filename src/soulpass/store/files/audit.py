"""What ``soulpass audit`` asks of a files account (``AccountBackend.audit`` and ``current_copies``).

The audit compares the index with the store; only this backend knows its commit folders, its
version file and log, and where the copies in force lie, so it reports on them here.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted
from soulpass.store.contract import StoredCopy, StoreFinding, UnreadableCopy
from soulpass.store.files.copies import COPY_SUFFIXES, parse_copy
from soulpass.store.files.layout import LOG_FILE, history_path
from soulpass.store.files.log_sums import read_sums
from soulpass.store.files.session_log import SANDBOXES, FileSessionLog
from soulpass.store.files.version_log import HISTORY_DIGESTS, read_entries
from soulpass.store.keys import CORE

__all__ = ["buffer_findings", "current_copies", "history_findings", "log_drift", "log_findings", "unfinished_txns"]

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


def log_findings(account: Path, head: int) -> tuple[list[StoreFinding], list[dict[str, Any]]]:
    """Every damaged line of the version log (each one, not only the first), its drift from
    ``VERSION.json``, and the entries that read whole."""
    problems: list[Corrupted] = []
    sums = read_sums(account)
    try:
        data = (account / LOG_FILE).read_bytes()
    except FileNotFoundError:
        data = b""
    entries = read_entries(account / LOG_FILE, data, sums, problems, digests=True)
    found = [StoreFinding("log_damaged", f"{LOG_FILE}:{exc.details.get('line')}", str(exc)) for exc in problems]
    return found + log_drift(head, entries), entries


def history_findings(account: Path, log: Sequence[Mapping[str, Any]]) -> list[StoreFinding]:
    """Every ``history/`` copy a log entry recorded the digest of that is missing or differs from it."""
    out = []
    for entry in log:
        pairs = entry.get(HISTORY_DIGESTS)
        if not isinstance(pairs, list):
            continue  # an entry written before the digests were: nothing to check against
        version = int(entry["version"])
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
                out.append(StoreFinding("log_damaged", LOG_FILE, f"version {version}'s {HISTORY_DIGESTS} "
                                        f"holds {pair!r}, not a key and a digest"))
                continue
            key, want = pair
            rel = history_path(key, version)
            try:
                got = hashlib.sha256((account / rel).read_bytes()).hexdigest()
            except FileNotFoundError:
                out.append(StoreFinding("history_missing", rel, f"version {version} moved {key} here, and the "
                                        "copy is gone; restore it from a backup or a passport"))
                continue
            if got != want:
                out.append(StoreFinding("history_damaged", rel, f"its SHA-256 is {got[:12]}…, the log recorded "
                                        f"{want[:12]}… when version {version} moved {key} here: the copy was "
                                        "changed; restore it from a backup or a passport"))
    return out


def buffer_findings(account: Path) -> list[StoreFinding]:
    """Every open sandbox whose session buffer does not read whole (its archive would refuse it)."""
    out = []
    root = account / SANDBOXES
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.is_dir() and not folder.name.startswith("."):
            try:
                FileSessionLog(folder).events()
            except Corrupted as exc:
                where = f"{SANDBOXES}/{folder.name}/{FileSessionLog(folder).path.name}:{exc.details.get('line')}"
                out.append(StoreFinding("buffer_damaged", where, str(exc)))
    return out


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
