"""The store contract (DESIGN §8): what every backend of an account's master state provides.

Protocols and frozen values only, no I/O. A backend (``store/files`` today, PostgreSQL next)
implements :class:`MasterStore` and :class:`SessionLog` (``sandbox_contract``); everything above the store plans with a
:class:`Snapshot` and hands back a :class:`Change` of typed values. How a change becomes bytes, rows
or paths is the backend's business, never its callers'.

Keys: a record is named by its id. A document (core memory, profile, a state, a GKS shard, a
clipboard, a prose entry) is named by a *key*, an account-relative name such as
``core/05_Core_Memory/Core_memory.json``. The keys are the paths of the plain-file layout, so an
export to files is the identity on names (ADR 0004); a database backend keeps them as opaque text.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from soulpass.store.sandbox_contract import PendingEvent, SandboxMeta, SandboxStore, SessionLog, SessionTail

if TYPE_CHECKING:  # annotations only: a search loads neither pydantic nor the record models
    from pydantic import BaseModel

    from soulpass.records import Record
    from soulpass.store.redact import Erasure

__all__ = [
    "AccountBackend",
    "Backend",
    "Change",
    "CommitOutcome",
    "CopyWalk",
    "Database",
    "DatabaseIndex",
    "DocumentPut",
    "HandEditedCopy",
    "HeadMoved",
    "Hook",
    "IndexLocation",
    "LocalIndex",
    "MasterStore",
    "Migration",
    "PendingEvent",
    "SandboxClose",
    "SandboxMeta",
    "SandboxStore",
    "SessionLog",
    "SessionTail",
    "Snapshot",
    "StoreFinding",
    "StoredCopy",
    "StoredVersionCopy",
    "Supersession",
    "UnreadableCopy",
    "VersionChanges",
    "VersionDiff",
    "VersionEntry",
    "VersionWritten",
]

# A test-only observer, called with the name of each commit step a backend reaches.
Hook: TypeAlias = Callable[[str], None]


@dataclass(frozen=True)
class Supersession:
    """Fact ``fact`` was superseded by fact ``by``."""

    fact: str
    by: str


@dataclass(frozen=True)
class VersionEntry:
    """One version of the log: its header, typed, and the whole entry as the planner reported it.

    ``fields`` is what ``soulpass log`` prints and what the log stores (conflicts, rejections,
    id maps ... vary by kind of version); the typed attributes below are read from it.
    """

    fields: Mapping[str, Any]

    @property
    def version(self) -> int:
        return int(self.fields["version"])

    @property
    def parent(self) -> int | None:
        parent = self.fields.get("parent")
        return None if parent is None else int(parent)

    @property
    def kind(self) -> str:
        """``archive``, ``rollback``, ``bulk`` or ``import`` ("" for version 0)."""
        return str(self.fields.get("kind", ""))

    @property
    def timestamp(self) -> datetime | None:
        stamp = self.fields.get("timestamp")
        return None if stamp is None else datetime.fromisoformat(str(stamp))

    @property
    def source_sandbox(self) -> str | None:
        sandbox = self.fields.get("source_sandbox")
        return None if sandbox is None else str(sandbox)

    @property
    def counts(self) -> Mapping[str, int]:
        return {k: int(v) for k, v in (self.fields.get("counts") or {}).items()}

    @property
    def added(self) -> Mapping[str, tuple[str, ...]]:
        """Record ids this version added (and, for a rollback, restored), by kind."""
        out: dict[str, tuple[str, ...]] = {}
        for key in ("added", "restored"):
            for kind, ids in (self.fields.get(key) or {}).items():
                out[kind] = (*out.get(kind, ()), *ids)
        return out

    @property
    def written(self) -> tuple[str, ...]:
        """Document keys this version wrote (new or replaced)."""
        return tuple(self.fields.get("written") or ())

    @property
    def replaced(self) -> tuple[str, ...]:
        return tuple(self.fields.get("replaced") or ())

    @property
    def retired(self) -> tuple[str, ...]:
        return tuple(self.fields.get("retired") or ())

    @property
    def superseded(self) -> tuple[Supersession, ...]:
        return tuple(Supersession(s["fact"], s["by"]) for s in self.fields.get("superseded") or ())


@dataclass(frozen=True)
class VersionDiff:
    """The net change from version ``from_version`` to ``to_version`` (``log``'s lines folded)."""

    from_version: int
    to_version: int
    added: Mapping[str, tuple[str, ...]]  # record ids (prose entries: keys) by kind
    superseded: tuple[Supersession, ...]
    replaced: tuple[str, ...]
    retired: tuple[str, ...]
    rebases: tuple[Mapping[str, Any], ...]
    conflicts: tuple[Mapping[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """The diff as ``soulpass diff --json`` and ``GET …/diff`` show it."""
        return {
            "from": self.from_version,
            "to": self.to_version,
            "added": {k: list(v) for k, v in self.added.items()},
            "superseded": [{"fact": s.fact, "by": s.by} for s in self.superseded],
            "replaced": list(self.replaced),
            "retired": list(self.retired),
            "rebases": [dict(r) for r in self.rebases],
            "conflicts": [dict(c) for c in self.conflicts],
        }


@dataclass(frozen=True)
class DocumentPut:
    """A document written whole under ``key``: a pydantic model (core memory, a state, a prose
    entry ...) or, for the backend's own bookkeeping (GKS shards, id counters), a JSON object."""

    key: str
    body: BaseModel | Mapping[str, Any]


@dataclass(frozen=True)
class SandboxClose:
    """The sandbox a version archives: it is marked archived in the same atomic commit. ``keep``:
    the sandbox stays, closed and read-only, instead of being removed (an archive that left items
    out keeps them readable in the sandbox's history, ``SandboxMeta.kept``)."""

    sandbox_id: str
    archived_at: datetime
    keep: bool = False


@dataclass(frozen=True)
class Change:
    """Everything version ``entry.version`` changes, planned against its parent; no bytes.

    ``records`` are put by id (new records, and facts rewritten when superseded); ``documents``
    replace whole documents; ``retires`` removes keys from the version on (their earlier copies
    stay readable). ``bulk`` allows a backend to take its fast path for a large import.
    """

    entry: VersionEntry
    records: tuple[Record, ...] = ()
    documents: tuple[DocumentPut, ...] = ()
    retires: tuple[str, ...] = ()
    closes: SandboxClose | None = None
    bulk: bool = False

    @property
    def version(self) -> int:
        return self.entry.version

    @property
    def parent(self) -> int:
        return self.version - 1


@dataclass(frozen=True)
class VersionWritten:
    """The change is version ``version``, durably. ``pending``: a step after the commit point
    failed (a full disk, a dropped connection) and says what is left for recovery to finish at the
    next commit or open (files not yet in place, a sandbox not yet removed); None when nothing is."""

    version: int
    pending: str | None = None


@dataclass(frozen=True)
class HeadMoved:
    """The change was planned on ``parent`` but HEAD is ``head``: re-plan on a new snapshot."""

    parent: int
    head: int


CommitOutcome: TypeAlias = VersionWritten | HeadMoved


@dataclass(frozen=True)
class StoredCopy:
    """The copy of a record or document that one version wrote, as the index catalogues it.

    ``data`` is the copy's stored form (its content hash is the index's change detector) and
    ``body`` the same content parsed; ``key`` names it (a record's key is its file's key).
    """

    key: str
    data: bytes
    body: Mapping[str, Any]


@dataclass(frozen=True)
class VersionChanges:
    """What one version put and retired: what an index needs to catch up by one version."""

    entry: VersionEntry
    puts: tuple[StoredCopy, ...]
    retired: tuple[str, ...]
    unreadable: tuple[tuple[str, str], ...] = field(default=())  # (key, why) of copies that could not be read


class Snapshot(Protocol):
    """A read view of one account at one version; what it returns never changes."""

    @property
    def version(self) -> int: ...

    def entry(self) -> VersionEntry:
        """The version's own entry (version 0: an empty one)."""
        ...

    def record(self, record_id: str) -> Record | None: ...

    def document(self, key: str) -> Mapping[str, Any] | None:
        """The document (or prose entry) under ``key`` as a JSON object, or None."""
        ...

    def keys(self, prefix: str) -> Iterator[str]:
        """Document keys under ``prefix`` (a folder such as ``core/10_state``), sorted."""
        ...

    def records(self, kind: str) -> Iterator[Record]:
        """Every record of ``kind`` present at this version, by id."""
        ...

    def with_semantic_hash(self, prefix: str, hashes: Collection[str]) -> dict[str, list[tuple[str, str]]]:
        """For each of ``hashes`` found, (id, key) of the prose entries under the folder ``prefix``
        (``store.keys.JOURNAL_DIR``) present at this version with that ``semantic_hash``, oldest
        first (by time, then id): what a commit's planner asks to skip or link a repeated entry."""
        ...

    def tags_carried(self, tags: Collection[str]) -> frozenset[str]:
        """Which of ``tags`` a record present at this version carries: what an importer asks to
        leave out what it imported before."""
        ...


class MasterStore(Protocol):
    """One account's master state: versions move forward one atomic commit at a time."""

    def head(self) -> int: ...

    def snapshot(self, at: int | None = None) -> Snapshot:
        """A read view at version ``at`` (default HEAD); ``NotFound`` past HEAD."""
        ...

    def log(self, since: int = 0, *, lists: bool = True) -> Sequence[VersionEntry]:
        """Entries of the versions after ``since``, oldest first, with a bulk version's id lists
        inlined; ``lists=False`` leaves them out (their counts stay), for a listing of the log."""
        ...

    def commit(self, change: Change, *, parent: int, hook: Hook | None = None) -> CommitOutcome:
        """Make ``change`` version ``parent + 1``, or report that HEAD is not ``parent`` any more.

        A ``Change`` with ``bulk`` set takes the backend's bulk path (same result, fewer copies)."""
        ...

    def changes(self, since: int) -> Iterator[VersionChanges]:
        """What each version after ``since`` put and retired, oldest first (index catch-up)."""
        ...


@dataclass(frozen=True)
class UnreadableCopy:
    """A stored copy whose bytes do not parse: ``why`` says what is wrong with ``data``."""

    key: str
    data: bytes
    why: str


@dataclass(frozen=True)
class StoredVersionCopy:
    """A stored copy as a rebuild sees it: ``replaced_at`` is the version that replaced or retired
    it (None while it is current). ``copy`` is an :class:`UnreadableCopy` when its bytes do not
    parse: a rebuild reports it and goes on with the others."""

    copy: StoredCopy | UnreadableCopy
    replaced_at: int | None


class CopyWalk(Protocol):
    """The copies a rebuild reads, listed up front so that it can report progress against a total
    (``len``), and read one at a time while iterated (an account may hold millions of copies).

    Current copies come before the ones later versions replaced or retired, so a copy that a
    concurrent commit replaces mid-walk is seen at least once; a listed copy that is gone when its
    turn comes (moved aside by such a commit) is left out."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[StoredVersionCopy]: ...


@dataclass(frozen=True)
class StoreFinding:
    """Something wrong with a stored account itself, as ``soulpass audit`` reports it: ``check``
    names the kind of problem, ``subject`` what it is about, ``detail`` explains it."""

    check: str
    subject: str
    detail: str


@dataclass(frozen=True)
class HandEditedCopy:
    """A copy in force edited outside Soulpass (by hand, in an editor): its key, the version that
    committed it, the body as committed (None when the original is not kept) and as it reads now."""

    key: str
    version: int
    original: Mapping[str, Any] | None
    edited: Mapping[str, Any]


class AccountBackend(MasterStore, Protocol):
    """Everything the engine and the index need of one stored account."""

    @property
    def name(self) -> str: ...

    @property
    def sandboxes(self) -> SandboxStore: ...

    def copies(self, wanted: Callable[[str], bool] | None = None) -> CopyWalk:
        """Every copy the account holds whose key ``wanted`` accepts (default: all), current ones
        first: what an index rebuild reads. Keys are chosen before any copy is read, so a rebuild
        pays nothing for the copies it does not index."""
        ...

    def index_location(self) -> IndexLocation:
        """Where this account's derived index lives (``soulpass.index.opening`` opens and drops
        it); nothing there is the truth: it is deleted and rebuilt from the store at will."""
        ...

    def recover(self) -> list[str]:
        """Finish or discard what a process that died left half-done; what it did, in words."""
        ...

    def audit(self) -> list[StoreFinding]:
        """What is wrong with the stored account itself, changing nothing: what a process that
        died left half-done, as this handle found it on opening the account (the open finished or
        discarded it), and the backend's own bookkeeping where it disagrees with itself."""
        ...

    def current_copies(self) -> Iterator[StoredCopy | UnreadableCopy]:
        """Every copy in force at HEAD (records, documents, the version header), sorted by key,
        read as stored now without a lock: an audit compares them with an index."""
        ...

    def exclusive(self) -> AbstractContextManager[None]:
        """A section no commit lands in (never commit inside it): what :meth:`source_files` reads
        in it is all of one version, :meth:`head`."""
        ...

    def source_files(self) -> Iterator[tuple[str, bytes]]:
        """(key, bytes) of every file of the account's plain-file form, sorted by key: what a
        backup or an export holds, the same files the files backend keeps under the folders
        ``store.keys.SOURCE_FOLDERS`` (no index, no commit in flight, no sandbox).
        :meth:`Backend.restore` makes an account of them again. Read them in :meth:`exclusive`."""
        ...

    def stored_bytes(self) -> int:
        """About how many bytes the account takes where it is kept (its versions, history, open
        sandboxes and derived index): what a storage quota counts."""
        ...

    def hand_edits(self) -> list[HandEditedCopy]:
        """The copies in force whose bytes are not those their commit wrote (a backend whose copies
        are no files anyone edits has none)."""
        ...

    def put_back(self, key: str) -> bool:
        """Write the committed original of hand-edited ``key`` back in place, under the account's
        lock; False (nothing written) when the original is not kept."""
        ...

    def forget(self, keys: Sequence[str], erasure: Erasure) -> dict[str, list[int]]:
        """Erasure, the one exception to immutable versions: rewrite every stored copy of each of
        ``keys`` (the records ``erasure.ids`` and the documents that mention them), the one in
        force and every history copy, to ``store.redact.redacted_copy`` of itself, move the keys
        ``erasure.renames`` renames (prose entries, whose names hold text), and rewrite every
        version log entry as ``store.redact.redacted_entry`` makes it, under the account's
        exclusive lock. Each copy is replaced atomically and every step is idempotent, so a forget
        cut short is finished by running it again. Returns, per key (by its new name), the
        versions whose copies were rewritten."""
        ...

    def reclaim(self) -> list[str]:
        """After a forget (its version committed, the index dropped): make the erased content leave
        the backend's own files where it can (PostgreSQL: the old row versions still in the
        relation files are rewritten away); returns what it did, one line each. What it cannot
        reach (PostgreSQL's WAL, backups, a file system's freed blocks) is said in docs/passport.md."""
        ...


@dataclass(frozen=True)
class Migration:
    """One named step of an owner's tables in a :class:`Database`: ``sql``, run once per database
    in a transaction of its own and recorded by ``name`` (names are one namespace: an owner's names
    say whose they are). A released migration is never edited, only followed by another."""

    name: str
    sql: str


class Database(Protocol):
    """The SQL database a backend keeps its accounts in, lent to the layers that keep tables of
    their own beside the store's (the index, the server's keys). Each owner migrates its own tables
    through :meth:`migrate`; what a connection is belongs to the backend (PostgreSQL: psycopg)."""

    def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """Apply those of ``migrations`` the database lacks, in order (once, whatever the number of
        processes starting together); returns the names applied now. Cheap once applied."""
        ...

    def connection(self) -> AbstractContextManager[Any]:
        """A pooled connection; leaving the block commits (or rolls back on an exception)."""
        ...

    @property
    def local_folder(self) -> Path:
        """This machine's folder beside the database, for what the database does not hold."""
        ...

    def dedicated(self) -> AbstractContextManager[Any]:
        """A connection of its own (autocommit), for a section held across other calls."""
        ...


@dataclass(frozen=True)
class LocalIndex:
    """The account's index lives in the local folder ``folder`` (the files backend, or a database
    home with ``soulpass_index=local``)."""

    folder: Path


@dataclass(frozen=True)
class DatabaseIndex:
    """The account's index lives in ``database``, in tables keyed by ``account`` (the account's row
    id), shared by every process; ``folder`` is this process's local folder for what the database
    cannot hold (vectors where pgvector is missing)."""

    database: Database
    account: int
    folder: Path


# Where an account's index lives: what ``AccountBackend.index_location`` says (a closed union).
IndexLocation: TypeAlias = LocalIndex | DatabaseIndex


class Backend(Protocol):
    """Where accounts are kept (a home folder, a database): ``soulpass.store.open.open_backend``."""

    def accounts(self) -> list[str]: ...

    def database(self) -> Database | None:
        """The database the accounts are kept in, for the layers that keep tables beside them (the
        server's keys); None for a home folder."""
        ...

    def open(self, name: str, *, create: bool = False) -> AccountBackend:
        """The account ``name``; ``NotFound`` unless it exists or ``create`` is set."""
        ...

    def restore(self, name: str, files: Iterable[tuple[str, bytes]], *, replace: bool = False) -> bool:
        """Make account ``name`` of ``files``, (key, bytes) as :meth:`AccountBackend.source_files`
        yields them, atomically: it appears (or replaces the account of that name) only once the
        last file is stored and durable, and an exception from ``files`` (a check that failed)
        leaves everything as it was. ``Conflict`` if the account exists and ``replace`` is not
        set, ``InvalidInput`` for a key outside the plain-file form. Returns whether an account
        was replaced."""
        ...

    def delete(self, name: str, tombstone: Mapping[str, Any]) -> None:
        """Erase account ``name`` and everything this backend keeps of it (versions, history,
        sandboxes, its derived indexes wherever they are), and append ``tombstone`` (who and when,
        no content) to the home's deletion log. The account leaves at one instant (a folder renamed
        aside, one transaction); ``NotFound`` if it does not exist."""
        ...

    def deletions(self) -> list[dict[str, Any]]:
        """The tombstones of the accounts deleted here, oldest first."""
        ...
