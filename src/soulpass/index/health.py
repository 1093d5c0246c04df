"""The index's own health: its catalog and vectors reconciled with the store's files, orphan rows
pruned, an unreadable catalog thrown away. ``soulpass.integrity`` reports what this finds beside the
store's own findings; nothing outside the index knows its file names.

Checks (``Finding.check``):

- ``index_unreadable`` the catalog (or an embedding state) cannot be opened: rebuild it
- ``version_drift``    the catalog reflects another version than the store's HEAD
- ``missing_file``     a catalog row in force whose file is gone (an orphan row: restore or prune)
- ``edited_file``      a file whose bytes no longer match the content hash the catalog recorded
- ``unindexed_file``   a file of the master state with no catalog row (an orphan file: rebuild)
- ``unreadable_file``  a file of the master state that cannot be read as a record
- ``foreign_vectors``  a vector folder built by another embedder than the one in use
- ``missing_vectors``  fewer vectors than the embedding state says were made (files deleted)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from soulpass.embed.base import Embedder
from soulpass.errors import BackendUnavailable, Corrupted
from soulpass.index.catalog import Catalog, CatalogRow, catalog_file, remove_catalog
from soulpass.index.catalog.make_rows import make_row
from soulpass.index.catalog.rows import is_catalogued
from soulpass.index.opening import VECTORS_DIR, open_catalog
from soulpass.store.contract import AccountBackend, UnreadableCopy
from soulpass.vectors import model_tag, open_vector_index

__all__ = ["Finding", "IndexHealth", "catalog_readable", "check_index", "drop_catalog", "prune_orphans"]


@dataclass(frozen=True)
class Finding:
    """One thing wrong, as ``soulpass audit`` reports it: the check that found it, what it is about, why."""

    check: str
    subject: str
    detail: str


@dataclass
class IndexHealth:
    """What ``check_index`` found: the catalog's version (None: unreadable), the master files and
    catalog rows in force it compared, and what is wrong."""

    catalog_version: int | None = None
    files: int = 0
    rows_in_force: int = 0
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, subject: str, detail: str) -> None:
        self.findings.append(Finding(check, subject, detail))


def check_index(store: AccountBackend, embedder: Embedder | None) -> IndexHealth:
    """Reconcile the account's catalog and vectors with its files, without changing any of them
    (nothing is caught up: a catalog behind the store is lag, one ahead of it is drift)."""
    health = IndexHealth()
    files = _master_files(store)
    health.files = len(files)
    head = store.head()
    try:
        catalog = open_catalog(store, heal=False)  # a damaged catalog is reported, not replaced
    except BackendUnavailable as exc:
        health.add("index_unreadable", catalog_file(store), f"{exc}; run `soulpass index rebuild`")
        return health
    try:
        try:
            rows = list(catalog.rows())
            health.catalog_version = catalog.version()
        except sqlite3.DatabaseError as exc:
            health.add("index_unreadable", catalog_file(store), f"{exc}; run `soulpass index rebuild`")
            return health
        if (health.catalog_version or 0) > head:  # behind is lag (the audit's index_lag), not a finding
            health.add("version_drift", catalog_file(store),
                       f"catalog at version {health.catalog_version}, store at {head}; "
                       "the catalog is ahead of the files: `soulpass index rebuild`")
        _check_rows(health, rows, files)
    finally:
        catalog.close()
    _check_vectors(health, embedder, store.index_location().folder)
    return health


def prune_orphans(store: AccountBackend, *, dry_run: bool = False) -> list[CatalogRow]:
    """The catalog rows in force whose file is gone (orphan rows), removed unless ``dry_run``.
    Source files are never touched. The catalog is expected caught up."""
    present = {copy.key for copy in store.current_copies()}
    with contextlib.closing(open_catalog(store)) as catalog:
        gone = [row for row in catalog.rows() if row.replaced_at is None and row.path not in present]
        if not dry_run and gone:
            catalog.delete_rows((r.id, r.version) for r in gone)
    return gone


def catalog_readable(store: AccountBackend) -> bool:
    """Whether the account's SQLite catalog opens (a missing one is made: readable)."""
    try:
        with Catalog.open(store, fulltext="fts5", heal=False) as catalog:  # only opens it: no sidecar
            catalog.version()
        return True
    except (BackendUnavailable, sqlite3.DatabaseError, KeyError):
        return False


