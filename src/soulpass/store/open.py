"""Open the store a home names: the one module outside the backends that knows them all."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from soulpass.errors import BackendUnavailable
from soulpass.ids import check_name
from soulpass.store.contract import AccountBackend, Backend
from soulpass.store.files.account import AccountStore, list_accounts
from soulpass.store.files.erase import delete_account, read_deletions
from soulpass.store.files.master import FilesMasterStore
from soulpass.store.files.transfer import restore_account
from soulpass.store.fsio import atomic_write, dump_json
from soulpass.store.postgres.url import is_url

__all__ = ["FilesBackend", "backups_of", "default_backup_dir", "drop_backups", "open_backend", "remember_backup"]


class FilesBackend:
    """Accounts kept as plain files under ``<home>/accounts/`` (:class:`Backend`)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def accounts(self) -> list[str]:
        return list_accounts(self.home)

    def database(self) -> None:
        return None

    def open(self, name: str, *, create: bool = False) -> AccountBackend:
        return FilesMasterStore(AccountStore(self.home, name, create=create))

    def restore(self, name: str, files: Iterable[tuple[str, bytes]], *, replace: bool = False) -> bool:
        return restore_account(self.home, name, files, replace=replace)

    def delete(self, name: str, tombstone: Mapping[str, Any]) -> None:
        delete_account(self.home, name, tombstone)

    def deletions(self) -> list[dict[str, Any]]:
        return read_deletions(self.home)


def default_backup_dir(home: Path, account: str) -> Path:
    """Where ``soulpass backup`` keeps an account's backups by default: beside the accounts, never
    in one (a backup is not part of the account), on either backend (``Soulpass.home``)."""
    return home / "backups" / check_name(account, "account name")


def _registry(home: Path) -> Path:
    return home / "backups" / "destinations.json"


def backups_of(home: Path, account: str) -> list[Path]:
    """Every repository ``soulpass backup`` wrote ``account`` to from this home that still exists
    (the default one and each ``--to``): what a forget names as still holding its content."""
    try:
        known = json.loads(_registry(home).read_bytes()).get(account, [])
    except (OSError, ValueError, AttributeError):
        known = []
    found = [default_backup_dir(home, account), *(Path(p) for p in known if isinstance(p, str))]
    return [p for p in dict.fromkeys(found) if (p / ".git").exists()]


def remember_backup(home: Path, account: str, repo: Path) -> None:
    """Note that ``account`` was backed up to ``repo`` (see :func:`backups_of`)."""
    try:
        known = json.loads(_registry(home).read_bytes())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    paths = known.setdefault(account, [])
    if str(repo.resolve()) not in paths:
        paths.append(str(repo.resolve()))
        atomic_write(_registry(home), dump_json(known))


def drop_backups(home: Path, account: str) -> list[Path]:
    """Remove the backups of ``account`` kept in the home (the default folder) and its entry in the
    registry; returns the repositories elsewhere (``backup --to``) that still hold its content."""
    shutil.rmtree(default_backup_dir(home, account), ignore_errors=True)
    elsewhere = backups_of(home, account)
    try:
        known = json.loads(_registry(home).read_bytes())
    except (OSError, ValueError):
        known = None
    if isinstance(known, dict) and account in known:
        del known[account]
        atomic_write(_registry(home), dump_json(known))
    return elsewhere


def open_backend(home: Path | str) -> Backend:
    """The backend of ``home``: a ``postgresql://`` URL (the ``postgres`` extra), else a folder
    (the files backend)."""
    if is_url(home):
        try:  # psycopg only when asked for
            from soulpass.store.postgres.backend import PostgresBackend
        except ImportError as exc:
            raise BackendUnavailable("a postgresql:// home needs the 'postgres' extra: "
                                     "pip install -e '.[postgres]' (from a checkout)", missing=str(exc.name)) from exc
        return PostgresBackend(str(home))
    return FilesBackend(Path(home))
