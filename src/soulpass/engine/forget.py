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

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soulpass.consolidation.gks import fact_documents
from soulpass.consolidation.semantic import functional_base
from soulpass.engine.editing import journal_key
from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import IMPORT_TAG_PREFIX, utc_now
from soulpass.records import Episode, SemanticFact
from soulpass.sessions.arguments import strings
from soulpass.store.contract import Change, Snapshot, VersionEntry
from soulpass.store.keys import KIND_BY_PREFIX, kind_of_id, record_path
from soulpass.store.open import backups_of
from soulpass.store.redact import Erasure, forgotten_journal_key

if TYPE_CHECKING:
    from soulpass.engine.account import Account

__all__ = ["ForgetResult", "forget", "plan_forget"]

JOURNAL_PREFIX = "JE_"  # a prose entry's id: its key is found in the log, its name holds text


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


def _journal_key(acct: Account, entry_id: str) -> tuple[int, str] | None:
    """The version that wrote prose entry ``entry_id`` and its key, from the log (None: none did)."""
    return journal_key(acct.store.log(), entry_id)


def _first_version(acct: Account, record_id: str) -> int:
    """The version that first wrote ``record_id``; ``NotFound`` naming it when none did."""
    if record_id.startswith(JOURNAL_PREFIX):
        found = _journal_key(acct, record_id)
        if found is not None:
            return found[0]
        raise NotFound(f"journal entry {record_id} does not exist in any version", id=record_id)
    kind_of_id(record_id)
    key = record_path(record_id)
    for entry in acct.store.log():
        f = entry.fields
        ids = [i for v in list(f.get("added", {}).values()) + list(f.get("restored", {}).values()) for i in v]
        if record_id in ids or key in f.get("replaced", []) or key in f.get("retired", []):
            return entry.version
    raise NotFound(f"record {record_id} does not exist in any version", id=record_id)


def _key(acct: Account, record_id: str) -> str:
    if record_id.startswith(JOURNAL_PREFIX):
        found = _journal_key(acct, record_id)
        assert found is not None  # targets() checked it
        return found[1]
    return record_path(record_id)


def _first_copy(acct: Account, record_id: str) -> Any:
    """The record as it was first written (a prose entry: its stored copy's fields)."""
    snap = acct.store.snapshot(_first_version(acct, record_id))
    if record_id.startswith(JOURNAL_PREFIX):
        return snap.document(_key(acct, record_id))
    return snap.record(record_id)


def erasure(acct: Account, ids: list[str], subject: str | None) -> tuple[list[str], Erasure]:
    """The keys whose copies forgetting ``ids`` rewrites (the records' own; for a fact the
    knowledge-graph shards that list it) and what the log's details lose."""
    keys, triples, renames = [_key(acct, i) for i in ids], set(), {}
    for rid in ids:
        rec = _first_copy(acct, rid)
        if isinstance(rec, SemanticFact):
            keys += fact_documents(rec.subject, rec.object, functional_base(rec.predicate, acct.sp.rules.semantic))
            triples.add((rec.subject.strip().casefold(), rec.predicate, rec.object.casefold()))
        if rid.startswith(JOURNAL_PREFIX):
            renames[_key(acct, rid)] = forgotten_journal_key(_key(acct, rid), rid)
    subjects = frozenset() if subject is None else frozenset({subject.strip().casefold()})
    return sorted(dict.fromkeys(keys)), Erasure(frozenset(ids), subjects, frozenset(triples), renames)


def import_digests(acct: Account, ids: list[str]) -> list[str]:
    """The ``import:`` content identities of the records ``ids`` (digests, not content): kept in
    the tombstone, so an importer never brings a forgotten record back."""
    tags = []
    for rid in ids:
        rec = _first_copy(acct, rid)
        body = rec if isinstance(rec, dict) else rec.model_dump(mode="json") if rec is not None else {}
        tags += [t for t in body.get("tags", []) if isinstance(t, str) and t.startswith(IMPORT_TAG_PREFIX)]
    return sorted(set(tags))


def cascade(acct: Account, ids: list[str]) -> list[str]:
    """The episodes at HEAD that summarise a turn among ``ids``: their summary may quote it, so
    they are forgotten with it."""
    turns = {i for i in ids if i[:2] in ("TU", "TL")}
    if not turns:
        return []
    return [e.id for e in acct.records("episode")
            if isinstance(e, Episode) and e.id not in ids and turns & set(e.turn_refs)]


def targets(acct: Account, ids: Iterable[str] = (), subject: str | None = None, query: str | None = None,
            k: int = 10) -> list[str]:
    """The record ids a forget erases: ``ids`` (each must exist), the facts about ``subject`` at
    HEAD (case-insensitive), and the top ``k`` hits of ``query``."""
    found = list(dict.fromkeys(strings(ids, "ids")))
    for rid in found:
        _first_version(acct, rid)
    if subject is not None:
        want = subject.strip().casefold()
        found += [f.id for f in acct.records("fact")
                  if isinstance(f, SemanticFact) and f.subject.strip().casefold() == want]
    if query is not None:
        found += [h.id for h in acct.search(query, k) if h.id[:2] in KIND_BY_PREFIX or h.id.startswith(JOURNAL_PREFIX)]
    if not found:
        raise InvalidInput("forget needs an id, a subject or a query that matches something", field="ids")
    return sorted(dict.fromkeys(found))


def plan_forget(master: Snapshot, ids: list[str], tombstone: dict[str, Any], now: datetime,
                journal_keys: Sequence[str] = ()) -> Change:
    """Version HEAD+1 on ``master`` that retires ``ids`` from HEAD; its entry is the tombstone."""
    retired = [record_path(i) for i in ids if not i.startswith(JOURNAL_PREFIX) and master.record(i) is not None]
    retired += [k for k in journal_keys if master.document(k) is not None]
    return Change(VersionEntry({
        "version": master.version + 1, "parent": master.version, "timestamp": now.isoformat(), "kind": "forget",
        "added": {}, "superseded": [], "replaced": [], "retired": retired, "conflicts": [],
        "counts": dict(master.entry().counts), "forgotten": ids, **tombstone,
    }), retires=tuple(retired))


def _backups(acct: Account) -> list[str]:
    """Backups made before now that still hold the content (the default backup repository)."""
    return [str(p) for p in backups_of(acct.sp.home, acct.name)]


def forget(acct: Account, ids: Iterable[str] = (), *, subject: str | None = None, query: str | None = None,
           k: int = 10, reason: str = "", by: str | None = None, dry_run: bool = False) -> ForgetResult:
    """Erase records everywhere the account keeps them (module docstring); ``dry_run`` only lists them."""
    found, backups = targets(acct, ids, subject, query, k), _backups(acct)
    found = sorted(found + cascade(acct, found))
    if dry_run:
        return ForgetResult(found, True, backups_holding=backups)
    keys, what = erasure(acct, found, subject)
    digests = import_digests(acct, found)
    rewritten = acct.store.forget(keys, what)
    tombstone = {"by": by, "reason": reason, "rewritten": rewritten, "backups_holding": backups,
                 "import_digests": digests}
    moved = list(what.renames.values())
    version = acct.commit(lambda head: plan_forget(head, found, tombstone, utc_now(), moved))
    acct.drop_index()
    acct.store.reclaim()  # last: the dropped index's rows are old row versions too
    return ForgetResult(found, False, version, rewritten, backups)
