"""Crash-safe file primitives: temp + fsync + rename, directory fsync, durable batches, ``flock``.

A :class:`DurableBatch` writes many files and makes them durable together with one flush of their
file system (Linux ``syncfs(2)``), so a commit costs the same few flushes whatever it writes;
where the call is missing, each file and folder it touched is fsynced instead.

Neutral file I/O that knows nothing of an account's layout: the files backend builds on it, and so
do the local vector files, the key file and a user's output files (exports, results).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted, InvalidInput

__all__ = [
    "MAX_JSON_DEPTH",
    "DurableBatch",
    "atomic_write",
    "check_depth",
    "dump_json",
    "file_lock",
    "fsync_dir",
    "folder_bytes",
    "fsync_files",
    "json_or_text",
    "load_json",
    "makedirs_durable",
    "parse_json",
    "resource_lock",
    "syncfs",
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


# Objects and lists nested deeper than this are refused where JSON comes in: no real export, state
# or profile needs it, and every reader (JSON, YAML, pydantic) would otherwise recurse until
# RecursionError.
MAX_JSON_DEPTH = 64


def parse_json(text: str | bytes, what: str) -> Any:
    """``text`` parsed as JSON from outside (an export, a command-line value): ``InvalidInput``
    naming ``what`` when it is not JSON or is nested more than :data:`MAX_JSON_DEPTH` levels."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidInput(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep", field=what) from None
    except ValueError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc}", field=what) from exc
    check_depth(value, what)
    return value


def json_or_text(raw: str, what: str) -> Any:
    """A command-line value: JSON where it parses as JSON (numbers, lists), else the text itself;
    ``InvalidInput`` when it is JSON nested more than :data:`MAX_JSON_DEPTH` levels."""
    try:
        return parse_json(raw, what)
    except InvalidInput as exc:
        if isinstance(exc.__cause__, ValueError):
            return raw
        raise


