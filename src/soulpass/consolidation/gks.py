"""The Genesis Knowledge System graph, sharded so a commit touches only what its facts touch.

Only edges are stored, each with its endpoints' labels; nodes are derived. Placement is chosen so
that no shard grows with the size of the master, not even for a hub node such as "User":

- an edge lives in ``shards/<xxx>.json`` by the hash of its (subject, object) pair — everything
  a duplicate or an opposite-polarity fact ("likes"/"dislikes" coffee) must be compared with;
- facts whose predicate is *functional* (one object at a time: "lives in") are also listed in
  ``functional/<xxx>.json`` by the hash of (subject, predicate base), which holds only the
  current few, so "lives in Paris" finds "lives in Bangkok" without scanning the subject.

4096 shards of each. Each shard is a document (history kept).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from soulpass.records import EPOCH, GKSEdge, GKSGraph, GKSNode, normalize_text
from soulpass.store.contract import Snapshot
from soulpass.store.keys import GKS_DATA, GKS_FUNCTIONAL, GKS_SHARDS, gks_shard_path

__all__ = ["GKSWorkingSet", "assemble_graph", "fact_documents", "node_id"]


def assemble_graph(snap: Snapshot) -> GKSGraph:
    """The whole knowledge graph of a snapshot, assembled from its shards (nodes derived from edges)."""
    nodes: dict[str, GKSNode] = {}
    edges: list[GKSEdge] = []
    for rel in snap.keys(GKS_SHARDS):
        shard = snap.document(rel) or {}
        for e in shard.get("edges", {}).values():
            edges.append(GKSEdge.model_validate(e))
            for nid, label in ((e["source"], e["source_label"]), (e["target"], e["target_label"])):
                node = nodes.get(nid) or GKSNode(id=nid, label=label)
                nodes[nid] = node.model_copy(update={"fact_refs": (*node.fact_refs, *e["fact_refs"])})
    totals = snap.document(GKS_DATA) or {}
    return GKSGraph(nodes=tuple(nodes.values()), edges=tuple(sorted(edges, key=lambda e: e.fact_refs)),
                    version=int(totals.get("version", 0)), updated_at=totals.get("updated_at", EPOCH))


def node_id(label: str) -> str:
    return "N_" + hashlib.sha256(normalize_text(label).encode("utf-8")).hexdigest()[:16]


def _shard(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:3]


@dataclass
class GKSWorkingSet:
    """Shards loaded on demand and edited in memory by the planner (no I/O of its own)."""

    read_doc: Callable[[str], Mapping[str, Any] | None]
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    existed: set[str] = field(default_factory=set)
    edge_delta: int = 0

    def _doc(self, relpath: str, key: str) -> dict[str, Any]:
        if relpath not in self.docs:
            raw = self.read_doc(relpath)
            if raw is not None:
                self.existed.add(relpath)
            self.docs[relpath] = {key: dict((raw or {}).get(key, {}))}
        return self.docs[relpath][key]  # type: ignore[no-any-return]

    def _edges(self, s: str, o: str) -> tuple[str, dict[str, Any]]:
        path = gks_shard_path(_shard(s, o))
        return path, self._doc(path, "edges")

    def _functional(self, s: str, base: str) -> tuple[str, dict[str, Any]]:
        path = f"{GKS_FUNCTIONAL}/{_shard(s, base)}.json"
        return path, self._doc(path, "entries")

    @staticmethod
    def edge_key(source: str, predicate: str, target: str) -> str:
        return f"{source}|{normalize_text(predicate)}|{target}"

    def edges_between(self, subject: str, obj: str) -> list[dict[str, Any]]:
        s, o = node_id(subject), node_id(obj)
        _, edges = self._edges(s, o)
        return [e for e in edges.values() if e["source"] == s and e["target"] == o]

    def functional(self, subject: str, base: str) -> list[dict[str, Any]]:
        """Current facts of a functional predicate base: ``[{"fact", "object"}]``."""
        _, entries = self._functional(node_id(subject), base)
        return list(entries.get(f"{node_id(subject)}|{base}", []))

    def add_fact(self, fact_id: str, subject: str, predicate: str, obj: str, functional_base: str | None) -> None:
        s, o = node_id(subject), node_id(obj)
        path, edges = self._edges(s, o)
        ekey = self.edge_key(s, predicate, o)
        edge = edges.get(ekey)
        if edge is None:
            edge = {"source": s, "source_label": subject, "predicate": normalize_text(predicate),
                    "target": o, "target_label": obj, "fact_refs": []}
            self.edge_delta += 1
        edges[ekey] = {**edge, "fact_refs": sorted({*edge["fact_refs"], fact_id})}
        self.dirty.add(path)
        if functional_base is not None:
            fpath, entries = self._functional(s, functional_base)
            key = f"{s}|{functional_base}"
            entries[key] = [*entries.get(key, []), {"fact": fact_id, "object": obj}]
            self.dirty.add(fpath)

    def remove_fact(self, fact_id: str, subject: str, predicate: str, obj: str, functional_base: str | None) -> None:
        """Take a superseded fact out of the current graph (its file and history stay)."""
        s, o = node_id(subject), node_id(obj)
        path, edges = self._edges(s, o)
        ekey = self.edge_key(s, predicate, o)
        edge = edges.get(ekey)
        if edge is not None:
            refs = [r for r in edge["fact_refs"] if r != fact_id]
            if refs:
                edges[ekey] = {**edge, "fact_refs": refs}
            else:
                del edges[ekey]
                self.edge_delta -= 1
            self.dirty.add(path)
        if functional_base is not None:
            fpath, entries = self._functional(s, functional_base)
            key = f"{s}|{functional_base}"
            kept = [e for e in entries.get(key, []) if e["fact"] != fact_id]
            if kept:
                entries[key] = kept
            else:
                entries.pop(key, None)
            self.dirty.add(fpath)

    def documents(self, version: int) -> dict[str, dict[str, Any]]:
        """The dirty shards as documents to write."""
        out = {}
        for path in sorted(self.dirty):
            kind = "gks_functional" if path.startswith(GKS_FUNCTIONAL) else "gks_shard"
            out[path] = {"kind": kind, "version": version, **self.docs[path]}
        return out


def fact_documents(subject: str, obj: str, functional_base: str | None) -> list[str]:
    """The keys of the shards that can list a fact (``subject``, ``obj``): what forgetting it rewrites."""
    s = node_id(subject)
    keys = [gks_shard_path(_shard(s, node_id(obj)))]
    return keys + ([f"{GKS_FUNCTIONAL}/{_shard(s, functional_base)}.json"] if functional_base is not None else [])
