"""The consolidation planner: buffer + master snapshot + rules -> a changeset (no I/O of its own).

Rebase is the same function: the plan is always made against HEAD, and when HEAD is newer than
the sandbox's parent, appends commute, states are latest-wins by event time, facts are checked
against the newer graph and a core field changed on both sides keeps the master's value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError

from soulpass.consolidation.clipboard import ClipboardOp, plan_clipboards
from soulpass.consolidation.documents import CoreMerge, latest_wins
from soulpass.consolidation.gks import GKSWorkingSet
from soulpass.consolidation.journal import HashLookup, empty_lookup, plan_journal
from soulpass.consolidation.rules import Rules
from soulpass.consolidation.semantic import SemanticMerge
from soulpass.errors import Corrupted
from soulpass.ids import PERMANENT_PREFIXES, is_temp_id, permanent_id
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
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store.files.commit import Changeset, FileWrite
from soulpass.store.files.fsio import dump_json
from soulpass.store.files.session_log import ARCHIVED_MARKER
from soulpass.store.keys import (
    CORE_MEMORY,
    GKS_DATA,
    USER_PROFILE,
    record_path,
    sandbox_dir,
    state_path,
)

__all__ = ["ConsolidationPlan", "IdAllocator", "MasterReader", "plan_consolidation"]


class MasterReader(Protocol):
    name: str

    def head(self) -> int: ...
    def version_doc(self) -> dict[str, Any]: ...
    def read_at(self, relpath: str, at: int | None = None) -> dict[str, Any] | None: ...


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
    changeset: Changeset = field(repr=False)
    journal: list[dict[str, str]] = field(default_factory=list)  # prose records added: id, path
    journal_repeats: list[dict[str, Any]] = field(default_factory=list)  # stored, same hash as an earlier one

    @property
    def rebased(self) -> bool:
        return self.parent_version != self.base_version

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "base_version": self.base_version,
            "sandbox_id": self.sandbox_id,
            "parent_version": self.parent_version,
            "rebased": self.rebased,
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


class IdAllocator:
    """Permanent id allocation from the per-month counter files (``log/ids/YYYYMM.json``)."""

    def __init__(self, master: MasterReader, version: int) -> None:
        self.master, self.version = master, version
        self.months: dict[str, dict[str, dict[str, int]]] = {}

    def allocate(self, kind: str, when: datetime) -> str:
        day = when.strftime("%Y%m%d")
        month = self.months.get(day[:6])
        if month is None:
            raw = self.master.read_at(f"log/ids/{day[:6]}.json")
            month = self.months[day[:6]] = {d: dict(c) for d, c in (raw or {}).get("days", {}).items()}
        prefix = PERMANENT_PREFIXES[kind]
        n = month.setdefault(day, {}).get(prefix, 0) + 1
        month[day][prefix] = n
        return permanent_id(kind, day, n)

    def writes(self) -> list[FileWrite]:
        return [FileWrite(f"log/ids/{m}.json", dump_json({"version": self.version, "days": days}))
                for m, days in sorted(self.months.items())]


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


def plan_consolidation(
    master: MasterReader,
    sandbox: SandboxInfo,
    events: list[BufferEvent],
    rules: Rules,
    now: datetime,
    journal_lookup: HashLookup = empty_lookup,
) -> ConsolidationPlan:
    """Plan version HEAD+1 from a sandbox's events; reads the master, writes nothing.

    ``journal_lookup`` finds the entries already in the master with a given semantic hash."""
    head = master.head()
    version = head + 1
    ids = IdAllocator(master, version)
    conflicts: list[dict[str, Any]] = []
    duplicates: list[dict[str, Any]] = []
    id_map: dict[str, str] = {}
    records: list[Record] = []
    by_type: dict[str, list[tuple[BufferEvent, Any]]] = defaultdict(list)
    for ev in events:
        by_type[ev.type].append((ev, _parse(ev)))

    # append_all: permanent ids in event-time order, per kind.
    appended = [(ev, r) for t in ("turn", "episode", "sensory") for ev, r in by_type[t]]
    for _ev, rec in sorted(appended, key=lambda x: x[1].created_at):
        if rec.id in id_map:
            duplicates.append({"record": rec.id, "duplicate_of": id_map[rec.id], "why": "written twice"})
            continue
        id_map[rec.id] = ids.allocate(rec.kind, rec.created_at)
        records.append(rec)

    def remap(ref: str, owner: str) -> str | None:
        if ref in id_map:
            return id_map[ref]
        if is_temp_id(ref):
            why = "refers to a temporary id that is not in this session"
        elif master.read_at(record_path(ref)) is None:
            why = "refers to a record that does not exist in the master"
        else:
            return ref
        conflicts.append({"type": "unresolved_reference", "record": owner, "ref": ref, "why": why})
        return None

    episode_of: dict[str, str] = {}
    final: dict[str, Record] = {}
    for rec in records:
        new_id = id_map[rec.id]
        update: dict[str, Any] = {"id": new_id, "version": version, "session_id": sandbox.sandbox_id}
        if isinstance(rec, Episode):
            refs = [m for r in rec.turn_refs if (m := remap(r, rec.id)) is not None]
            update |= {"episode_id": new_id, "turn_refs": tuple(refs)}
            for r in refs:
                episode_of.setdefault(r, new_id)
        final[new_id] = rec.model_copy(update=update)
    for new_id, rec in list(final.items()):
        if isinstance(rec, TurnUser | TurnLLM):
            update = {"episode_ref": episode_of.get(new_id) or (rec.episode_ref and remap(rec.episode_ref, rec.id))}
            if isinstance(rec, TurnLLM) and rec.reply_to:
                update["reply_to"] = remap(rec.reply_to, rec.id)
            final[new_id] = rec.model_copy(update=update)

    # validate_and_merge for facts, against the graph at HEAD.
    gks = GKSWorkingSet(read_doc=master.read_at)

    def read_fact(fid: str) -> SemanticFact | None:
        raw = master.read_at(record_path(fid))
        return None if raw is None else SemanticFact.model_validate(raw)

    cand_events = by_type["semantic_candidate"]
    cand_time = {id(c): ev.at for ev, c in cand_events}
    merge = SemanticMerge(
        rule=rules.semantic, gks=gks, read_fact=read_fact, version=version,
        session_id=sandbox.sandbox_id,
        new_fact_id=lambda c: ids.allocate("fact", cand_time[id(c)]),
    )
    rejected: list[dict[str, Any]] = []
    for ev, cand in cand_events:
        src = tuple(m for r in cand.source_refs if (m := remap(r, cand.id or ev.event_id)) is not None)
        out = merge.add(cand, src, {"created_at": ev.at, "agent": ev.agent})
        if out.status == "duplicate":
            if cand.id and out.fact_id:
                id_map[cand.id] = out.fact_id  # later source_refs to it point at the existing fact
            duplicates.append({"candidate": out.candidate, "duplicate_of": out.fact_id, "why": out.detail})
        elif out.status == "rejected":
            rejected.append({"candidate": out.candidate, "why": out.detail, "data": ev.data})
        elif out.fact_id and cand.id:
            id_map[cand.id] = out.fact_id
    final.update(merge.new_facts)

    # Prose records: permanent ids, their Markdown files, and the semantic-hash check.
    journal = plan_journal(master, [e for _ev, e in by_type["journal"]], version=version, ids=ids,
                           rule=rules.journal, lookup=journal_lookup, session_id=sandbox.sandbox_id)
    id_map.update(journal.id_map)
    duplicates.extend(journal.duplicates)

    writes: list[FileWrite] = [FileWrite(record_path(rid), dump_json(r.model_dump(mode="json")))
                               for rid, r in sorted(final.items())]
    replaced: list[str] = []
    written: list[str] = []
    for fid, fact in sorted(merge.rewritten.items()):
        writes.append(FileWrite(record_path(fid), dump_json(fact.model_dump(mode="json"))))
        replaced.append(record_path(fid))
    superseded = [{"fact": old, "by": new.id} for new in merge.new_facts.values() for old in new.supersedes]

    def put_document(relpath: str, doc: Any, existed: bool | None = None) -> None:
        writes.append(FileWrite(relpath, dump_json(doc.model_dump(mode="json"))))
        written.append(relpath)
        if existed if existed is not None else master.read_at(relpath) is not None:
            replaced.append(relpath)

    # GKS: only the shards the facts touched, plus the totals.
    if gks.dirty:
        for path, doc in gks.documents(version).items():
            put_document(path, _Shard(version, doc), existed=path in gks.existed)
        totals = master.read_at(GKS_DATA) or {}
        put_document(GKS_DATA, _Shard(version, {
            "edge_count": int(totals.get("edge_count", 0)) + gks.edge_delta, "updated_at": now.isoformat(),
            "shard_dir": "shards"}, kind="gks"))

    # latest_wins for named states and the user profile.
    state_changes: list[dict[str, Any]] = []
    deltas: dict[str, list[tuple[datetime, dict[str, Any]]]] = defaultdict(list)
    for ev, d in by_type["state_delta"]:
        deltas[d.name].append((ev.at, d.data))
    for name, items in sorted(deltas.items()):
        raw = master.read_at(state_path(name))
        old = StateBlob.model_validate(raw) if raw else StateBlob(name=name)
        lw = latest_wins(old.data, old.key_times, items)
        if lw.kept_master:
            conflicts.append({"type": "state_older_than_master", "state": name, "keys": list(lw.kept_master),
                              "why": "master has newer values for these keys; master's kept"})
        if lw.changed:
            put_document(state_path(name), StateBlob(name=name, data=lw.data, key_times=lw.key_times,
                                                     version=version, updated_at=now))
            state_changes.append({"state": name, "keys": list(lw.changed)})
    profile_items = [(ev.at, p.data) for ev, p in by_type["profile_update"]]
    if profile_items:
        raw = master.read_at(USER_PROFILE)
        old_p = UserProfile.model_validate(raw) if raw else UserProfile()
        lw = latest_wins(old_p.fields, old_p.key_times, profile_items)
        if lw.changed:
            put_document(USER_PROFILE, UserProfile(fields=lw.data, key_times=lw.key_times,
                                                   version=version, updated_at=now))
            state_changes.append({"state": "user_profile", "keys": list(lw.changed)})

    # careful_merge for core memory.
    core_changes: list[dict[str, Any]] = []
    if by_type["core_proposal"]:
        raw = master.read_at(CORE_MEMORY)
        core_head = CoreMemory.model_validate(raw) if raw else CoreMemory()
        parent = None
        if sandbox.parent_version != head:
            raw_parent = master.read_at(CORE_MEMORY, sandbox.parent_version)
            parent = CoreMemory.model_validate(raw_parent) if raw_parent else CoreMemory()
        cm = CoreMerge(rule=rules.core, head=core_head, parent=parent)
        for ev, p in by_type["core_proposal"]:
            cm.propose(p, ev.event_id)
        rejected.extend(cm.rejected)
        conflicts.extend(cm.conflicts)
        core_changes = cm.changes
        if cm.changes:
            put_document(CORE_MEMORY, CoreMemory(**cm.result(), version=version, updated_at=now))

    # Clipboards: the buffered ops replayed on each agent's clipboard at HEAD.
    for cw in plan_clipboards(master, [op for _ev, op in by_type["clipboard_op"]], version, now):
        writes.append(FileWrite(cw.relpath, cw.data))
        written.append(cw.relpath)
        if cw.existed:
            replaced.append(cw.relpath)

    writes.extend(journal.writes)
    written.extend(journal.paths)
    writes.extend(ids.writes())
    writes.append(FileWrite(f"{sandbox_dir(sandbox.sandbox_id)}/{ARCHIVED_MARKER}",
                            dump_json({"version": version, "archived_at": now.isoformat()})))

    added: dict[str, list[str]] = defaultdict(list)
    for rid, rec in sorted(final.items()):
        added[rec.kind].append(rid)
    old_doc = master.version_doc()
    counts = dict(old_doc.get("counts", {}))
    for kind, new_ids in added.items():
        counts[kind] = int(counts.get(kind, 0)) + len(new_ids)
    counts["facts_superseded"] = int(counts.get("facts_superseded", 0)) + len(superseded)
    if journal.added:
        counts["journal"] = int(counts.get("journal", 0)) + len(journal.added)
    version_doc = {"version": version, "parent": head, "timestamp": now.isoformat(),
                   "source_sandbox": sandbox.sandbox_id, "counts": counts}
    log_entry = {
        "version": version, "parent": head, "timestamp": now.isoformat(), "kind": "archive",
        "source_sandbox": sandbox.sandbox_id, "sandbox_name": sandbox.name,
        "sandbox_parent_version": sandbox.parent_version,
        "rebased": ({"from": sandbox.parent_version, "onto": head}
                    if sandbox.parent_version != head else None),
        "added": dict(added), "superseded": superseded, "replaced": replaced,
        "written": written, "retired": [], "duplicates": duplicates, "rejected": rejected, "conflicts": conflicts,
        "core_changes": core_changes, "state_changes": state_changes, "id_map": id_map,
        "counts": counts, "journal": [{"id": a["id"], "path": a["path"]} for a in journal.added],
        "journal_repeats": journal.repeats,
    }
    changeset = Changeset(base_version=head, writes=tuple(writes), log_entry=log_entry,
                          version_doc=version_doc)
    return ConsolidationPlan(
        version=version, base_version=head, sandbox_id=sandbox.sandbox_id,
        parent_version=sandbox.parent_version, id_map=id_map, added=dict(added),
        superseded=superseded, replaced=replaced, duplicates=duplicates, rejected=rejected,
        conflicts=conflicts, core_changes=core_changes, state_changes=state_changes,
        changeset=changeset, journal=journal.added, journal_repeats=journal.repeats,
    )


class _Shard:
    """A GKS shard or totals document as written to disk."""

    def __init__(self, version: int, body: dict[str, Any], kind: str = "gks_shard") -> None:
        self.body = {"kind": kind, **body, "version": version}

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        return self.body
