"""Integrity of one account: ``audit`` reconciles files, catalog and vectors; ``prune`` removes
orphan index rows (never a source file); ``reset_index`` throws away an unreadable index.

Audit checks, each finding named by ``check``:

- ``leftover_txn``     a commit folder left by a crash (finished or discarded when the account opens)
- ``header_rebuilt``   VERSION.json was missing, damaged or wrong: the open rebuilt it from the log
- ``recovery_pending`` recovery could not write (a full disk): the account reads as its files stand
- ``index_unreadable`` the catalog cannot be opened (truncated, not SQLite): rebuild it
- ``version_drift``    the catalog reflects another version than the store's HEAD, or
                       VERSION.json and the version log disagree (records waiting for their vectors
                       are not drift: ``soulpass index status`` shows that backlog)
- ``missing_file``     a catalog row in force whose file is gone (an orphan row: restore or prune)
- ``edited_file``      a file whose bytes no longer match the content hash the catalog recorded
- ``unindexed_file``   a file of the master state with no catalog row (an orphan file: rebuild)
- ``unreadable_file``  a file of the master state that does not parse
- ``forget_unfinished`` a record a forget erased in place but never retired (the forget was cut short)
- ``foreign_vectors``  a vector folder built by another embedder than the one in use
- ``missing_vectors``  fewer vectors than the embedding state says were made (files deleted)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from soulpass.ids import check_name
from soulpass.index.health import Finding, catalog_readable, check_index, drop_catalog, prune_orphans
from soulpass.store.contract import AccountBackend, UnreadableCopy
from soulpass.store.redact import FORGOTTEN

if TYPE_CHECKING:
    from soulpass.engine import Account, Soulpass

__all__ = ["AuditReport", "Finding", "PruneReport", "audit", "prune", "reset_index"]


@dataclass
class AuditReport:
    account: str
    store_version: int = 0
    catalog_version: int | None = None
    files: int = 0
    rows_in_force: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def index_lag(self) -> int:
        """How many versions the catalog is behind the store: not a finding (the index is derived
        and catches up behind writes, at the next search), but said."""
        if self.catalog_version is None:
            return 0
        return max(self.store_version - self.catalog_version, 0)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, check: str, subject: str, detail: str) -> None:
        self.findings.append(Finding(check, subject, detail))

    def checks(self) -> set[str]:
        return {f.check for f in self.findings}

    def to_json(self) -> dict[str, Any]:
        return {"account": self.account, "ok": self.ok, "store_version": self.store_version,
                "catalog_version": self.catalog_version, "index_lag": self.index_lag, "files": self.files,
                "rows_in_force": self.rows_in_force,
                "findings": [asdict(f) for f in self.findings]}


@dataclass
class PruneReport:
    rows_removed: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False


def audit(sp: Soulpass, name: str) -> AuditReport:
    """Check one account without changing its files (a leftover txn is recovered by the open that
    follows the check, as every open does): the store's own findings, then the index's
    (``soulpass.index.health``)."""
    check_name(name, "account name")
    report = AuditReport(account=name)
    acct = sp.account(name)  # its store notes what a process that died left, then finishes or discards it
    store = acct.store
    acct.close()  # the check opens its own catalog and vectors, without catching them up
    report.store_version = store.head()
    for finding in store.audit():
        report.add(finding.check, finding.subject, finding.detail)
    for key, record_id in _erased_in_force(store):  # a forget cut short: erased in place, never retired
        report.add("forget_unfinished", key, f"{record_id} was erased but not retired: a forget of it was cut "
                   f"short; run `soulpass forget {record_id}` again to finish it")
    health = check_index(store, sp.embedder())
    report.catalog_version, report.files, report.rows_in_force = (health.catalog_version, health.files,
                                                                    health.rows_in_force)
    report.findings.extend(health.findings)
    return report


def _erased_in_force(store: AccountBackend) -> list[tuple[str, str]]:
    """(key, id) of the copies in force that a forget erased in place but did not retire."""
    erased = []
    for copy in store.current_copies():
        if isinstance(copy, UnreadableCopy):
            continue  # the index's check reports it
        if copy.body.get("text") == FORGOTTEN and isinstance(copy.body.get("id"), str):
            erased.append((copy.key, copy.body["id"]))
    return erased


def prune(acct: Account, *, dry_run: bool = False) -> PruneReport:
    """Remove catalog rows whose file is gone (orphan rows). Source files are never touched."""
    acct.index()  # caught up
    gone = prune_orphans(acct.store, dry_run=dry_run)
    return PruneReport([{"id": r.id, "version": r.version, "path": r.path} for r in gone], dry_run)


def reset_index(acct: Account) -> bool:
    """Delete the account's catalog when it cannot be opened (the index is derived: a rebuild
    makes it again from the files). Returns whether anything was deleted."""
    if catalog_readable(acct.store):
        return False
    acct.close()  # nobody may hold it open
    drop_catalog(acct.store)
    return True
