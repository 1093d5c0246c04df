"""The consolidation planner: buffer + master snapshot + rules -> a typed change (no I/O of its own).

Rebase is the same function: the plan is always made against HEAD, and when HEAD is newer than
the sandbox's parent, appends commute, states are latest-wins by event time, facts are checked
against the newer graph and a core field changed on both sides keeps the master's value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from soulpass.consolidation.clipboard import ClipboardOp, plan_clipboards
from soulpass.consolidation.documents import CoreMerge, latest_wins
from soulpass.consolidation.gks import GKSWorkingSet
from soulpass.consolidation.ids import IdAllocator
from soulpass.consolidation.journal import JournalPlan, plan_journal
from soulpass.consolidation.plan_items import PlanItems
from soulpass.consolidation.preview import ArchivePreview, Exclusion, PreviewItem
from soulpass.consolidation.rules import Rules
from soulpass.consolidation.semantic import SemanticMerge
from soulpass.errors import Corrupted, InvalidInput
from soulpass.ids import is_temp_id
from soulpass.prose import JournalEntry
from soulpass.records import (
    RECORD_MODELS,
    BufferEvent,
    CoreMemory,
    CoreProposal,
    Episode,
    ProfileUpdate,
    Record,
    SemanticCandidate,
    SemanticFact,
    StateBlob,
    StateDelta,
    TurnLLM,
    TurnUser,
    UserProfile,
)
from soulpass.retrieval.standing import standing_tags
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store.contract import Change, DocumentPut, SandboxClose, Snapshot, VersionEntry
from soulpass.store.keys import CORE_MEMORY, GKS_DATA, USER_PROFILE, record_path, state_path

__all__ = ["ConsolidationPlan", "plan_consolidation"]


@dataclass(frozen=True)
class ConsolidationPlan:
    """What archiving a sandbox will do; ``summary()`` is what ``--dry-run`` shows."""

    version: int
    base_version: int
    sandbox_id: str
    parent_version: int
    id_map: dict[str, str]
    added: dict[str, list[str]]
    superseded: list[dict[str, str]]
    replaced: list[str]
    duplicates: list[dict[str, Any]]
    rejected: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]
    core_changes: list[dict[str, Any]]
    state_changes: list[dict[str, Any]]
    change: Change = field(repr=False)
    journal: list[dict[str, str]] = field(default_factory=list)  # prose records added: id, path
    journal_repeats: list[dict[str, Any]] = field(default_factory=list)  # stored, same hash as an earlier one
    items: tuple[PreviewItem, ...] = ()  # each buffer event and what this plan does with it (preview.py)
    exclusion: Exclusion = field(default_factory=Exclusion)

    @property
    def rebased(self) -> bool:
        return self.parent_version != self.base_version

    @property
    def empty(self) -> bool:
        """Nothing to store or to log: no record, no document, no rejection, conflict or exclusion
        (an empty sandbox, or only exact repeats of what the master holds). Archiving it commits no
        version; a rejection, a conflict or an exclusion is still committed, so the log keeps what
        was refused or left out, and why (and an exclusion keeps its sandbox for its history)."""
        return not (self.change.records or self.change.documents or self.rejected or self.conflicts
                    or self.exclusion.items)

    @property
    def keeps_sandbox(self) -> bool:
        """The commit keeps the sandbox, closed, for its history (items were left out)."""
        return self.change.closes is not None and self.change.closes.keep

    def preview(self) -> ArchivePreview:
        """This plan item by item: what a person reviews before the archive commits it."""
        return ArchivePreview(sandbox_id=self.sandbox_id, base_version=self.base_version,
                              version=self.base_version if self.empty else self.version,
                              parent_version=self.parent_version, rebased=self.rebased, empty=self.empty,
                              items=self.items, conflicts=tuple(self.conflicts))

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.base_version if self.empty else self.version,  # an empty plan commits nothing
            "base_version": self.base_version,
            "sandbox_id": self.sandbox_id,
            "parent_version": self.parent_version,
            "rebased": self.rebased,
            "empty": self.empty,
            "added": self.added,
            "superseded": self.superseded,
            "replaced": self.replaced,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "conflicts": self.conflicts,
            "core_changes": self.core_changes,
            "state_changes": self.state_changes,
            "journal": self.journal,
            "journal_repeats": self.journal_repeats,
            "id_map": self.id_map,
        }


def _parse(event: BufferEvent) -> Any:
    try:
        match event.type:
            case "turn" | "sensory" | "episode":
                kind = event.data.get("kind", "episode" if event.type == "episode" else "sensory")
                return RECORD_MODELS[kind].model_validate(event.data)
            case "semantic_candidate":
                return SemanticCandidate.model_validate(event.data)
            case "state_delta":
                return StateDelta.model_validate(event.data)
            case "core_proposal":
                return CoreProposal.model_validate(event.data)
            case "profile_update":
                return ProfileUpdate.model_validate(event.data)
            case "journal":
                return JournalEntry.model_validate(event.data)
            case "clipboard_op":
                return ClipboardOp.model_validate(event.data)
            case "wake" | "inbox":
                return None  # the agent's own bookkeeping: not part of the master
    except (ValidationError, KeyError) as exc:
        raise Corrupted(f"buffer event {event.event_id} ({event.type}) does not parse: {exc}") from exc
    raise Corrupted(f"unknown buffer event type {event.type!r}")


Events = dict[str, list[tuple[BufferEvent, Any]]]  # buffer events by type, each with its parsed value


@dataclass
class _Planning:
    """What the record families add to version ``version`` as they are planned, in order."""

    master: Snapshot
    sandbox: SandboxInfo
    now: datetime
    version: int
    ids: IdAllocator
    id_map: dict[str, str] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    documents: list[DocumentPut] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    state_changes: list[dict[str, Any]] = field(default_factory=list)
    items: PlanItems = field(default_factory=PlanItems)  # what each buffer event comes to

    def remap(self, ref: str, owner: str) -> str | None:
        """A reference in the buffer as a permanent id; None (and a conflict) when it resolves to nothing."""
        if ref in self.id_map:
            return self.id_map[ref]
        if is_temp_id(ref):
            why = "refers to a temporary id that is not in this session"
        elif self.master.document(record_path(ref)) is None:
            why = "refers to a record that does not exist in the master"
        else:
            return ref
        self.conflicts.append({"type": "unresolved_reference", "record": owner, "ref": ref, "why": why})
        return None

    def put(self, key: str, body: BaseModel | dict[str, Any], existed: bool | None = None) -> None:
        """A document this version writes (``replaced`` when HEAD has one under ``key``)."""
        self.documents.append(DocumentPut(key, body))
        self.written.append(key)
        if existed if existed is not None else self.master.document(key) is not None:
            self.replaced.append(key)


def plan_consolidation(
    master: Snapshot,
    sandbox: SandboxInfo,
    events: list[BufferEvent],
    rules: Rules,
    now: datetime,
    parent: Snapshot | None = None,
    exclusion: Exclusion | None = None,
) -> ConsolidationPlan:
    """Plan version HEAD+1 from a sandbox's events; ``master`` is HEAD, nothing is written.

    ``parent`` is the master as the sandbox saw it (needed when HEAD moved on: a rebase).
    ``exclusion`` names events left out: planned as if never written, listed as excluded items."""
    p = _Planning(master, sandbox, now, master.version + 1, IdAllocator(master, master.version + 1))
    left_out = exclusion or Exclusion()
    by_type: Events = defaultdict(list)
    for ev in events:
        if ev.event_id in left_out.items:
            p.items.excluded(ev, left_out.reason)
            continue
        by_type[ev.type].append((ev, _parse(ev)))
    final = _append_records(p, by_type)
    merge = _merge_facts(p, by_type, rules)
    final.update(merge.new_facts)
    journal = plan_journal(master, [e for _ev, e in by_type["journal"]], version=p.version, ids=p.ids,
                           rule=rules.journal, session_id=sandbox.sandbox_id)
    p.id_map.update(journal.id_map)
    p.duplicates.extend(journal.duplicates)
    p.items.journal(by_type["journal"], journal)
    p.records = [r for _rid, r in sorted(final.items())]
    for fid, fact in sorted(merge.rewritten.items()):
        p.records.append(fact)
        p.replaced.append(record_path(fid))
    superseded = [{"fact": old, "by": new.id} for new in merge.new_facts.values() for old in new.supersedes]
    _put_gks(p, merge.gks)
    _put_states(p, by_type)
    core_changes = _put_core(p, by_type, rules, parent)
    for cw in plan_clipboards(master, [op for _ev, op in by_type["clipboard_op"]], p.version, now):
        p.put(cw.key, cw.document, existed=cw.existed)
    for ev, op in by_type["clipboard_op"]:
        p.items.clipboard(ev, op)
    p.documents.extend(journal.documents)
    p.written.extend(journal.paths)
    p.documents.extend(p.ids.documents())
    added: dict[str, list[str]] = defaultdict(list)
    for rid, rec in sorted(final.items()):
        added[rec.kind].append(rid)
    items = p.items.in_order(events, rules.review)
    entry = _archive_entry(p, dict(added), superseded, core_changes, journal, left_out.entry(
        {i.id: i.kind for i in items}, len(events)))
    # A sandbox with items left out is kept, closed, so what was left out stays readable in its history.
    change = Change(entry, records=tuple(p.records), documents=tuple(p.documents),
                    closes=SandboxClose(sandbox.sandbox_id, now, keep=bool(left_out.items)))
    return ConsolidationPlan(
        version=p.version, base_version=master.version, sandbox_id=sandbox.sandbox_id,
        parent_version=sandbox.parent_version, id_map=p.id_map, added=dict(added),
        superseded=superseded, replaced=p.replaced, duplicates=p.duplicates, rejected=p.rejected,
        conflicts=p.conflicts, core_changes=core_changes, state_changes=p.state_changes,
        change=change, journal=journal.added, journal_repeats=journal.repeats, items=items, exclusion=left_out,
    )


def _append_records(p: _Planning, by_type: Events) -> dict[str, Record]:
    """``append_all``: permanent ids in event-time order, per kind, and crosslinks rewritten."""
    fresh: list[Record] = []
    appended = [(ev, r) for t in ("turn", "episode", "sensory") for ev, r in by_type[t]]
    for ev, rec in sorted(appended, key=lambda x: x[1].created_at):
        if rec.id in p.id_map:
            p.duplicates.append({"record": rec.id, "duplicate_of": p.id_map[rec.id], "why": "written twice"})
            p.items.record(ev, rec, p.id_map[rec.id], repeated=True)
            continue
        p.id_map[rec.id] = p.ids.allocate(rec.kind, rec.created_at)
        p.items.record(ev, rec, p.id_map[rec.id], repeated=False)
        fresh.append(rec)
    episode_of: dict[str, str] = {}
    final: dict[str, Record] = {}
    for rec in fresh:
        new_id = p.id_map[rec.id]
        update: dict[str, Any] = {"id": new_id, "version": p.version, "session_id": p.sandbox.sandbox_id}
        if isinstance(rec, Episode):
            refs = [m for r in rec.turn_refs if (m := p.remap(r, rec.id)) is not None]
            update |= {"episode_id": new_id, "turn_refs": tuple(refs)}
            for r in refs:
                episode_of.setdefault(r, new_id)
        final[new_id] = rec.model_copy(update=update)
    for new_id, rec in list(final.items()):
        if isinstance(rec, TurnUser | TurnLLM):
            update = {"episode_ref": episode_of.get(new_id) or (rec.episode_ref and p.remap(rec.episode_ref, rec.id))}
            if isinstance(rec, TurnUser):  # a standing instruction is kept as one (retrieval/standing.py)
                update["tags"] = (*rec.tags, *(t for t in standing_tags(rec.text_excerpt) if t not in rec.tags))
            if isinstance(rec, TurnLLM) and rec.reply_to:
                update["reply_to"] = p.remap(rec.reply_to, rec.id)
            final[new_id] = rec.model_copy(update=update)
    return final


def _merge_facts(p: _Planning, by_type: Events, rules: Rules) -> SemanticMerge:
    """``validate_and_merge`` for the candidates, against the graph at HEAD."""

    def read_fact(fid: str) -> SemanticFact | None:
        raw = p.master.document(record_path(fid))
        return None if raw is None else SemanticFact.model_validate(raw)

    cand_events = by_type["semantic_candidate"]
    cand_time = {id(c): ev.at for ev, c in cand_events}
    merge = SemanticMerge(
        rule=rules.semantic, gks=GKSWorkingSet(read_doc=p.master.document), read_fact=read_fact,
        version=p.version, session_id=p.sandbox.sandbox_id,
        new_fact_id=lambda c: p.ids.allocate("fact", cand_time[id(c)]),
    )
    for ev, cand in cand_events:
        src = tuple(m for r in cand.source_refs if (m := p.remap(r, cand.id or ev.event_id)) is not None)
        out = merge.add(cand, src, {"created_at": ev.at, "agent": ev.agent})
        p.items.fact(ev, cand, out)
        if out.status == "duplicate":
            if cand.id and out.fact_id:
                p.id_map[cand.id] = out.fact_id  # later source_refs to it point at the existing fact
            p.duplicates.append({"candidate": out.candidate, "duplicate_of": out.fact_id, "why": out.detail})
        elif out.status == "rejected":
            p.rejected.append({"candidate": out.candidate, "why": out.detail, "data": ev.data})
        elif out.fact_id and cand.id:
            p.id_map[cand.id] = out.fact_id
    return merge


def _put_gks(p: _Planning, gks: GKSWorkingSet) -> None:
    """Only the shards the facts touched, plus the totals."""
    if not gks.dirty:
        return
    for path, doc in gks.documents(p.version).items():
        p.put(path, doc, existed=path in gks.existed)  # kind, version and the edges (or entries)
    totals = p.master.document(GKS_DATA) or {}
    p.put(GKS_DATA, {"kind": "gks", "edge_count": int(totals.get("edge_count", 0)) + gks.edge_delta,
                     "updated_at": p.now.isoformat(), "shard_dir": "shards", "version": p.version})


def _put_states(p: _Planning, by_type: Events) -> None:
    """``latest_wins`` for the named states and the user profile."""
    deltas: dict[str, list[tuple[datetime, dict[str, Any]]]] = defaultdict(list)
    for ev, d in by_type["state_delta"]:
        deltas[d.name].append((ev.at, d.data))
    for name, items in sorted(deltas.items()):
        raw = p.master.document(state_path(name))
        old = StateBlob.model_validate(raw) if raw else StateBlob(name=name)
        lw = latest_wins(old.data, old.key_times, items)
        for ev, d in by_type["state_delta"]:
            if d.name == name:
                p.items.keys(ev, "state", f"state:{name}", d.data, old.data, lw)
        if lw.kept_master:
            p.conflicts.append({"type": "state_older_than_master", "state": name, "keys": list(lw.kept_master),
                                "why": "master has newer values for these keys; master's kept"})
        if lw.changed:
            p.put(state_path(name), StateBlob(name=name, data=lw.data, key_times=lw.key_times,
                                              version=p.version, updated_at=p.now))
            p.state_changes.append({"state": name, "keys": list(lw.changed)})
    profile_items = [(ev.at, u.data) for ev, u in by_type["profile_update"]]
    if profile_items:
        raw = p.master.document(USER_PROFILE)
        old_p = UserProfile.model_validate(raw) if raw else UserProfile()
        lw = latest_wins(old_p.fields, old_p.key_times, profile_items)
        for ev, u in by_type["profile_update"]:
            p.items.keys(ev, "profile", "profile", u.data, old_p.fields, lw)
        if lw.changed:
            p.put(USER_PROFILE, UserProfile(fields=lw.data, key_times=lw.key_times, version=p.version,
                                            updated_at=p.now))
            p.state_changes.append({"state": "user_profile", "keys": list(lw.changed)})


def _put_core(p: _Planning, by_type: Events, rules: Rules, parent: Snapshot | None) -> list[dict[str, Any]]:
    """``careful_merge`` for core memory; a field changed on both sides keeps the master's value."""
    if not by_type["core_proposal"]:
        return []
    raw = p.master.document(CORE_MEMORY)
    core_head = CoreMemory.model_validate(raw) if raw else CoreMemory()
    before = None
    if p.sandbox.parent_version != p.master.version:
        if parent is None or parent.version != p.sandbox.parent_version:
            raise InvalidInput(f"sandbox {p.sandbox.sandbox_id} is rebased: plan it with its parent's snapshot "
                               f"(version {p.sandbox.parent_version})", field="parent")
        raw_parent = parent.document(CORE_MEMORY)
        before = CoreMemory.model_validate(raw_parent) if raw_parent else CoreMemory()
    cm = CoreMerge(rule=rules.core, head=core_head, parent=before)
    for ev, proposal in by_type["core_proposal"]:
        cm.propose(proposal, ev.event_id)
        p.items.core(ev, proposal, cm)
    p.rejected.extend(cm.rejected)
    p.conflicts.extend(cm.conflicts)
    if cm.changes:
        p.put(CORE_MEMORY, CoreMemory(**cm.result(), version=p.version, updated_at=p.now))
    return cm.changes


