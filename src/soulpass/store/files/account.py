"""One account's files: open and recover, snapshot reads at any version, the version log."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from soulpass.errors import Corrupted, InvalidInput, NotFound
from soulpass.ids import check_name
from soulpass.store.contract import Change, VersionEntry
from soulpass.store.files.audit import unfinished_txns
from soulpass.store.files.bulk_lists import KEPT_APART, inline
from soulpass.store.files.commit import (
    Changeset,
    Hook,
    commit,
    last_entry,
    last_log_line,
    log_tail_torn,
    read_header,
    recover,
    repair_header,
    repair_log_tail,
    version_doc,
)
from soulpass.store.files.copies import COPY_SUFFIXES, encode_change, load_copy
from soulpass.store.files.layout import HISTORY, INDEX, LOG_FILE, history_dir
from soulpass.store.files.log_sums import read_sums
from soulpass.store.files.session_log import sweep_finished
from soulpass.store.files.version_log import entry_of, read_entries
from soulpass.store.fsio import file_lock, load_json, makedirs_durable
from soulpass.store.keys import RECORD_DIRS, kind_of_id, record_path

log = logging.getLogger(__name__)

__all__ = ["AccountStore", "FilesSnapshot", "list_accounts", "parse_model"]

if TYPE_CHECKING:  # the record models load when a record is read (a search reads rows, not records)
    from soulpass.records import Document, Record

D = TypeVar("D", bound="Document")


def list_accounts(home: Path) -> list[str]:
    root = home / "accounts"
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "core").is_dir())


class AccountStore:
    """The files of one account under ``<home>/accounts/<name>``.

    Readers take no lock: every file carries the version that wrote it, and a file newer than
    the version asked for is read from ``history/`` instead, so a commit in flight is invisible.
    """

    def __init__(self, home: Path, name: str, *, create: bool = False) -> None:
        self.name = check_name(name, "account name")
        self.home = home
        self.path = home / "accounts" / self.name
        if not (self.path / "core").is_dir():
            if not create:
                raise NotFound(f"account {self.name!r} does not exist in {home}", account=self.name)
            makedirs_durable(self.path / "core")
        self.recovered: list[str] = []
        # What a process that died left half-done, as found here (``audit`` reports it).
        self.unfinished = unfinished_txns(self.path)
        if self.unfinished or log_tail_torn(self.path) or not _header_readable(self.path):
            with self.locked():  # recovers
                pass

    def index_dir(self) -> Path:
        """Where this account's derived indexes live (the catalog, the vector files). Nothing in it
        is the truth: it may be deleted and rebuilt from the store at any time; what is inside is
        the index layer's business."""
        return self.path / INDEX

    def drop_index(self) -> None:
        """Delete this account's derived indexes; the store itself is untouched."""
        shutil.rmtree(self.index_dir(), ignore_errors=True)

    # --- locking and committing --------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive account lock: one commit (plan + write) at a time.

        Recovery runs first, under the lock: a txn left by a process that died is finished (or
        discarded), so nobody plans on a HEAD that a committed txn is about to move, and sandbox
        folders whose archive committed (or whose removal was cut short) are removed.
        """
        with file_lock(self.path / ".lock"):
            txn = self.path / "txn"
            if txn.exists() and any(txn.iterdir()):
                self.recovered += recover(self.path)
            self.recovered += repair_log_tail(self.path)  # after recover: a txn re-appends its own line
            self.recovered += repair_header(self.path)
            self.recovered += sweep_finished(self.path)
            yield

    def recover(self) -> list[str]:
        """Run recovery now (it also runs at every commit and on opening a store with a txn
        pending); returns what it did."""
        before = len(self.recovered)
        with self.locked():
            pass
        return self.recovered[before:]

    def commit(self, changeset: Changeset, hook: Hook | None = None) -> int:
        """Commit under the lock the caller holds; the changeset must be planned on HEAD."""
        head = self.head()
        if changeset.base_version != head:
            raise Corrupted(
                f"changeset planned on version {changeset.base_version} but HEAD is {head}",
                account=self.name,
            )
        logged = last_entry(self.path)
        if (logged["version"] if logged else 0) != head:  # a lost last line: a new one would leave a gap
            raise Corrupted(f"{self.path / LOG_FILE} ends at version {logged['version'] if logged else 0} but HEAD "
                            f"is {head}: a line of the version log is missing; nothing was committed; restore the "
                            "account from a backup or a passport", account=self.name, path=str(self.path / LOG_FILE))
        return commit(self.path, changeset, hook)

    def commit_change(self, change: Change, hook: Hook | None = None) -> int:
        """Commit a typed change under the lock the caller holds (planned on HEAD)."""
        return self.commit(encode_change(change), hook)

    def snapshot(self, at: int | None = None) -> FilesSnapshot:
        """A read view at version ``at`` (default HEAD)."""
        return FilesSnapshot(self, self.check_version(at))

    # --- versions ------------------------------------------------------------------------

    def version_doc(self) -> dict[str, Any]:
        """HEAD's header. A damaged ``VERSION.json`` is read from the log's last entry instead
        (the log holds the same header) and rewritten from it under the lock (``repair_header``)."""
        try:
            return read_header(self.path)
        except Corrupted:
            entry = last_entry(self.path)
            if entry is None:
                raise
            return version_doc(entry)

    def head(self) -> int:
        return int(self.version_doc()["version"])

    def check_version(self, at: int | None) -> int:
        head = self.head()
        if at is None:
            return head
        if type(at) is not int:
            raise InvalidInput(f"version must be an integer, not {at!r}", field="version")
        if at < 0 or at > head:
            raise NotFound(f"version {at} does not exist (HEAD is {head})", account=self.name)
        return at

    def log(self, expand_after: int | None = None) -> list[dict[str, Any]]:
        """The version log; entries after ``expand_after`` get their ``added_file`` ids inlined."""
        entries = self._read_log()
        if expand_after is None:
            return entries
        return [self.expanded(e) if int(e["version"]) > expand_after else e for e in entries]

    def expanded(self, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry`` with the id lists a bulk version keeps in its ``added_file`` inlined."""
        if entry.get("added_file"):
            return inline(entry, load_json(self.path / entry["added_file"]))
        return entry

    def _read_log(self) -> list[dict[str, Any]]:
        path = self.path / LOG_FILE
        sums = read_sums(self.path)  # first: the log only grows after it (its lines come first)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        return read_entries(path, data, sums)

    # --- snapshot reads ------------------------------------------------------------------

    def read_at(self, relpath: str, at: int | None = None) -> dict[str, Any] | None:
        """The content of ``relpath`` as of version ``at`` (default HEAD), or None."""
        version = self.head() if at is None else at
        current = self.path / relpath
        with contextlib.suppress(FileNotFoundError):
            doc: dict[str, Any] = load_copy(current)
            if int(doc.get("version", 0)) <= version:
                return doc
        if not relpath.startswith("core/"):
            return None
        hist = self.path / history_dir(relpath)
        if not hist.is_dir():
            return None
        suffix = current.suffix  # a Markdown entry's history copies are Markdown too
        retired = sorted(int(p.stem) for p in hist.glob(f"*{suffix}") if p.stem.isdigit())
        for n in retired:
            if n > version:
                old: dict[str, Any] = load_copy(hist / f"{n:08d}{suffix}")
                return old if int(old.get("version", 0)) <= version else None
        return None

    def record(self, record_id: str, at: int | None = None) -> Record:
        version = self.check_version(at)
        kind = kind_of_id(record_id)
        raw = self.read_at(record_path(record_id), version)
        if raw is None:
            raise NotFound(f"record {record_id} does not exist at version {version}", id=record_id)
        rec: Record = parse_model(record_model(kind), raw, record_path(record_id))
        return rec

    def document(self, relpath: str, model: type[D], at: int | None = None) -> D | None:
        raw = self.read_at(relpath, self.check_version(at))
        return None if raw is None else parse_model(model, raw, relpath)

    def iter_paths(self, folder: str, at: int | None = None) -> Iterator[str]:
        """Account-relative paths of the copies (JSON or Markdown) under core ``folder`` at version ``at``."""
        version = self.check_version(at)
        seen: set[str] = set()
        base = self.path / folder
        if base.is_dir():
            for dirpath, _dirs, files in os.walk(base):
                for f in files:
                    if f.endswith(COPY_SUFFIXES) and not f.startswith("."):
                        rel = str(Path(dirpath, f).relative_to(self.path))
                        seen.add(rel)
        hbase = self.path / HISTORY / Path(folder).relative_to("core")
        if hbase.is_dir():
            for dirpath, dirs, _files in os.walk(hbase):
                for d in dirs:
                    hist = Path(dirpath, d).relative_to(self.path / HISTORY)
                    for suffix in COPY_SUFFIXES:
                        if any((self.path / HISTORY / hist).glob(f"*{suffix}")):
                            seen.add(f"core/{hist}{suffix}")
        for rel in sorted(seen):
            try:
                present = self.read_at(rel, version) is not None
            except Corrupted:  # listed: whoever reads it says what is wrong with it
                present = True
            if present:
                yield rel

    def iter_records(self, kind: str, at: int | None = None) -> Iterator[Record]:
        """Every record of ``kind`` visible at version ``at`` (default HEAD), by id. A record whose
        file cannot be read is left out with a warning naming it (``audit`` reports it too): one
        damaged file does not hide the rest of its kind."""
        version = self.check_version(at)
        model = record_model(kind)
        for rel in self.iter_paths(RECORD_DIRS[kind], version):
            try:
                raw = self.read_at(rel, version)
                if raw is not None:
                    yield parse_model(model, raw, rel)
            except Corrupted as exc:
                log.warning("account %s: record %s left out, its file cannot be read: %s", self.name,
                            PurePosixPath(rel).stem, exc)

    def history_versions(self, relpath: str) -> list[int]:
        hist = self.path / history_dir(relpath)
        if not hist.is_dir():
            return []
        return sorted(int(p.stem) for p in hist.glob("*.json") if p.stem.isdigit())


