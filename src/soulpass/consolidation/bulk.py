"""Bulk append: many records as one version, written straight into place (imports, benchmarks).

Ids, crosslinks, counts and the knowledge graph are handled as in a normal archive, but facts are
appended as given (no threshold, no supersession) and the commit skips the txn copy.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from soulpass.consolidation.gks import GKSWorkingSet
from soulpass.consolidation.plan import IdAllocator, MasterReader
from soulpass.consolidation.rules import SemanticRule
from soulpass.consolidation.semantic import functional_base
from soulpass.errors import InvalidInput
from soulpass.records import Episode, Record, SemanticFact, TurnLLM, TurnUser
from soulpass.store.files.commit import Changeset, FileWrite
from soulpass.store.files.fsio import dump_json
from soulpass.store.keys import GKS_DATA, record_path

__all__ = ["plan_bulk_append"]


def plan_bulk_append(master: MasterReader, records: list[Record], now: datetime, rule: SemanticRule) -> Changeset:
    head = master.head()
    version = head + 1
    ids = IdAllocator(master, version)
    id_map: dict[str, str] = {}
    for rec in sorted(records, key=lambda r: r.created_at):
        if rec.id in id_map:
            raise InvalidInput(f"record id {rec.id} appears twice in the bulk input", id=rec.id)
        id_map[rec.id] = ids.allocate(rec.kind, rec.created_at)
    gks = GKSWorkingSet(read_doc=master.read_at)
    writes: list[FileWrite] = []
    added: dict[str, list[str]] = defaultdict(list)
    episode_of: dict[str, str] = {}
    for rec in records:
        if isinstance(rec, Episode):
            for r in rec.turn_refs:
                episode_of[id_map.get(r, r)] = id_map[rec.id]
    for rec in records:
        new_id = id_map[rec.id]
        update: dict[str, Any] = {"id": new_id, "version": version}
        if isinstance(rec, Episode):
            update |= {"episode_id": new_id, "turn_refs": tuple(id_map.get(r, r) for r in rec.turn_refs)}
        elif isinstance(rec, TurnUser | TurnLLM):
            update["episode_ref"] = episode_of.get(new_id)
            if isinstance(rec, TurnLLM) and rec.reply_to:
                update["reply_to"] = id_map.get(rec.reply_to, rec.reply_to)
        elif isinstance(rec, SemanticFact):
            update |= {"valid_from_version": version,
                       "source_refs": tuple(id_map.get(r, r) for r in rec.source_refs)}
            gks.add_fact(new_id, rec.subject, rec.predicate, rec.object, functional_base(rec.predicate, rule))
        writes.append(FileWrite(record_path(new_id), dump_json(rec.model_copy(update=update).model_dump(mode="json"))))
        added[rec.kind].append(new_id)
    for path, doc in gks.documents(version).items():
        writes.append(FileWrite(path, dump_json(doc)))
    totals = master.read_at(GKS_DATA) or {}
    if gks.dirty:
        writes.append(FileWrite(GKS_DATA, dump_json({
            "kind": "gks", "version": version, "shard_dir": "shards",
            "edge_count": int(totals.get("edge_count", 0)) + gks.edge_delta, "updated_at": now.isoformat()})))
    writes.extend(ids.writes())
    # The id lists would make one huge log line; they go to a file the log entry names.
    added_file = f"log/added/{version:08d}.json"
    writes.append(FileWrite(added_file, dump_json({"version": version, "added": dict(added)})))
    counts = dict(master.version_doc().get("counts", {}))
    for kind, n in added.items():
        counts[kind] = int(counts.get(kind, 0)) + len(n)
    stamp = now.isoformat()
    return Changeset(
        base_version=head,
        writes=tuple(writes),
        version_doc={"version": version, "parent": head, "timestamp": stamp, "source_sandbox": None, "counts": counts},
        log_entry={"version": version, "parent": head, "timestamp": stamp, "kind": "bulk",
                   "added_counts": {k: len(v) for k, v in added.items()}, "added": {},
                   "added_file": added_file, "replaced": [], "written": [], "retired": [],
                   "superseded": [], "conflicts": [], "counts": counts},
        bulk=True,
    )
