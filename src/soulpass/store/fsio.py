"""Crash-safe file primitives: temp + fsync + rename, directory fsync, durable batches, ``flock``.

Neutral file I/O that knows nothing of an account's layout: the files backend builds on it, and so
do the local vector files, the key file and a user's output files (exports, results).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted, InvalidInput

__all__ = [
    "folder_bytes",
    "atomic_write",
    "dump_json",
    "file_lock",
    "fsync_dir",
    "fsync_files",
    "load_json",
    "makedirs_durable",
    "write_durable",
    "write_many_durable",
]

_PARALLEL_FSYNC = 64  # files in one durable write from which fsyncs run in parallel
_FSYNC_THREADS = 16


def dump_json(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, UTF-8, trailing newline); refuses invalid text."""
    try:
        return (json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"text is not valid UTF-8 ({exc.reason} at position {exc.start})") from exc


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Corrupted(f"{path} is not valid JSON: {exc}", path=str(path)) from exc


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(path: Path) -> None:
    """Create ``path`` and any missing parents, fsyncing each parent that gained an entry."""
    for parent in _makedirs(path):
        fsync_dir(parent)


def write_durable(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` (new file, permissions ``mode`` from the start) and fsync it;
    the caller fsyncs the directory."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # an existing temp file keeps its old mode otherwise
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_many_durable(files: list[tuple[Path, bytes]]) -> None:
    """Create many new files and make them durable: every file and every directory that gained
    an entry is fsynced (never ``os.sync()``, which would flush the whole machine).

    All files (and missing folders) are made before any fsync, so the kernel writes them back
    together, and the fsyncs run from several threads."""
    gained: set[Path] = set()  # directories that gained an entry
    made: set[Path] = set()
    for path, data in files:
        if path.parent not in made:
            gained.update(_makedirs(path.parent))
            made.add(path.parent)
        gained.add(path.parent)
        path.write_bytes(data)
    fsync_files([path for path, _data in files], gained)


def _makedirs(path: Path) -> list[Path]:
    """Create ``path`` and any missing parents; the folders that gained an entry, top down."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir()
    return [d.parent for d in reversed(missing)]


def fsync_files(paths: list[Path], dirs: set[Path]) -> None:
    """Fsync files already written, then the directories that hold them.

    Many are fsynced from a few threads at once: the file system commits concurrent fsyncs
    together, several times faster than one after another."""
    for batch, sync in ((paths, _fsync_file), (sorted(dirs), fsync_dir)):
        if len(batch) < _PARALLEL_FSYNC:
            for path in batch:
                sync(path)
        else:
            with ThreadPoolExecutor(max_workers=_FSYNC_THREADS) as pool:
                list(pool.map(sync, batch))


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically: temp file (``mode`` from its creation), fsync,
    rename, fsync directory."""
    makedirs_durable(path.parent)
    tmp = path.with_name(f".{path.name}.tmp")
    write_durable(tmp, data, mode)
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def file_lock(path: Path, shared: bool = False, *, create_parent: bool = True,
              blocking: bool = True) -> Iterator[int]:
    """Hold an advisory ``flock`` on ``path`` (created if missing) for the ``with`` block.

    With ``create_parent`` off, a missing folder raises ``FileNotFoundError`` instead of being made
    again (a sandbox removed while its lock was awaited must stay removed). With ``blocking`` off,
    a lock held elsewhere raises ``BlockingIOError`` at once instead of being waited for."""
    if create_parent:
        makedirs_durable(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB))
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def folder_bytes(path: Path) -> int:
    """The bytes of every file under ``path`` (0 when it does not exist); files that vanish
    meanwhile are skipped."""
    total = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return total
