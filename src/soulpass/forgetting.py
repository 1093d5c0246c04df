"""Forget: erasure of records, which versions otherwise never allow (issue 15).

``forget`` resolves what to erase (ids, the facts about a subject, or what a query finds), then
1. has the store rewrite every copy of those records, current and history, to a placeholder
   (``AccountBackend.forget``: ``[forgotten]`` in place of every piece of content);
2. commits a version of kind ``forget`` that retires them from HEAD; its log entry is the
   tombstone: who, when, why, which versions' copies were rewritten, and which backups made
   before it still hold the content (a backup is a git repository: its past commits keep it);
3. drops the derived index (catalog, full text, vectors), so nothing of the content survives
   there either; the next search rebuilds it from the redacted store.
A forget cut short between 1 and 2 is finished by running it again (step 1 is idempotent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from soulpass.consolidation.gks import fact_documents
from soulpass.consolidation.rules import Rules
from soulpass.consolidation.semantic import functional_base
from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import utc_now
from soulpass.index.search import Hit
from soulpass.records import Record, SemanticFact
from soulpass.store.contract import AccountBackend, Change, Snapshot, VersionEntry
from soulpass.store.keys import KIND_BY_PREFIX, kind_of_id, record_path
from soulpass.store.open import default_backup_dir

__all__ = ["ForgetResult", "forget", "plan_forget"]


class _Engine(Protocol):
    @property
    def home(self) -> Path: ...

    @property
    def rules(self) -> Rules: ...


class Account(Protocol):
    """What forget needs of ``engine.Account`` (which calls it; typed here without importing it)."""

    @property
    def name(self) -> str: ...

    @property
    def store(self) -> AccountBackend: ...

    @property
    def sp(self) -> _Engine: ...

    def records(self, kind: str, at: int | None = None) -> Iterator[Record]: ...

    def search(self, query: str, k: int = 10) -> Sequence[Hit]: ...

    def commit(self, plan: Callable[[Snapshot], Change]) -> int: ...

    def drop_index(self) -> None: ...


@dataclass(frozen=True)
class ForgetResult:
    """What a forget erased (or, on a dry run, would erase); ``version`` is the tombstone's."""

    ids: list[str]
    dry_run: bool
    version: int | None = None
    rewritten: dict[str, list[int]] = field(default_factory=dict)
    backups_holding: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _first_version(acct: Account, record_id: str) -> int:
    """The version that first wrote ``record_id``; ``NotFound`` naming it when none did."""
    kind_of_id(record_id)
    key = record_path(record_id)
    for entry in acct.store.log():
        f = entry.fields
        ids = [i for v in list(f.get("added", {}).values()) + list(f.get("restored", {}).values()) for i in v]
        if record_id in ids or key in f.get("replaced", []) or key in f.get("retired", []):
            return entry.version
    raise NotFound(f"record {record_id} does not exist in any version", id=record_id)


def _keys(acct: Account, ids: list[str]) -> list[str]:
    """The keys whose copies forgetting ``ids`` rewrites: the records' own, and for a fact the
    knowledge-graph shards that list it."""
    keys = [record_path(i) for i in ids]
    for rid in ids:
        rec = acct.store.snapshot(_first_version(acct, rid)).record(rid)
        if isinstance(rec, SemanticFact):
            keys += fact_documents(rec.subject, rec.object, functional_base(rec.predicate, acct.sp.rules.semantic))
    return sorted(dict.fromkeys(keys))


def targets(acct: Account, ids: Iterable[str] = (), subject: str | None = None, query: str | None = None,
            k: int = 10) -> list[str]:
    """The record ids a forget erases: ``ids`` (each must exist), the facts about ``subject`` at
    HEAD (case-insensitive), and the top ``k`` hits of ``query``."""
    found = list(dict.fromkeys(ids))
    for rid in found:
        _first_version(acct, rid)
    if subject is not None:
        want = subject.strip().casefold()
        found += [f.id for f in acct.records("fact")
                  if isinstance(f, SemanticFact) and f.subject.strip().casefold() == want]
    if query is not None:
        found += [h.id for h in acct.search(query, k) if h.id[:2] in KIND_BY_PREFIX]  # records, not prose
    if not found:
        raise InvalidInput("forget needs an id, a subject or a query that matches something", field="ids")
    return sorted(dict.fromkeys(found))


def plan_forget(master: Snapshot, ids: list[str], tombstone: dict[str, Any], now: datetime) -> Change:
    """Version HEAD+1 on ``master`` that retires ``ids`` from HEAD; its entry is the tombstone."""
    retired = [record_path(i) for i in ids if master.record(i) is not None]
    return Change(VersionEntry({
        "version": master.version + 1, "parent": master.version, "timestamp": now.isoformat(), "kind": "forget",
        "added": {}, "superseded": [], "replaced": [], "retired": retired, "conflicts": [],
        "counts": dict(master.entry().counts), "forgotten": ids, **tombstone,
    }), retires=tuple(retired))


def _backups(acct: Account) -> list[str]:
    """Backups made before now that still hold the content (the default backup repository)."""
    repo = default_backup_dir(acct.sp.home, acct.name)
    return [str(repo)] if (repo / ".git").exists() or (repo / "HEAD").exists() else []


def forget(acct: Account, ids: Iterable[str] = (), *, subject: str | None = None, query: str | None = None,
           k: int = 10, reason: str = "", by: str | None = None, dry_run: bool = False) -> ForgetResult:
    """Erase records everywhere the account keeps them (module docstring); ``dry_run`` only lists them."""
    found, backups = targets(acct, ids, subject, query, k), _backups(acct)
    if dry_run:
        return ForgetResult(found, True, backups_holding=backups)
    rewritten = acct.store.forget(_keys(acct, found), found)
    tombstone = {"by": by, "reason": reason, "rewritten": rewritten, "backups_holding": backups}
    version = acct.commit(lambda head: plan_forget(head, found, tombstone, utc_now()))
    acct.drop_index()
    return ForgetResult(found, False, version, rewritten, backups)
