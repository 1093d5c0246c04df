"""Hybrid search over one account: full text and dense vectors fused by reciprocal rank.

The catalog decides what exists and what passes the filters (kind, agent, tags, time, session,
persona, event, "as of version"); the vector index only ranks. Both are derived from the files and
follow the store through ``catch_up``; vectors are keyed by record id and re-embedded only when
the text changed (the embedder's ``model_id`` is recorded, so vectors are never mixed).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from soulpass.embed.base import Embedder
from soulpass.errors import InvalidInput
from soulpass.index.catalog import Catalog, CatalogRow, CatchUpReport, Filters
from soulpass.index.catalog.sync import Progress
from soulpass.index.vectors import Backend, VectorIndex, open_vector_index
from soulpass.store.account import AccountStore

__all__ = ["SEARCHABLE_KINDS", "AccountIndex", "Hit", "IndexStatus"]

SEARCHABLE_KINDS = ("episode", "turn_user", "turn_llm", "fact", "sensory")
RRF_K = 60  # the usual constant of reciprocal rank fusion
# Weighted RRF: on long conversations MiniLM alone finds far less than BM25 (LoCoMo turn R@10 ~0.3-0.4
# vs 0.62) and pulls good full-text hits down: R@10 0.50 with equal weights, 0.54 at 0.5, 0.60 at 0.3.
# Provisional: the fusion is the next thing to improve (full text alone still scores 0.62).
WEIGHTS = {"fts": 1.0, "dense": 0.3}
CANDIDATES = 50  # per retriever, before fusion
EMBED_BATCH = 256


@dataclass(frozen=True)
class Hit:
    """One search result: the catalog row, where it lives, and how it scored."""

    id: str
    kind: str
    version: int
    path: str
    text: str
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    row: CatalogRow | None = None


@dataclass(frozen=True)
class IndexStatus:
    store_version: int
    catalog_version: int
    rows: int
    in_force: dict[str, int]
    vectors: int
    embedder: str | None
    pending_embeddings: int


class AccountIndex:
    """The derived index of one account under ``<account>/index/``."""

    def __init__(self, store: AccountStore, embedder: Embedder | None = None, *, backend: Backend = "hnsw") -> None:
        self.store = store
        self.catalog = Catalog.open(store)
        self.embedder = embedder
        self.vectors: VectorIndex | None = None
        self._state: sqlite3.Connection | None = None
        if embedder is not None:
            # One folder per backend and embedder: another model means other vectors, never mixed.
            tag = hashlib.sha256(embedder.model_id.encode("utf-8")).hexdigest()[:10]
            folder = store.path / "index" / "vectors" / f"{backend}-{tag}"
            self.vectors = open_vector_index(folder, model_id=embedder.model_id, dim=embedder.dim, backend=backend)
            self._state = _embedded_state(folder.with_name(folder.name + ".embedded.sqlite"), embedder.model_id)

    def close(self) -> None:
        self.catalog.close()
        if self.vectors is not None:
            self.vectors.close()
        if self._state is not None:
            self._state.close()

    # --- following the store -----------------------------------------------------------------

    def catch_up(self) -> CatchUpReport:
        """Bring the catalog up to HEAD, then embed what the new versions wrote."""
        report = self.catalog.catch_up(self.store)
        self._embed_new()
        return report

    def rebuild(self, progress: Progress | None = None) -> CatchUpReport:
        """Recreate the catalog from the files and re-embed what changed (``progress(done, total)``)."""
        report = self.catalog.rebuild(self.store, progress=progress)
        if self._state is not None:
            with self._state:
                self._state.execute("UPDATE embed_meta SET value = '0' WHERE key = 'version'")
        self._embed_new()
        return report

    def _embed_new(self) -> None:
        if self.vectors is None or self._state is None or self.embedder is None:
            return
        done = int(self._state.execute("SELECT value FROM embed_meta WHERE key = 'version'").fetchone()[0])
        target = self.catalog.status().store_version
        rows = [r for r in self.catalog.rows_since(done) if r.kind in SEARCHABLE_KINDS and r.text.strip()]
        latest: dict[str, CatalogRow] = {}
        for r in rows:
            latest[r.id] = r
        # Only the ids these versions touched: reading the whole table would grow with the history.
        known = dict(self._state.execute(
            "SELECT id, text_hash FROM embedded WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(latest)),)).fetchall()) if latest else {}
        todo = [(r.id, r.text) for r in latest.values() if known.get(r.id) != _text_hash(r.text)]
        for i in range(0, len(todo), EMBED_BATCH):
            chunk = todo[i:i + EMBED_BATCH]
            vectors = self.embedder.embed_batch([t for _, t in chunk])
            self.vectors.upsert([rid for rid, _ in chunk], vectors)
            with self._state:
                self._state.executemany("INSERT OR REPLACE INTO embedded (id, text_hash) VALUES (?, ?)",
                                        [(rid, _text_hash(t)) for rid, t in chunk])
        with self._state:
            self._state.execute("UPDATE embed_meta SET value = ? WHERE key = 'version'", (str(target),))

    def status(self) -> IndexStatus:
        cat = self.catalog.status()
        done = 0
        if self._state is not None:
            done = int(self._state.execute("SELECT value FROM embed_meta WHERE key = 'version'").fetchone()[0])
        pending = sum(1 for r in self.catalog.rows_since(done) if r.kind in SEARCHABLE_KINDS) if self._state else 0
        return IndexStatus(store_version=self.store.head(), catalog_version=cat.store_version, rows=cat.rows,
                           in_force=cat.in_force, vectors=self.vectors.count() if self.vectors else 0,
                           embedder=self.embedder.model_id if self.embedder else None, pending_embeddings=pending)

    # --- search --------------------------------------------------------------------------

    def search(self, query: str, k: int = 10, filters: Filters | None = None) -> list[Hit]:
        """The ``k`` best records for ``query``: BM25 and dense ranks fused (RRF)."""
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
        if type(k) is not int or k < 1:
            raise InvalidInput(f"k must be a positive integer, not {k!r}", field="k")
        filters = filters or Filters()
        if not filters.kinds:
            filters = Filters(**{**filters.__dict__, "kinds": SEARCHABLE_KINDS})
        depth = max(CANDIDATES, 2 * k)
        fts = self.catalog.fts_search(query, depth, filters)
        dense = self._dense(query, depth, filters)
        fused: dict[str, dict[str, float]] = {}
        for name, ranked in (("fts", fts), ("dense", dense)):
            for rank, (rid, score) in enumerate(ranked, 1):
                parts = fused.setdefault(rid, {})
                parts[name] = score
                parts[f"{name}_rank"] = rank
                parts["rrf"] = parts.get("rrf", 0.0) + WEIGHTS[name] / (RRF_K + rank)
        best = sorted(fused.items(), key=lambda kv: (-kv[1]["rrf"], kv[0]))[:k]
        rows = {r.id: r for r in self.catalog.get([rid for rid, _ in best], as_of_version=filters.as_of_version)}
        return [Hit(id=rid, kind=rows[rid].kind, version=rows[rid].version, path=rows[rid].path,
                    text=rows[rid].text, score=parts["rrf"], parts=parts, row=rows[rid])
                for rid, parts in best if rid in rows]

    def _dense(self, query: str, depth: int, filters: Filters) -> list[tuple[str, float]]:
        if self.vectors is None or self.embedder is None or not query.strip():
            return []
        vector = self.embedder.embed_batch([query])[0]
        allowed = self.catalog.ids_matching(filters)  # only what exists (as of V) and passes
        if not allowed:
            return []
        return self.vectors.search(vector, depth, allowed=allowed)


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _embedded_state(path: Path, model_id: str) -> sqlite3.Connection:
    """Which record texts are embedded (by text hash), for which model, up to which version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS embed_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS embedded (id TEXT PRIMARY KEY, text_hash TEXT NOT NULL)")
        conn.execute("INSERT OR IGNORE INTO embed_meta VALUES ('version', '0'), ('model_id', ?)", (model_id,))
        stored = conn.execute("SELECT value FROM embed_meta WHERE key = 'model_id'").fetchone()[0]
        if stored != model_id:  # another model: its vectors are useless, start over
            conn.execute("DELETE FROM embedded")
            conn.execute("UPDATE embed_meta SET value = '0' WHERE key = 'version'")
            conn.execute("UPDATE embed_meta SET value = ? WHERE key = 'model_id'", (model_id,))
    return conn