def check_depth(value: Any, what: str) -> None:
    """``InvalidInput`` when ``value`` nests objects or lists more than :data:`MAX_JSON_DEPTH` levels
    (checked without recursion, so a hostile depth cannot make the check itself recurse)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple | set | frozenset):
            if depth > MAX_JSON_DEPTH:
                raise InvalidInput(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep", field=what)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))


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
    _write(path, data, mode, sync=True)


def _write(path: Path, data: bytes, mode: int, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # an existing temp file keeps its old mode otherwise
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_many_durable(root: Path, files: list[tuple[Path, bytes]]) -> None:
    """Create many new files under ``root`` and make them durable with one :class:`DurableBatch`
    (never ``os.sync()``, which would flush every file system of the machine)."""
    with DurableBatch(root) as batch:
        for path, data in files:
            batch.write(path, data, atomic=False)
        batch.sync()


_libc_syncfs: Any = None


def syncfs(fd: int) -> None:
    """Flush the file system that holds ``fd`` (``syncfs(2)``); ``OSError`` as the call reports it
    (since Linux 5.8 that includes write-back errors seen since ``fd`` was opened)."""
    if _libc_syncfs(fd) != 0:
        import ctypes

        code = ctypes.get_errno()
        raise OSError(code, f"syncfs: {os.strerror(code)}")


def _has_syncfs() -> bool:
    global _libc_syncfs
    if _libc_syncfs is None:
        _libc_syncfs = False
        if sys.platform.startswith("linux"):
            import ctypes  # only here: importing it costs start-up time every command would pay

            with contextlib.suppress(OSError, AttributeError):
                func = ctypes.CDLL(None, use_errno=True).syncfs
                func.argtypes, func.restype = [ctypes.c_int], ctypes.c_int
                _libc_syncfs = func
    return _libc_syncfs is not False


class DurableBatch:
    """Files written (and renamed) under ``root`` without an fsync each, made durable together by
    :meth:`sync`: one ``syncfs`` of the file system, or where that call is missing an fsync of
    every file and folder the batch touched. Until :meth:`sync` returns nothing it wrote may
    survive a power loss, so the caller keeps what it needs to redo them (a commit's txn pack).

    The folder is opened when the batch starts, before any write: ``syncfs`` reports the
    write-back errors of the file system since that moment, the batch's own included."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: list[Path] = []
        self.dirs: set[Path] = set()  # folders that gained or lost an entry
        self._fd: int | None = os.open(root, os.O_RDONLY | os.O_DIRECTORY)

    def __enter__(self) -> DurableBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def makedirs(self, path: Path) -> None:
        self.dirs.update(_makedirs(path))

    def write(self, path: Path, data: bytes, mode: int = 0o644, *, atomic: bool = True,
              temp: Path | None = None) -> None:
        """Write ``path`` whole. ``atomic``: through a temp file (``temp``, else a dot file beside
        it) renamed into place, so a reader never sees it half-written."""
        if not path.parent.exists():
            self.makedirs(path.parent)
        if atomic:
            tmp = temp or path.with_name(f".{path.name}.tmp")
            _write(tmp, data, mode, sync=False)
            self.replace(tmp, path)
        else:
            _write(path, data, mode, sync=False)
            self.files.append(path)
            self.dirs.add(path.parent)

    def replace(self, src: Path, dst: Path) -> None:
        """Rename ``src`` over ``dst`` (both under the batch's file system)."""
        os.replace(src, dst)
        self.files.append(dst)
        self.dirs.update((src.parent, dst.parent))

    def touched(self, path: Path) -> None:
        """``path`` was written by other means (an append) and must be durable too."""
        self.files.append(path)

    def sync(self) -> None:
        """Make everything the batch wrote durable; ``OSError`` when the disk reports a failure."""
        if self._fd is None:
            raise ValueError("the batch is closed")
        if _has_syncfs():
            syncfs(self._fd)
        else:
            fsync_files(sorted(set(self.files)), self.dirs)


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


class _Held:
    """A process's hold on one lock file: the thread lock its threads queue on, the thread that
    holds it, and how many threads hold or await it (the entry goes with the last)."""

    __slots__ = ("mutex", "owner", "users")

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.owner: int | None = None
        self.users = 0


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


@contextlib.contextmanager
def resource_lock(path: Path, *, create_parent: bool = True, blocking: bool = True) -> Iterator[None]:
    """The process's one exclusive lock on ``path`` (an account's, a sandbox's), for the ``with`` block.

    One ``flock`` per resource and process: a thread that holds it and asks again enters again
    (re-entrant: recovery run by a commit may sweep the sandbox whose archive made the commit);
    another thread of the process waits on a thread lock, never on a second descriptor, since
    ``flock`` through a second descriptor blocks even its own process (a self-deadlock). Other
    processes wait on the ``flock``. ``create_parent`` and ``blocking`` as for :func:`file_lock`."""
    key = os.path.realpath(path)  # one entry per file, however the home was named
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.setdefault(key, _Held())
        reenter = held.owner == me
        if not reenter:
            held.users += 1
    if reenter:  # the outer block releases it
        yield
        return
    try:
        if not held.mutex.acquire(blocking):
            raise BlockingIOError(f"{path} is held by another thread of this process")
        try:
            with file_lock(path, create_parent=create_parent, blocking=blocking):
                with _HELD_GUARD:
                    held.owner = me
                try:
                    yield
                finally:
                    with _HELD_GUARD:
                        held.owner = None
        finally:
            held.mutex.release()
    finally:
        with _HELD_GUARD:
            held.users -= 1
            if held.users == 0:
                _HELD.pop(key, None)


def folder_bytes(path: Path) -> int:
    """The bytes of every file under ``path`` (0 when it does not exist), a file with several names
    (hard links) counted once; files that vanish meanwhile are skipped."""
    total = 0
    linked: set[tuple[int, int]] = set()
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
                    st = entry.stat(follow_symlinks=False)
                    if st.st_nlink > 1:
                        if (st.st_dev, st.st_ino) in linked:
                            continue
                        linked.add((st.st_dev, st.st_ino))
                    total += st.st_size
            except FileNotFoundError:
                continue
    return total
