"""Bulk append: many records as one version, written straight into place (imports, benchmarks).

Ids, crosslinks, counts and the knowledge graph are handled as in a normal archive, but facts are
appended as given (no threshold, no supersession) and the store takes its bulk path.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from soulpass.consolidation.gks import GKSWorkingSet
from soulpass.consolidation.ids import IdAllocator
from soulpass.consolidation.rules import SemanticRule
from soulpass.consolidation.semantic import functional_base
from soulpass.errors import InvalidInput
from soulpass.records import Episode, Record, SemanticFact, TurnLLM, TurnUser
from soulpass.store.contract import Change, DocumentPut, Snapshot, VersionEntry
from soulpass.store.keys import GKS_DATA

__all__ = ["plan_bulk_append"]


def plan_bulk_append(master: Snapshot, records: list[Record], now: datetime, rule: SemanticRule) -> Change:
    """``records`` (temporary ids) as version HEAD+1 on ``master`` (HEAD)."""
    version = master.version + 1
    ids = IdAllocator(master, version)
    id_map: dict[str, str] = {}
    for rec in sorted(records, key=lambda r: r.created_at):
        if rec.id in id_map:
            raise InvalidInput(f"record id {rec.id} appears twice in the bulk input", id=rec.id)
        id_map[rec.id] = ids.allocate(rec.kind, rec.created_at)
    gks = GKSWorkingSet(read_doc=master.document)
    final = _linked(records, id_map, version, gks, rule)
    added: dict[str, list[str]] = defaultdict(list)
    for rec in final:
        added[rec.kind].append(rec.id)
    documents = [DocumentPut(path, doc) for path, doc in gks.documents(version).items()]
    if gks.dirty:
        totals = master.document(GKS_DATA) or {}
        documents.append(DocumentPut(GKS_DATA, {
            "kind": "gks", "version": version, "shard_dir": "shards",
            "edge_count": int(totals.get("edge_count", 0)) + gks.edge_delta, "updated_at": now.isoformat()}))
    documents.extend(ids.documents())
    counts = dict(master.entry().counts)
    for kind, n in added.items():
        counts[kind] = int(counts.get(kind, 0)) + len(n)
    entry = VersionEntry({"version": version, "parent": master.version, "timestamp": now.isoformat(), "kind": "bulk",
                          "added_counts": {k: len(v) for k, v in added.items()}, "added": dict(added),
                          "replaced": [], "written": [], "retired": [],
                          "superseded": [], "conflicts": [], "counts": counts})
    return Change(entry, records=tuple(final), documents=tuple(documents), bulk=True)


def _linked(records: list[Record], id_map: dict[str, str], version: int, gks: GKSWorkingSet,
            rule: SemanticRule) -> list[Record]:
    """The records with their permanent ids and crosslinks, in input order; facts join the graph."""
    episode_of: dict[str, str] = {}
    for rec in records:
        if isinstance(rec, Episode):
            for r in rec.turn_refs:
                episode_of[id_map.get(r, r)] = id_map[rec.id]
    out: list[Record] = []
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
        out.append(rec.model_copy(update=update))
    return out
