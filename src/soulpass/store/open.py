"""Open the store a home names: the one module outside ``store/files`` that knows the backends."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from soulpass.store.contract import AccountBackend, Backend
from soulpass.store.files.account import AccountStore, list_accounts
from soulpass.store.files.master import FilesMasterStore
from soulpass.store.files.transfer import restore_account

__all__ = ["FilesBackend", "open_backend"]


class FilesBackend:
    """Accounts kept as plain files under ``<home>/accounts/`` (:class:`Backend`)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def accounts(self) -> list[str]:
        return list_accounts(self.home)

    def open(self, name: str, *, create: bool = False) -> AccountBackend:
        return FilesMasterStore(AccountStore(self.home, name, create=create))

    def restore(self, name: str, files: Iterable[tuple[str, bytes]], *, replace: bool = False) -> bool:
        return restore_account(self.home, name, files, replace=replace)


def open_backend(home: Path) -> Backend:
    """The backend of ``home`` (a folder: the files backend; PostgreSQL joins by URL)."""
    return FilesBackend(home)
