"""The Genesis Knowledge System graph, sharded so a commit touches only what its facts touch.

Edges carry their endpoints' labels, so nodes are derived, never stored (a hub node such as
"User" would otherwise grow with every fact about it). An edge lives in the shard of its
source node: ``<first three hex digits of the node id>``, 4096 shards in all. Each shard is a
document of its own (history kept); a candidate fact reads exactly one shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from soulpass.records import normalize_text
from soulpass.store.layout import gks_shard_path

__all__ = ["GKSWorkingSet", "node_id", "shard_of"]


def node_id(label: str) -> str:
    return "N_" + hashlib.sha256(normalize_text(label).encode("utf-8")).hexdigest()[:16]


def shard_of(nid: str) -> str:
    return nid[2:5]


@dataclass
class GKSWorkingSet:
    """Shards loaded on demand and edited in memory by the planner (no I/O of its own)."""

    read_shard: Callable[[str], dict[str, Any] | None]
    shards: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    edge_delta: int = 0

    def shard(self, key: str) -> dict[str, Any]:
        if key not in self.shards:
            raw = self.read_shard(gks_shard_path(key)) or {}
            self.shards[key] = {"edges": dict(raw.get("edges", {}))}
        return self.shards[key]

    @staticmethod
    def edge_key(source: str, predicate: str, target: str) -> str:
        return f"{source}|{normalize_text(predicate)}|{target}"

    def edges_from(self, subject: str) -> list[dict[str, Any]]:
        nid = node_id(subject)
        return [e for e in self.shard(shard_of(nid))["edges"].values() if e["source"] == nid]

    def add_fact(self, fact_id: str, subject: str, predicate: str, obj: str) -> None:
        s, o = node_id(subject), node_id(obj)
        key = shard_of(s)
        edges = self.shard(key)["edges"]
        ekey = self.edge_key(s, predicate, o)
        edge = edges.get(ekey)
        if edge is None:
            edge = {"source": s, "source_label": subject, "predicate": normalize_text(predicate),
                    "target": o, "target_label": obj, "fact_refs": []}
            self.edge_delta += 1
        edges[ekey] = {**edge, "fact_refs": sorted({*edge["fact_refs"], fact_id})}
        self.dirty.add(key)

    def remove_fact(self, fact_id: str, subject: str, predicate: str, obj: str) -> None:
        """Take a superseded fact out of the current graph (its file and history stay)."""
        s = node_id(subject)
        key = shard_of(s)
        edges = self.shard(key)["edges"]
        ekey = self.edge_key(s, predicate, node_id(obj))
        edge = edges.get(ekey)
        if edge is None:
            return
        refs = [r for r in edge["fact_refs"] if r != fact_id]
        if refs:
            edges[ekey] = {**edge, "fact_refs": refs}
        else:
            del edges[ekey]
            self.edge_delta -= 1
        self.dirty.add(key)