def _header_readable(account: Path) -> bool:
    try:
        read_header(account)
    except Corrupted:
        return False
    return True


def record_model(kind: str) -> type[Record]:
    """The pydantic model of a record kind (loading the record models once, when first needed)."""
    from soulpass.records import RECORD_MODELS

    return RECORD_MODELS[kind]


def parse_model(model: type[Any], raw: dict[str, Any], relpath: str) -> Any:
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except (ValidationError, InvalidInput) as exc:
        raise Corrupted(f"{relpath} does not match the {model.__name__} schema: {exc}", path=relpath) from exc


class FilesSnapshot:
    """An account's files as of one version (:class:`soulpass.store.contract.Snapshot`)."""

    def __init__(self, store: AccountStore, version: int) -> None:
        self._store, self._version = store, version

    @property
    def version(self) -> int:
        return self._version

    def entry(self) -> VersionEntry:
        """The version's log line; a bulk version's id lists are read only when asked for."""
        if self._version == 0:
            return VersionEntry({"version": 0, "parent": None, "counts": {}})
        tail = last_log_line(self._store.path / LOG_FILE)  # HEAD's line, without reading the log
        try:
            raw = entry_of(tail) if tail else None
        except ValueError:
            raw = None  # reading the whole log names the bad line
        if raw is None or int(raw["version"]) != self._version:
            raw = next((e for e in self._store.log() if int(e["version"]) == self._version), None)
        if raw is None:
            doc = self._store.version_doc()  # a commit between VERSION.json and its log line: the header
            if int(doc["version"]) == self._version:
                raw = doc
            elif int(doc["version"]) > self._version:  # that commit appended its line since, and others
                # followed (each under the lock, after the line before it): the log has it now
                raw = next((e for e in self._store.log() if int(e["version"]) == self._version), None)
            if raw is None:
                raise Corrupted(f"version {self._version} has no line in the version log", account=self._store.name)
        return VersionEntry(_LoggedEntry(self._store, raw) if raw.get("added_file") else raw)

    def record(self, record_id: str) -> Record | None:
        rel = record_path(record_id)
        raw = self._store.read_at(rel, self._version)
        return None if raw is None else parse_model(record_model(kind_of_id(record_id)), raw, rel)

    def document(self, key: str) -> dict[str, Any] | None:
        return self._store.read_at(key, self._version)

    def keys(self, prefix: str) -> Iterator[str]:
        return self._store.iter_paths(prefix, self._version)

    def records(self, kind: str) -> Iterator[Record]:
        return self._store.iter_records(kind, self._version)


class _LoggedEntry(Mapping[str, Any]):
    """A bulk version's log line, whose id lists (``added_file``) are loaded on first use: a
    planner reading the counts at HEAD must not pay for 50,000 ids."""

    def __init__(self, store: AccountStore, raw: dict[str, Any]) -> None:
        self._store, self._raw, self._full = store, raw, False

    def _expanded(self) -> dict[str, Any]:
        if not self._full:
            self._raw, self._full = self._store.expanded(dict(self._raw)), True
        return self._raw

    def __getitem__(self, key: str) -> Any:
        return (self._expanded() if key in KEPT_APART else self._raw)[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._expanded())

    def __len__(self) -> int:
        return len(self._expanded())
