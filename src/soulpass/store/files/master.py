"""The files backend behind the store contract: :class:`FilesMasterStore` and its snapshots."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted, InvalidInput
from soulpass.records import RECORD_MODELS, Record
from soulpass.store.contract import (
    Change,
    CommitOutcome,
    Committed,
    HeadMoved,
    Hook,
    StoredCopy,
    VersionChanges,
    VersionEntry,
)
from soulpass.store.files.account import AccountStore, parse_model
from soulpass.store.files.copies import encode_change, parse_copy
from soulpass.store.files.layout import history_dir
from soulpass.store.keys import kind_of_id, record_path

__all__ = ["FilesMasterStore", "FilesSnapshot", "read_copy", "version_keys"]

EMPTY_ENTRY = VersionEntry({"version": 0, "parent": None, "counts": {}})


class FilesSnapshot:
    """An account's files as of one version (:class:`soulpass.store.contract.Snapshot`)."""

    def __init__(self, store: AccountStore, version: int) -> None:
        self._store, self._version = store, version

    @property
    def version(self) -> int:
        return self._version

    def entry(self) -> VersionEntry:
        if self._version == 0:
            return EMPTY_ENTRY
        for raw in reversed(self._store.log()):
            if int(raw["version"]) == self._version:
                return VersionEntry(self._store.expanded(raw))
        raise Corrupted(f"version {self._version} has no line in the version log", account=self._store.name)

    def record(self, record_id: str) -> Record | None:
        rel = record_path(record_id)
        raw = self._store.read_at(rel, self._version)
        return None if raw is None else parse_model(RECORD_MODELS[kind_of_id(record_id)], raw, rel)

    def document(self, key: str) -> Mapping[str, Any] | None:
        return self._store.read_at(key, self._version)

    def keys(self, prefix: str) -> Iterator[str]:
        return self._store.iter_paths(prefix, self._version)

    def records(self, kind: str) -> Iterator[Record]:
        return self._store.iter_records(kind, self._version)


class FilesMasterStore:
    """One account kept as plain files (:class:`soulpass.store.contract.MasterStore`)."""

    def __init__(self, store: AccountStore) -> None:
        self.store = store

    def head(self) -> int:
        return self.store.head()

    def snapshot(self, at: int | None = None) -> FilesSnapshot:
        return FilesSnapshot(self.store, self.store.check_version(at))

    def log(self, since: int = 0) -> list[VersionEntry]:
        return [VersionEntry(e) for e in self.store.log(expand_after=since) if int(e["version"]) > since]

    def commit(self, change: Change, *, parent: int, hook: Hook | None = None) -> CommitOutcome:
        """Takes the account lock itself: never call it with :meth:`AccountStore.locked` held."""
        if change.parent != parent:
            raise InvalidInput(f"a change to version {change.version} is not planned on version {parent}",
                               field="parent")
        with self.store.locked():
            head = self.store.head()
            if head != parent:
                return HeadMoved(parent=parent, head=head)
            return Committed(self.store.commit(encode_change(change), hook))

    def changes(self, since: int) -> Iterator[VersionChanges]:
        for entry in self.log(since):
            yield version_changes(self.store.path, entry)


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
    unreadable: list[str] = []
    put_keys, retired = version_keys(entry)
    for key in put_keys:
        try:
            got = read_copy(account, key, entry.version)
        except Corrupted as exc:
            unreadable.append(f"{key}@{entry.version}: {exc}")
            continue
        if got is None:
            unreadable.append(f"{key}@{entry.version}: no copy written by version {entry.version}")
        else:
            puts.append(StoredCopy(key, got[0], got[1]))
    return VersionChanges(entry, tuple(puts), tuple(retired), tuple(unreadable))


def _load(path: Path) -> tuple[bytes, dict[str, Any]] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data, parse_copy(str(path), data)  # JSON, or a Markdown entry's front matter + text


def _version_of(raw: Mapping[str, Any]) -> int:
    try:
        return int(raw.get("version", 0))
    except (TypeError, ValueError):
        return -1


def read_copy(account: Path, relpath: str, version: int) -> tuple[bytes, dict[str, Any]] | None:
    """The bytes of the copy of ``relpath`` that ``version`` wrote: the current file, or the copy
    under ``history/`` that the first later version replaced (the same lookup as ``read_at``)."""
    got = _load(account / relpath)
    if got is not None and _version_of(got[1]) == version:
        return got
    hist = account / history_dir(relpath)
    try:
        suffix = Path(relpath).suffix
        retired = sorted(int(p.stem) for p in hist.iterdir() if p.suffix == suffix and p.stem.isdigit())
    except FileNotFoundError:
        return None
    for n in retired:
        if n > version:
            got = _load(hist / f"{n:08d}{suffix}")
            return got if got is not None and _version_of(got[1]) == version else None
    return None