def drop_catalog(store: AccountBackend) -> None:
    """Delete the account's catalog files (derived: a rebuild makes them again). Nobody may hold
    the catalog open."""
    remove_catalog(store)


@dataclass(frozen=True)
class _MasterFile:
    """What the check needs of a catalogued copy in force, read once: its content hash, the version
    it names (None: it does not parse), and its catalog row's id and version or why it has none."""

    content_hash: str
    version: int | None
    row: tuple[str, int] | str


def _master_files(store: AccountBackend) -> dict[str, _MasterFile]:
    out = {}
    for copy in store.current_copies():
        if not is_catalogued(copy.key):
            continue
        digest = hashlib.sha256(copy.data).hexdigest()
        if isinstance(copy, UnreadableCopy):
            out[copy.key] = _MasterFile(digest, None, copy.why)
            continue
        version = int(copy.body.get("version", 0))
        try:
            row = make_row(copy.key, copy.data, dict(copy.body), None)
        except Corrupted as exc:
            out[copy.key] = _MasterFile(digest, version, str(exc))
            continue
        out[copy.key] = _MasterFile(digest, version, (row.id, row.version))
    return out


def _check_rows(health: IndexHealth, rows: list[CatalogRow], files: dict[str, _MasterFile]) -> None:
    current: dict[str, CatalogRow] = {}
    for r in rows:
        if r.replaced_at is None:  # the copy that should be on disk now
            current[r.path] = r
    health.rows_in_force = sum(1 for r in rows if r.valid_to is None)
    for path, row in sorted(current.items()):
        file = files.get(path)
        if file is None:
            health.add("missing_file", row.id, f"{path} (version {row.version}) is in the index but not on disk")
            continue
        if file.content_hash != row.content_hash:
            version = row.version if file.version is None else file.version
            if version == row.version:
                health.add("edited_file", row.id, f"{path} does not match the content hash of version {row.version}")
    for path, file in sorted(files.items()):
        if isinstance(file.row, str):
            health.add("unreadable_file", path, file.row)
            continue
        row_id, row_version = file.row
        if health.catalog_version is not None and row_version > health.catalog_version:
            continue  # written after the version the catalog reflects: that is the drift, reported once
        known = current.get(path)
        if known is None or known.version < row_version:
            health.add("unindexed_file", row_id, f"{path} (version {row_version}) has no catalog row")


def _check_vectors(health: IndexHealth, embedder: Embedder | None, index_dir: Path) -> None:
    root = index_dir / VECTORS_DIR
    if not root.is_dir():
        return
    folders = {p.parent for p in root.glob("*/meta.json")}
    folders |= {root / p.name.removesuffix(".embedded.sqlite") for p in root.glob("*.embedded.sqlite")}
    for folder in sorted(folders):
        meta_file = folder / "meta.json"
        try:
            meta = json.loads(meta_file.read_bytes())
        except FileNotFoundError:  # the folder is gone, its embedding state is not
            if embedder is not None and folder.name.endswith("-" + model_tag(embedder.model_id)):
                health.add("missing_vectors", _named(index_dir, folder),
                           "the vector folder is gone; run `soulpass index rebuild`")
            continue
        except ValueError:
            health.add("foreign_vectors", folder.name, "meta.json is unreadable")
            continue
        if embedder is None or meta.get("model_id") != embedder.model_id:
            using = embedder.model_id if embedder else "no embedder"
            health.add("foreign_vectors", _named(index_dir, folder),
                       f"built by {meta.get('model_id')!r}, the account now uses {using!r}: not searched; "
                       "delete the folder or switch back")
            continue
        state = folder.with_name(folder.name + ".embedded.sqlite")
        if not state.exists():
            continue
        conn = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
        try:
            embedded = conn.execute("SELECT count(*) FROM embedded").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            health.add("index_unreadable", state.name, str(exc))
            continue
        finally:
            conn.close()
        index = open_vector_index(folder, model_id=str(meta["model_id"]), dim=int(meta["dim"]),
                                  backend=meta.get("backend", "hnsw"))
        try:
            count = index.count()
        finally:
            index.close()
        if count < embedded:
            health.add("missing_vectors", _named(index_dir, folder),
                       f"{count} vectors on disk, {embedded} recorded as embedded; run `soulpass index rebuild`")


def _named(index_dir: Path, folder: Path) -> str:
    """A vector folder as findings name it: by the index folder's name (``index/vectors/<folder>``)."""
    return Path(index_dir.name, VECTORS_DIR, folder.name).as_posix()
