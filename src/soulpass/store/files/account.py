"""One account's files: open and recover, snapshot reads at any version, the version log."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from soulpass.errors import Corrupted, InvalidInput, NotFound
from soulpass.ids import check_name
from soulpass.store.contract import Change, VersionEntry
from soulpass.store.files import pristine, record_tags
from soulpass.store.files.audit import unfinished_txns
from soulpass.store.files.bulk_lists import KEPT_APART, inline
from soulpass.store.files.commit import (
    Applied,
    Changeset,
    Hook,
    commit,
    header_drift,
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
from soulpass.store.files.prose_hashes import ProseHashes
from soulpass.store.files.session_log import sweep_finished
from soulpass.store.files.version_log import entry_of, read_entries
from soulpass.store.fsio import load_json, makedirs_durable, resource_lock
from soulpass.store.keys import RECORD_DIRS, kind_of_id, record_path
from soulpass.store.lookup import by_hash, carried, hash_holder, is_sha256, tag_holder

log = logging.getLogger(__name__)

__all__ = ["AccountStore", "FilesSnapshot", "list_accounts", "parse_model"]

if TYPE_CHECKING:  # the record models load when a record is read (a search reads rows, not records)
    from soulpass.records import Document, Record

D = TypeVar("D", bound="Document")


def list_accounts(home: Path) -> list[str]:
    root = home / "accounts"
    if not root.exists():
        return []
    # a dot name is a folder in passage: a restore's staging, an account being deleted
    return sorted(p.name for p in root.iterdir() if (p / "core").is_dir() and not p.name.startswith("."))


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
        self._prose_hashes: dict[str, ProseHashes] = {}  # by folder: FilesSnapshot.with_semantic_hash
        # What a process that died left half-done, as found here (``audit`` reports it).
        self.unfinished = unfinished_txns(self.path)
        # Why recovery could not run at open (a full disk): the account reads as it is, and
        # every commit tries again first (None: nothing is pending).
        self.read_only: str | None = None
        if self.unfinished or log_tail_torn(self.path) or header_drift(self.path) is not None:
            self._recover_at_open()

    def _recover_at_open(self) -> None:
        """Recover now; a disk that refuses the writes leaves the account readable as the files
        stand (``read_only`` says why, ``audit`` reports it) instead of refusing to open it."""
        try:
            with self.locked():
                pass
        except OSError as exc:
            self.read_only = (f"recovery could not write ({exc.strerror or exc}): the account reads as its files "
                              "stand and every commit tries again first")
            log.warning("account %s: %s", self.name, self.read_only)

    def index_dir(self) -> Path:
        """Where this account's derived indexes live (the catalog, the vector files). Nothing in it
        is the truth: it may be deleted and rebuilt from the store at any time; what is inside is
        the index layer's business."""
        return self.path / INDEX

    # --- locking and committing --------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive account lock: one commit (plan + write) at a time.

        Recovery runs first, under the lock: a txn left by a process that died is finished (or
        discarded), so nobody plans on a HEAD that a committed txn is about to move, and sandbox
        folders whose archive committed (or whose removal was cut short) are removed.
        """
        with resource_lock(self.path / ".lock"):
            txn = self.path / "txn"
            if txn.exists() and any(txn.iterdir()):
                self.recovered += recover(self.path)
            self.recovered += repair_log_tail(self.path)  # after recover: a txn re-appends its own line
            self.recovered += repair_header(self.path)
            self.recovered += sweep_finished(self.path)
            self.read_only = None  # recovery ran whole: nothing is pending any more
            yield

    def recover(self) -> list[str]:
        """Run recovery now (it also runs at every commit and on opening a store with a txn
        pending); returns what it did."""
        before = len(self.recovered)
        with self.locked():
            pass
        return self.recovered[before:]

    def commit(self, changeset: Changeset, hook: Hook | None = None) -> Applied:
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
        try:
            record_tags.repair(self.path, head)
        except OSError as exc:  # a note of the store, not the commit: lookups read every record meanwhile
            log.warning("account %s: %s not repaired (%s)", self.name, record_tags.TAGS_FILE, exc)
        applied = commit(self.path, changeset, hook)
        if applied.pending is None:  # files not all in place yet: the next commit catches it up
            record_tags.note(self.path, applied.version, ((w.relpath, w.data) for w in changeset.writes),
                             changeset.retires)
        return applied

    def commit_change(self, change: Change, hook: Hook | None = None) -> Applied:
        """Commit a typed change under the lock the caller holds (planned on HEAD)."""
        changeset = encode_change(change)
        applied = self.commit(changeset, hook)
        if not changeset.bulk and applied.pending is None:  # files not all in place yet: nothing to note
            pristine.note(self.path, applied.version, ((w.relpath, w.data) for w in changeset.writes))
        return applied

    def snapshot(self, at: int | None = None) -> FilesSnapshot:
        """A read view at version ``at`` (default HEAD)."""
        return FilesSnapshot(self, self.check_version(at))

    # --- versions ------------------------------------------------------------------------

    def version_doc(self) -> dict[str, Any]:
        """HEAD's header. A damaged or missing ``VERSION.json`` is read from the log's last entry
        instead (the log holds the same header; a missing one never means version 0) and
        rewritten from it under the lock (``repair_header``)."""
        try:
            doc = read_header(self.path)
        except Corrupted:
            entry = last_entry(self.path)
            if entry is None:
                raise
            return version_doc(entry)
        if doc["version"] == 0 and (entry := last_entry(self.path)) is not None:
            return version_doc(entry)  # no header (deleted since the open): the log says where HEAD is
        return doc

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

    def copies_holding(self, folder: str, holds: Callable[[bytes], bool],
                       at: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, parsed copy) of the copies under core ``folder`` in force at version ``at`` that
        may be the ones a lookup wants: a copy whose bytes (or an earlier copy's, under
        ``history/``) ``holds`` accepts. Only those are parsed; the caller checks the field it wants.
        A damaged copy is left out with a warning, as :meth:`iter_records` does."""
        root = str(self.path)
        keys: set[str] = set()
        for dirpath, _dirs, files in os.walk(os.path.join(root, folder)):
            keys.update(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/") for name in files
                        if name.endswith(COPY_SUFFIXES) and not name.startswith(".")
                        and _holds(os.path.join(dirpath, name), holds))
        history = os.path.join(root, HISTORY)
        for dirpath, _dirs, files in os.walk(os.path.join(history, str(PurePosixPath(folder).relative_to("core")))):
            for name in files:
                stem, suffix = os.path.splitext(name)
                if suffix in COPY_SUFFIXES and stem.isdigit() and _holds(os.path.join(dirpath, name), holds):
                    keys.add(f"core/{os.path.relpath(dirpath, history).replace(os.sep, '/')}{suffix}")
        for key in sorted(keys):
            try:
                doc = self.read_at(key, at)
            except Corrupted as exc:
                log.warning("account %s: %s left out of a lookup, it cannot be read: %s", self.name, key, exc)
                continue
            if doc is not None:
                yield key, doc

    def prose_candidates(self, folder: str, hashes: Collection[str], at: int) -> set[str]:
        """Keys under ``folder`` whose copy at ``at`` (HEAD) may carry one of ``hashes`` (SHA-256
        hex): what this handle's :class:`ProseHashes` knows, caught up through the log."""
        known = self._prose_hashes.setdefault(folder, ProseHashes(self.path, folder))
        return known.candidates(hashes, at, self._entries_between)

    def _entries_between(self, after: int, upto: int) -> list[VersionEntry]:
        if upto == after + 1:  # the usual step: one commit since, its line read from the log's end
            return [FilesSnapshot(self, upto).entry()]
        return [VersionEntry(e) for e in self.log(expand_after=after) if after < int(e["version"]) <= upto]

    def history_versions(self, relpath: str) -> list[int]:
        hist = self.path / history_dir(relpath)
        if not hist.is_dir():
            return []
        return sorted(int(p.stem) for p in hist.glob("*.json") if p.stem.isdigit())


