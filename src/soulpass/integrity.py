"""Integrity of one account: ``audit`` reconciles files, catalog and vectors; ``prune`` removes
orphan index rows (never a source file); ``reset_index`` throws away an unreadable index.

Audit checks, each finding named by ``check``:

- ``leftover_txn``     a commit folder left by a crash (finished or discarded when the account opens)
- ``index_unreadable`` the catalog cannot be opened (truncated, not SQLite): rebuild it
- ``version_drift``    the catalog reflects another version than the store's HEAD, or
                       VERSION.json and the version log disagree (records waiting for their vectors
                       are not drift: ``soulpass index status`` shows that backlog)
- ``missing_file``     a catalog row in force whose file is gone (an orphan row: restore or prune)
- ``edited_file``      a file whose bytes no longer match the content hash the catalog recorded
- ``unindexed_file``   a file of the master state with no catalog row (an orphan file: rebuild)
- ``unreadable_file``  a file of the master state that does not parse
- ``foreign_vectors``  a vector folder built by another embedder than the one in use
- ``missing_vectors``  fewer vectors than the embedding state says were made (files deleted)
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import BackendUnavailable, Corrupted
from soulpass.ids import check_name
from soulpass.index.catalog import Catalog, CatalogRow, catalog_file, remove_catalog
from soulpass.index.catalog.make_rows import make_row
from soulpass.index.catalog.rows import is_catalogued
from soulpass.index.opening import open_catalog
from soulpass.index.vectors import VECTORS_DIR, model_tag, open_vector_index
from soulpass.store.contract import AccountBackend, UnreadableCopy
from soulpass.store.redact import FORGOTTEN

if TYPE_CHECKING:
    from soulpass.engine import Account, Soulpass

__all__ = ["AuditReport", "Finding", "PruneReport", "audit", "prune", "reset_index"]


@dataclass(frozen=True)
class Finding:
    check: str
    subject: str
    detail: str


@dataclass
class AuditReport:
    account: str
    store_version: int = 0
    catalog_version: int | None = None
    files: int = 0
    rows_in_force: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, check: str, subject: str, detail: str) -> None:
        self.findings.append(Finding(check, subject, detail))

    def checks(self) -> set[str]:
        return {f.check for f in self.findings}

    def to_json(self) -> dict[str, Any]:
        return {"account": self.account, "ok": self.ok, "store_version": self.store_version,
                "catalog_version": self.catalog_version, "files": self.files, "rows_in_force": self.rows_in_force,
                "findings": [asdict(f) for f in self.findings]}


@dataclass
class PruneReport:
    rows_removed: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False


def audit(sp: Soulpass, name: str) -> AuditReport:
    """Check one account without changing its files (a leftover txn is recovered by the open that
    follows the check, as every open does)."""
    check_name(name, "account name")
    report = AuditReport(account=name)
    acct = sp.account(name)  # its store notes what a process that died left, then finishes or discards it
    store = acct.store
    acct.close()  # audit opens its own catalog and vectors, without catching them up
    report.store_version = store.head()
    for finding in store.audit():
        report.add(finding.check, finding.subject, finding.detail)
    files, erased = _master_files(store)
    report.files = len(files)
    for key, record_id in erased:  # a forget cut short: erased in place, never retired
        report.add("forget_unfinished", key, f"{record_id} was erased but not retired: a forget of it was cut "
                   f"short; run `soulpass forget {record_id}` again to finish it")
    try:
        catalog = open_catalog(acct.store, heal=False)  # a damaged catalog is reported, not replaced
    except BackendUnavailable as exc:
        report.add("index_unreadable", catalog_file(store), f"{exc}; run `soulpass index rebuild`")
        return report
    try:
        try:
            rows = list(catalog.rows())
            report.catalog_version = catalog.version()
        except sqlite3.DatabaseError as exc:
            report.add("index_unreadable", catalog_file(store), f"{exc}; run `soulpass index rebuild`")
            return report
        if report.catalog_version != report.store_version:
            behind = (report.catalog_version or 0) < report.store_version
            report.add("version_drift", catalog_file(store),
                       f"catalog at version {report.catalog_version}, store at {report.store_version}"
                       + ("; any search catches it up, or `soulpass index rebuild`" if behind else
                          "; the catalog is ahead of the files: `soulpass index rebuild`"))
        _check_rows(report, rows, files)
    finally:
        catalog.close()
    _check_vectors(report, sp, store.index_dir())
    return report


@dataclass(frozen=True)
class _MasterFile:
    """What the audit needs of a catalogued copy in force, read once: its content hash, the version
    it names (None: it does not parse), and its catalog row's id and version or why it has none."""

    content_hash: str
    version: int | None
    row: tuple[str, int] | str


