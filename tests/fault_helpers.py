"""A fault-injecting file system layer for the tests and ``benchmarks/fault_soak.py`` (issue 18).

:class:`Faults` wraps the calls that put bytes on disk (``os.write``, ``os.pwrite``, ``os.fsync``,
``os.fdatasync``, ``os.ftruncate``, ``os.replace``, ``os.rename``, and ``fsio.syncfs``, the one
flush of a whole commit) and counts those made by
Soulpass's own code (the caller's module starts with ``soulpass.``). With ``fail_at=k`` the k-th
such call fails as a real disk would: ``ENOSPC`` or ``EIO`` raised, or a ``short`` write that
puts half its bytes on disk and returns (the disk filling: every later write fails with
``ENOSPC``). Without ``fail_at`` it only counts, so a clean run says how many call sites an
operation has; the tests then fail each one in turn.

:func:`durable_copy` stands in for power loss: a copy of a home holding only what was fsynced
(each file cut to its size at its last ``fsync``, or at the last ``syncfs`` of a folder holding it;
files never flushed are left out).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["AFTER", "BEFORE", "MODES", "TURNS", "Faults", "content", "durable_copy", "template"]

MODES = ("enospc", "eio", "short")
_CALLS = ("write", "pwrite", "fsync", "fdatasync", "ftruncate", "replace", "rename")
_FSIO_CALLS = ("syncfs",)  # soulpass.store.fsio's own, wrapped in that module


class Faults:
    def __init__(self, fail_at: int | None = None, mode: str = "enospc") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.fail_at, self.mode = fail_at, mode
        self.calls = 0
        self.failed: str | None = None  # the call that failed ("fsync", …)
        self.full = False  # after a short write: the disk is full
        self.synced: dict[str, int] = {}  # path -> size at its last fsync (power loss)
        self._real: dict[str, Callable[..., Any]] = {}

    def _ours(self) -> bool:
        frame = sys._getframe(2)
        return str(frame.f_globals.get("__name__", "")).startswith("soulpass.")

    def _wrap(self, name: str) -> Callable[..., Any]:
        real = self._real[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            if not self._ours():
                return real(*args, **kwargs)
            self.calls += 1
            if self.full and name in ("write", "pwrite"):
                raise OSError(errno.ENOSPC, "No space left on device (injected)")
            if self.fail_at is not None and self.calls == self.fail_at:
                self.failed = name
                if self.mode == "short" and name in ("write", "pwrite") and len(args[1]) > 1:
                    self.full = True
                    half = bytes(args[1])[: len(args[1]) // 2]
                    return real(args[0], half, *args[2:])
                code = errno.EIO if self.mode == "eio" else errno.ENOSPC
                raise OSError(code, f"{os.strerror(code)} (injected at call {self.calls}: {name})")
            src = str(Path(args[0]).resolve()) if name in ("replace", "rename") else None
            result = real(*args, **kwargs)
            if name in ("fsync", "fdatasync"):
                self._note_sync(args[0])
            elif name == "syncfs":
                self._note_syncfs(args[0])
            elif src is not None and src in self.synced:  # a durable temp file renamed into place
                self.synced[str(Path(args[1]).resolve())] = self.synced.pop(src)
            return result

        return call

    def _note_sync(self, fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
            self.synced[path] = os.fstat(fd).st_size
        except OSError:
            pass

    def _note_syncfs(self, fd: int) -> None:
        """The whole file system was flushed: every file under the folder ``fd`` names (the account;
        the model keeps no more durable than Soulpass relies on) at its size now."""
        root = Path(os.readlink(f"/proc/self/fd/{fd}"))
        for path in root.rglob("*"):
            if path.is_file():
                self.synced[str(path.resolve())] = path.stat().st_size

    @contextmanager
    def installed(self) -> Iterator[Faults]:
        from soulpass.store import fsio

        self._real = {name: getattr(os, name) for name in _CALLS}
        self._real |= {name: getattr(fsio, name) for name in _FSIO_CALLS}
        for name in _CALLS:
            setattr(os, name, self._wrap(name))
        for name in _FSIO_CALLS:
            setattr(fsio, name, self._wrap(name))
        try:
            yield self
        finally:
            for name, real in self._real.items():
                setattr(fsio if name in _FSIO_CALLS else os, name, real)


def durable_copy(home: Path, into: Path, synced: dict[str, int], before: dict[str, bytes]) -> None:
    """``into`` as ``home`` would be after a power loss: files that existed ``before`` (path ->
    bytes, all durable) as they were unless fsynced since; files fsynced since cut to their size at
    that fsync; files neither durable before nor fsynced are gone."""
    shutil.rmtree(into, ignore_errors=True)
    for path in home.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(home)
        real = str(path.resolve())
        if real in synced:
            data = path.read_bytes()[: synced[real]]
        elif str(rel) in before:
            data = before[str(rel)]
        else:
            continue
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_bytes(data)


def snapshot_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


# --- the scenario every fault test and the soak use: version 1 and an open sandbox to archive ---

TURNS = ["the boat leaves at nine", "bring the blue umbrella", "Ilse lives in Ghent"]
BEFORE = {("turn", "an earlier turn")}
AFTER = BEFORE | {("turn", t) for t in TURNS} | {("fact", "Ilse lives_in Ghent")}


def template(root: Path) -> tuple[Path, str]:
    """A home (``root/template``) at version 1 whose open sandbox holds three turns and a fact."""
    import soulpass

    home = root / "template"
    acct = soulpass.open(home, embedder="none").create_account("ann")
    first = acct.create_sandbox("first")
    first.add_turn("user", "an earlier turn")
    first.archive()
    sb = acct.create_sandbox("second")
    for text in TURNS:
        sb.add_turn("user", text)
    sb.add_fact("Ilse", "lives_in", "Ghent", confidence=0.95)
    acct.close()
    return home, sb.id


def content(acct: Account) -> set[tuple[str, str]]:
    """What an account holds at HEAD, as (kind, text): turns and facts."""
    turns = {("turn", t.text_excerpt) for t in acct.records("turn_user")}
    return turns | {("fact", f"{f.subject} {f.predicate} {f.object}") for f in acct.records("fact")}