def _holds(path: str, holds: Callable[[bytes], bool]) -> bool:
    try:
        with open(path, "rb") as f:
            return holds(f.read())
    except FileNotFoundError:  # moved into history/ by a commit since it was listed: seen there
        return False


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

    def with_semantic_hash(self, prefix: str, hashes: Collection[str]) -> dict[str, list[tuple[str, str]]]:
        """At HEAD (what a planner reads) only the candidates the store's :class:`ProseHashes`
        names are read; otherwise, or for a hash not made by ``records.semantic_hash``, the
        folder's copies (history included) whose bytes hold one of the hashes."""
        wanted = frozenset(h for h in hashes if h)
        if not wanted:
            return {}
        if all(is_sha256(h) for h in wanted) and self._version == self._store.head():
            keys = self._store.prose_candidates(prefix, wanted, self._version)
            found = ((k, doc) for k in sorted(keys) if (doc := self._read_candidate(k)) is not None)
            return by_hash(found, wanted)
        return by_hash(self._store.copies_holding(prefix, hash_holder(wanted), self._version), wanted)

    def _read_candidate(self, key: str) -> dict[str, Any] | None:
        try:
            return self._store.read_at(key, self._version)
        except Corrupted as exc:
            log.warning("account %s: %s left out of a lookup, it cannot be read: %s", self._store.name, key, exc)
            return None

    def tags_carried(self, tags: Collection[str]) -> frozenset[str]:
        """Read from :mod:`record_tags` when it reaches this version; otherwise (an older version
        than it was built at, not caught up, damaged) every record folder is read, parsing only
        the copies whose bytes hold a wanted tag."""
        wanted = frozenset(tags)
        if not wanted:
            return frozenset()
        noted = record_tags.tags_carried(self._store.path, wanted, self._version)
        if noted is not None:
            return noted
        found: set[str] = set()
        holds = tag_holder(wanted)
        for folder in dict.fromkeys(RECORD_DIRS.values()):
            for _key, body in self._store.copies_holding(folder, holds, self._version):
                found |= carried(body, wanted)
        return frozenset(found)


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