def _master_files(store: AccountBackend) -> tuple[dict[str, _MasterFile], list[tuple[str, str]]]:
    """The catalogued copies in force, and (key, id) of those a forget erased that are still in force."""
    out: dict[str, _MasterFile] = {}
    erased: list[tuple[str, str]] = []
    for copy in store.current_copies():
        if not is_catalogued(copy.key):
            continue
        digest = hashlib.sha256(copy.data).hexdigest()
        if isinstance(copy, UnreadableCopy):
            out[copy.key] = _MasterFile(digest, None, copy.why)
            continue
        version = int(copy.body.get("version", 0))
        if copy.body.get("text") == FORGOTTEN and isinstance(copy.body.get("id"), str):
            erased.append((copy.key, copy.body["id"]))
        try:
            row = make_row(copy.key, copy.data, dict(copy.body), None)
        except Corrupted as exc:
            out[copy.key] = _MasterFile(digest, version, str(exc))
            continue
        out[copy.key] = _MasterFile(digest, version, (row.id, row.version))
    return out, erased


def _check_rows(report: AuditReport, rows: list[CatalogRow], files: dict[str, _MasterFile]) -> None:
    current: dict[str, CatalogRow] = {}
    for r in rows:
        if r.replaced_at is None:  # the copy that should be on disk now
            current[r.path] = r
    report.rows_in_force = sum(1 for r in rows if r.valid_to is None)
    for path, row in sorted(current.items()):
        file = files.get(path)
        if file is None:
            report.add("missing_file", row.id, f"{path} (version {row.version}) is in the index but not on disk")
            continue
        if file.content_hash != row.content_hash:
            version = row.version if file.version is None else file.version
            if version == row.version:
                report.add("edited_file", row.id, f"{path} does not match the content hash of version {row.version}")
    for path, file in sorted(files.items()):
        if isinstance(file.row, str):
            report.add("unreadable_file", path, file.row)
            continue
        row_id, row_version = file.row
        if report.catalog_version is not None and row_version > report.catalog_version:
            continue  # written after the version the catalog reflects: that is the drift, reported once
        known = current.get(path)
        if known is None or known.version < row_version:
            report.add("unindexed_file", row_id, f"{path} (version {row_version}) has no catalog row")


def _check_vectors(report: AuditReport, sp: Soulpass, index_dir: Path) -> None:
    embedder = sp.embedder()
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
                report.add("missing_vectors", _named(index_dir, folder),
                           "the vector folder is gone; run `soulpass index rebuild`")
            continue
        except ValueError:
            report.add("foreign_vectors", folder.name, "meta.json is unreadable")
            continue
        if embedder is None or meta.get("model_id") != embedder.model_id:
            using = embedder.model_id if embedder else "no embedder"
            report.add("foreign_vectors", _named(index_dir, folder),
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
            report.add("index_unreadable", state.name, str(exc))
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
            report.add("missing_vectors", _named(index_dir, folder),
                       f"{count} vectors on disk, {embedded} recorded as embedded; run `soulpass index rebuild`")


def _named(index_dir: Path, folder: Path) -> str:
    """A vector folder as findings name it: by the index folder's name (``index/vectors/<folder>``)."""
    return Path(index_dir.name, VECTORS_DIR, folder.name).as_posix()


def prune(acct: Account, *, dry_run: bool = False) -> PruneReport:
    """Remove catalog rows whose file is gone (orphan rows). Source files are never touched."""
    report = PruneReport(dry_run=dry_run)
    acct.index()  # caught up
    present = {copy.key for copy in acct.store.current_copies()}
    with open_catalog(acct.store) as catalog:  # rows by file: the catalog's own audit
        gone = [row for row in catalog.rows() if row.replaced_at is None and row.path not in present]
        report.rows_removed = [{"id": r.id, "version": r.version, "path": r.path} for r in gone]
        if not dry_run and gone:
            catalog.delete_rows((r.id, r.version) for r in gone)
    return report


def reset_index(acct: Account) -> bool:
    """Delete the account's catalog files when they cannot be opened (the index is derived: a
    rebuild makes it again from the files). Returns whether anything was deleted."""
    try:
        with Catalog.open(acct.store, fulltext="fts5", heal=False) as catalog:  # only opens it: no sidecar
            catalog.version()
        return False
    except (BackendUnavailable, sqlite3.DatabaseError, KeyError):
        pass
    acct.close()
    remove_catalog(acct.store)
    return True

