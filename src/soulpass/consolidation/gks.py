"""The Genesis Knowledge System graph, sharded so a commit touches only what its facts touch.

A node's id is a hash of its normalised label; a node and the edges leaving it live in shard
``<first two hex digits of the id>``. Each shard is a document of its own (history kept).
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
    return nid[2:4]


@dataclass
class GKSWorkingSet:
    """Shards loaded on demand and edited in memory by the planner (no I/O of its own)."""

    read_shard: Callable[[str], dict[str, Any] | None]
    shards: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    node_delta: int = 0
    edge_delta: int = 0

    def shard(self, key: str) -> dict[str, Any]:
        if key not in self.shards:
            raw = self.read_shard(gks_shard_path(key))
            raw = raw or {}
            self.shards[key] = {"nodes": dict(raw.get("nodes", {})), "edges": dict(raw.get("edges", {}))}
        return self.shards[key]

    @staticmethod
    def edge_key(source: str, predicate: str, target: str) -> str:
        return f"{source}|{normalize_text(predicate)}|{target}"

    def edges_from(self, subject: str) -> list[dict[str, Any]]:
        nid = node_id(subject)
        return [e for e in self.shard(shard_of(nid))["edges"].values() if e["source"] == nid]

    def add_fact(self, fact_id: str, subject: str, predicate: str, obj: str) -> None:
        s, o = node_id(subject), node_id(obj)
        for nid, label in ((s, subject), (o, obj)):
            sh = self.shard(shard_of(nid))
            node = sh["nodes"].get(nid)
            if node is None:
                node = {"id": nid, "label": label, "fact_refs": []}
                self.node_delta += 1
            node = {**node, "fact_refs": sorted({*node["fact_refs"], fact_id})}
            sh["nodes"][nid] = node
            self.dirty.add(shard_of(nid))
        sh = self.shard(shard_of(s))
        key = self.edge_key(s, predicate, o)
        edge = sh["edges"].get(key)
        if edge is None:
            edge = {"source": s, "target": o, "predicate": normalize_text(predicate), "fact_refs": []}
            self.edge_delta += 1
        sh["edges"][key] = {**edge, "fact_refs": sorted({*edge["fact_refs"], fact_id})}
        self.dirty.add(shard_of(s))

    def remove_fact(self, fact_id: str, subject: str, predicate: str, obj: str) -> None:
        """Take a superseded fact out of the current graph (its file and history stay)."""
        s, o = node_id(subject), node_id(obj)
        sh = self.shard(shard_of(s))
        key = self.edge_key(s, predicate, o)
        edge = sh["edges"].get(key)
        if edge is not None:
            refs = [r for r in edge["fact_refs"] if r != fact_id]
            if refs:
                sh["edges"][key] = {**edge, "fact_refs": refs}
            else:
                del sh["edges"][key]
                self.edge_delta -= 1
            self.dirty.add(shard_of(s))
        for nid in (s, o):
            nsh = self.shard(shard_of(nid))
            node = nsh["nodes"].get(nid)
            if node is None:
                continue
            refs = [r for r in node["fact_refs"] if r != fact_id]
            if refs:
                nsh["nodes"][nid] = {**node, "fact_refs": refs}
            else:
                del nsh["nodes"][nid]
                self.node_delta -= 1
            self.dirty.add(shard_of(nid))
