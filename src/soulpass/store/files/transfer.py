"""An account's source files out (``AccountBackend.source_files``: backups, exports) and back in
(``Backend.restore``): the folders ``store.keys.SOURCE_FOLDERS``, as the files backend keeps them.

A restore writes everything into a staging folder beside the accounts and only then renames it
into place, so nobody ever sees half an account, and a restore that fails leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from soulpass.errors import Conflict, InvalidInput
from soulpass.ids import check_name
from soulpass.store.fsio import fsync_dir
from soulpass.store.keys import SOURCE_FOLDERS

__all__ = ["restore_account", "source_files"]


def source_files(account: Path) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of every file under the source folders, sorted by key; temp files of an
    interrupted atomic write (dot names) are left out."""
    keys = []
    for top in SOURCE_FOLDERS:
        for dirpath, dirs, names in os.walk(account / top):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            keys += [Path(dirpath, n).relative_to(account).as_posix() for n in names if not n.startswith(".")]
    for key in sorted(keys):
        yield key, (account / key).read_bytes()


def restore_account(home: Path, name: str, files: Iterable[tuple[str, bytes]], *, replace: bool) -> bool:
    """``Backend.restore`` for the accounts under ``home``; returns whether one was replaced."""
    target = home / "accounts" / check_name(name, "account name")
    _check_replace(target, replace)
    staging = target.with_name(f".restore-{name}-{os.getpid()}-{time.time_ns()}")
    staging.mkdir(parents=True)
    try:
        for key, data in files:
            path = staging / _source_key(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (staging / "core").mkdir(exist_ok=True)  # an account at version 0 has no file, yet it exists
        _fsync_tree(staging)
        existed = _check_replace(target, replace)  # again: another restore may have made it meanwhile
        if existed:
            aside = target.with_name(f".replaced-{name}-{time.time_ns()}")
            os.replace(target, aside)
            os.replace(staging, target)
            shutil.rmtree(aside)
        else:
            os.replace(staging, target)
        fsync_dir(target.parent)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return existed


def _check_replace(target: Path, replace: bool) -> bool:
    """Whether the account ``target`` exists; ``Conflict`` if it does and is not to be replaced."""
    exists = (target / "core").is_dir()
    if exists and not replace:
        raise Conflict(f"account {target.name!r} exists in {target.parent.parent} and is not to be replaced",
                       account=target.name)
    return exists


def _source_key(key: str) -> str:
    """``key`` if it names a file under a source folder (no ``..``, nothing absolute)."""
    parts = PurePosixPath(key).parts
    if len(parts) < 2 or parts[0] not in SOURCE_FOLDERS or ".." in parts or "\\" in key:
        raise InvalidInput(f"{key!r} is not a file of an account's plain-file form", path=key)
    return key


def _fsync_tree(folder: Path) -> None:
    """Make what was written durable before it moves into place: each file, then each folder
    (what the restore wrote, not the whole machine's caches as ``os.sync()`` would)."""
    for dirpath, _dirs, names in os.walk(folder, topdown=False):
        for n in names:
            fd = os.open(Path(dirpath, n), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))