def _archive_entry(p: _Planning, added: dict[str, list[str]], superseded: list[dict[str, str]],
                   core_changes: list[dict[str, Any]], journal: JournalPlan,
                   excluded: dict[str, Any] | None) -> VersionEntry:
    """The version log's line for the archive (its header is also ``VERSION.json``)."""
    head, sandbox = p.master.version, p.sandbox
    counts = dict(p.master.entry().counts)
    for kind, new_ids in added.items():
        counts[kind] = int(counts.get(kind, 0)) + len(new_ids)
    counts["facts_superseded"] = int(counts.get("facts_superseded", 0)) + len(superseded)
    if journal.added:
        counts["journal"] = int(counts.get("journal", 0)) + len(journal.added)
    fields: dict[str, Any] = {
        "version": p.version, "parent": head, "timestamp": p.now.isoformat(), "kind": "archive",
        "source_sandbox": sandbox.sandbox_id, "sandbox_name": sandbox.name,
        "sandbox_parent_version": sandbox.parent_version,
        "rebased": {"from": sandbox.parent_version, "onto": head} if sandbox.parent_version != head else None,
        "added": added, "superseded": superseded, "replaced": p.replaced,
        "written": p.written, "retired": [], "duplicates": p.duplicates, "rejected": p.rejected,
        "conflicts": p.conflicts, "core_changes": core_changes, "state_changes": p.state_changes,
        "id_map": p.id_map, "counts": counts, "journal": [{"id": a["id"], "path": a["path"]} for a in journal.added],
        "journal_repeats": journal.repeats,
    }
    if excluded is not None:
        fields["excluded"] = excluded  # ids, kinds, who and why: never the text
    return VersionEntry(fields)
