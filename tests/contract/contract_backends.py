"""The backends the contract suite runs on: what it needs from one besides the contract itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import soulpass
from soulpass.store.contract import MasterStore, SessionLog
from soulpass.store.files.commit import COMMIT_STEPS
from soulpass.store.open import open_backend
from soulpass.store.postgres.url import is_url


class Backend(Protocol):
    """What the contract suite needs from a backend besides the contract itself."""

    crash_points: tuple[str, ...]  # names its commit reports to a hook, in order

    def master(self, account: str) -> MasterStore:
        """The account's store (created empty at version 0 if new)."""
        ...

    def reopen(self, account: str) -> MasterStore:
        """The account as a new process sees it after a crash (recovery run)."""
        ...

    def session_log(self, account: str, sandbox_id: str) -> SessionLog:
        """A new, empty, open session buffer."""
        ...

    def engine(self) -> soulpass.Soulpass:
        """The library over this backend (full text only)."""
        ...


@dataclass
class FilesBackend:
    home: Path
    crash_points: tuple[str, ...] = COMMIT_STEPS

    def master(self, account: str) -> MasterStore:
        return open_backend(self.home).open(account, create=True)

    def reopen(self, account: str) -> MasterStore:
        return open_backend(self.home).open(account)

    def session_log(self, account: str, sandbox_id: str) -> SessionLog:
        store = open_backend(self.home).open(account, create=True)
        store.sandboxes.create("contract", store.head(), sandbox_id)
        return store.sandboxes.session_log(sandbox_id, max_event_bytes=64 * 1024)

    def engine(self) -> soulpass.Soulpass:
        return soulpass.open(self.home, embedder="none")


@dataclass
class PostgresBackend:
    """The PostgreSQL backend over ``url`` (a schema of the test's own)."""

    url: str
    crash_points: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from soulpass.store.postgres.commit import COMMIT_STEPS as STEPS

        assert is_url(self.url)
        self.crash_points = STEPS

    def master(self, account: str) -> MasterStore:
        return open_backend(self.url).open(account, create=True)

    def reopen(self, account: str) -> MasterStore:
        return open_backend(self.url).open(account)

    def session_log(self, account: str, sandbox_id: str) -> SessionLog:
        store = open_backend(self.url).open(account, create=True)
        store.sandboxes.create("contract", store.head(), sandbox_id)
        return store.sandboxes.session_log(sandbox_id, max_event_bytes=64 * 1024)

    def engine(self) -> soulpass.Soulpass:
        return soulpass.open(self.url, embedder="none")
