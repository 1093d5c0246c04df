"""The files backend behind the store contract: :class:`FilesMasterStore` (snapshots: ``account.FilesSnapshot``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted, InvalidInput
from soulpass.store.contract import (
    Change,
    CommitOutcome,
    HandEditedCopy,
    HeadMoved,
    Hook,
    LocalIndex,
    StoredCopy,
    StoredVersionCopy,
    StoreFinding,
    UnreadableCopy,
    VersionChanges,
    VersionEntry,
    VersionWritten,
)
from soulpass.store.files import pristine, record_tags
from soulpass.store.files.account import AccountStore, FilesSnapshot
from soulpass.store.files.audit import buffer_findings, current_copies, history_findings, log_findings
from soulpass.store.files.copies import COPY_SUFFIXES, parse_copy
from soulpass.store.files.forget import forget_keys
from soulpass.store.files.layout import HISTORY, history_dir
from soulpass.store.files.sandboxes import FilesSandboxes
from soulpass.store.files.transfer import source_files
from soulpass.store.fsio import atomic_write, folder_bytes
from soulpass.store.keys import CORE, VERSION_FILE, record_path
from soulpass.store.redact import Erasure

__all__ = ["FilesCopyWalk", "FilesMasterStore", "copy_version", "load_stored", "read_copy", "version_changes",
           "version_keys", "walk_copies"]


class FilesMasterStore:
    """One account kept as plain files (:class:`soulpass.store.contract.AccountBackend`)."""

    def __init__(self, store: AccountStore) -> None:
        self.store = store
        self._sandboxes = FilesSandboxes(store.path, store.name, store.head)

    @property
    def sandboxes(self) -> FilesSandboxes:
        return self._sandboxes

    @property
    def name(self) -> str:
        return self.store.name

    @property
    def path(self) -> Path:
        """The account's folder. Not in the contract: for this backend's own tools and tests."""
        return self.store.path

    def index_location(self) -> LocalIndex:
        return LocalIndex(self.store.index_dir())

    def stored_bytes(self) -> int:
        return folder_bytes(self.store.path)

    def recover(self) -> list[str]:
        return self.store.recover()

    def copies(self, wanted: Callable[[str], bool] | None = None) -> FilesCopyWalk:
        return FilesCopyWalk(self.store.path, wanted)

    def head(self) -> int:
        return self.store.head()

    def snapshot(self, at: int | None = None) -> FilesSnapshot:
        return self.store.snapshot(at)

    def log(self, since: int = 0, *, lists: bool = True) -> list[VersionEntry]:
        entries = self.store.log(expand_after=since if lists else None)
        return [VersionEntry(e) for e in entries if int(e["version"]) > since]

    def commit(self, change: Change, *, parent: int, hook: Hook | None = None) -> CommitOutcome:
        """Takes the account lock itself: never call it with :meth:`AccountStore.locked` held."""
        if change.parent != parent:
            raise InvalidInput(f"a change to version {change.version} is not planned on version {parent}",
                               field="parent")
        with self.store.locked():
            head = self.store.head()
            if head != parent:
                return HeadMoved(parent=parent, head=head)
            applied = self.store.commit_change(change, hook)
            return VersionWritten(applied.version, applied.pending)

    def changes(self, since: int) -> Iterator[VersionChanges]:
        for entry in self.log(since):
            yield version_changes(self.store.path, entry)

    def audit(self) -> list[StoreFinding]:
        found = [*self.store.unfinished]
        found += [StoreFinding("header_rebuilt", VERSION_FILE, note) for note in self.store.recovered
                  if note.startswith(f"rebuilt {VERSION_FILE}")]
        if self.store.read_only is not None:
            found.append(StoreFinding("recovery_pending", "txn", self.store.read_only))
        in_log, entries = log_findings(self.store.path, self.store.head())
        edited = [StoreFinding("edited_by_hand", e.key, f"differs from what version {e.version} committed: "
                               "`soulpass adopt` commits the edit as a new version"
                               + ("" if e.original_kept else " (the original is not kept here: a backup has it)"))
                  for e in pristine.hand_edits(self.store.path)]
        return [*found, *in_log, *history_findings(self.store.path, entries), *buffer_findings(self.store.path),
                *edited]

    def hand_edits(self) -> list[HandEditedCopy]:
        out = []
        for e in pristine.hand_edits(self.store.path):
            kept = pristine.original(self.store.path, e.key)
            try:
                edited = parse_copy(e.key, (self.store.path / e.key).read_bytes())
            except Corrupted as exc:
                raise InvalidInput(f"{e.key} was edited by hand and no longer parses: {exc}", path=e.key) from exc
            out.append(HandEditedCopy(e.key, e.version, None if kept is None else parse_copy(e.key, kept), edited))
        return out

    def put_back(self, key: str) -> bool:
        with self.store.locked():
            kept = pristine.original(self.store.path, key)
            if kept is None:
                return False
            atomic_write(self.store.path / key, kept)
            return True

    def current_copies(self) -> Iterator[StoredCopy | UnreadableCopy]:
        return current_copies(self.store.path)

    def exclusive(self) -> AbstractContextManager[None]:
        return self.store.locked()

    def source_files(self) -> Iterator[tuple[str, bytes]]:
        return source_files(self.store.path)

    def forget(self, keys: Sequence[str], erasure: Erasure) -> dict[str, list[int]]:
        with self.store.locked():
            rewritten = forget_keys(self.store.path, keys, erasure)
            record_tags.drop(self.store.path)  # its tags may name what was forgotten
            pristine.renote(self.store.path, rewritten, forget=keys)
            return rewritten

    def reclaim(self) -> list[str]:
        return []  # every copy was replaced whole (a new file renamed over it): no old content left in one


class FilesCopyWalk:
    """The copies of :meth:`FilesMasterStore.copies` (a :class:`soulpass.store.contract.CopyWalk`):
    the files are listed when it is made and read as it is iterated."""

    def __init__(self, account: Path, wanted: Callable[[str], bool] | None) -> None:
        self._found = [c for c in walk_copies(account) if wanted is None or wanted(c[1])]

    def __len__(self) -> int:
        return len(self._found)

    def __iter__(self) -> Iterator[StoredVersionCopy]:
        for path, key, replaced_at in self._found:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # moved into history/ by a commit since it was listed
            try:
                copy: StoredCopy | UnreadableCopy = StoredCopy(key, data, parse_copy(str(path), data))
            except Corrupted as exc:
                copy = UnreadableCopy(key, data, str(exc))
            yield StoredVersionCopy(copy, replaced_at)


def version_keys(entry: VersionEntry) -> tuple[list[str], list[str]]:
    """The keys a version put (records and documents) and those it retired, each sorted."""
    put: set[str] = set()
    for ids in entry.added.values():
        try:
            put.update(record_path(i) for i in ids)
        except InvalidInput as exc:
            raise Corrupted(f"version {entry.version} of the log names a bad record id: {exc}") from exc
    put.update(entry.replaced)
    put.update(entry.written)
    retired = set(entry.retired)
    return sorted(put - retired), sorted(retired)


def version_changes(account: Path, entry: VersionEntry) -> VersionChanges:
    """The copies one version wrote, read back, and the keys it retired."""
    puts: list[StoredCopy] = []
    unreadable: list[tuple[str, str]] = []
    put_keys, retired = version_keys(entry)
    for key in put_keys:
        try:
            got = read_copy(account, key, entry.version)
        except Corrupted as exc:
            unreadable.append((key, str(exc)))
            continue
        if got is None:
            unreadable.append((key, f"no copy written by version {entry.version}"))
        else:
            puts.append(StoredCopy(key, got[0], got[1]))
    return VersionChanges(entry, tuple(puts), tuple(retired), tuple(unreadable))


def load_stored(path: Path) -> tuple[bytes, dict[str, Any]] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data, parse_copy(str(path), data)  # JSON, or a Markdown entry's front matter + text


def copy_version(raw: Mapping[str, Any]) -> int:
    """The version a stored copy says wrote it (-1 when unreadable)."""
    try:
        return int(raw.get("version", 0))
    except (TypeError, ValueError):
        return -1


def read_copy(account: Path, relpath: str, version: int) -> tuple[bytes, dict[str, Any]] | None:
    """The bytes of the copy of ``relpath`` that ``version`` wrote: the current file, or the copy
    under ``history/`` that the first later version replaced (the same lookup as ``read_at``)."""
    got = load_stored(account / relpath)
    if got is not None and copy_version(got[1]) == version:
        return got
    hist = account / history_dir(relpath)
    try:
        suffix = Path(relpath).suffix
        retired = sorted(int(p.stem) for p in hist.iterdir() if p.suffix == suffix and p.stem.isdigit())
    except FileNotFoundError:
        return None
    for n in retired:
        if n > version:
            got = load_stored(hist / f"{n:08d}{suffix}")
            return got if got is not None and copy_version(got[1]) == version else None
    return None


def walk_copies(account: Path) -> Iterator[tuple[Path, str, int | None]]:
    """(file, key, replaced_at) of every copy the account holds: current files, then history
    (the order :class:`soulpass.store.contract.CopyWalk` promises)."""
    core = account / CORE
    for dirpath, dirs, files in os.walk(core):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(COPY_SUFFIXES) and not name.startswith("."):
                path = Path(dirpath, name)
                yield path, path.relative_to(account).as_posix(), None
    hist = account / HISTORY
    for dirpath, dirs, files in os.walk(hist):
        dirs.sort()
        for name in sorted(files):
            stem, suffix = os.path.splitext(name)
            if suffix in COPY_SUFFIXES and stem.isdigit():
                yield Path(dirpath, name), f"{CORE}/{Path(dirpath).relative_to(hist).as_posix()}{suffix}", int(stem)
