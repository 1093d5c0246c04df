"""Which prose entries of a files account may carry a semantic hash, kept by a process between
lookups: planning a journal entry reads only the entries that commits wrote since the last one,
not every entry of the account (``FilesSnapshot.with_semantic_hash``).

A list of candidates, never an answer: the snapshot reads each candidate's copy at its version and
checks its hash. It follows the store alone (the version log's written, replaced and retired keys),
and starts again from the files when the account folder was replaced or a lookup asks for an
older version than it has seen.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from soulpass.store.contract import VersionEntry
from soulpass.store.files.copies import COPY_SUFFIXES
from soulpass.store.lookup import SHA256_TOKEN

__all__ = ["ProseHashes"]


class ProseHashes:
    """The 64-hex tokens of each current copy under ``folder`` of the account at ``account``, as of
    the version it last caught up to."""

    def __init__(self, account: Path, folder: str) -> None:
        self._account, self._folder = account, folder.rstrip("/") + "/"
        self._seen: tuple[int, int] | None = None  # (the account folder's inode, version)
        self._tokens: dict[str, frozenset[bytes]] = {}  # key -> the hex tokens of its current copy
        self._keys: dict[bytes, set[str]] = {}  # hex token -> keys
        self._lock = threading.Lock()  # a server's threads plan archives of one account at once

    def candidates(self, hashes: Collection[str], at: int,
                   entries: Callable[[int, int], Iterable[VersionEntry]]) -> set[str]:
        """Keys whose copy may carry one of ``hashes`` (SHA-256 hex) at version ``at`` (HEAD when
        planned); ``entries(after, upto)`` gives the log entries of the versions in between."""
        inode = os.stat(self._account).st_ino
        with self._lock:
            if self._seen is None or self._seen[0] != inode or self._seen[1] > at:
                self._scan()
            elif self._seen[1] < at:
                for entry in entries(self._seen[1], at):
                    for key in (*entry.written, *entry.replaced, *entry.retired):
                        if key.startswith(self._folder):
                            self._read(key)
            self._seen = (inode, at)
            found: set[str] = set()
            for h in hashes:
                found |= self._keys.get(h.encode(), set())
            return found

    def _scan(self) -> None:
        self._tokens, self._keys = {}, {}
        root = str(self._account)
        for dirpath, _dirs, files in os.walk(os.path.join(root, self._folder)):
            for name in files:
                if name.endswith(COPY_SUFFIXES) and not name.startswith("."):
                    self._read(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))

    def _read(self, key: str) -> None:
        for token in self._tokens.pop(key, frozenset()):
            self._keys[token].discard(key)
        try:
            with open(os.path.join(self._account, key), "rb") as f:
                tokens = frozenset(SHA256_TOKEN.findall(f.read()))
        except FileNotFoundError:  # retired (or moved aside by a commit: its version re-reads it)
            return
        self._tokens[key] = tokens
        for token in tokens:
            self._keys.setdefault(token, set()).add(key)
