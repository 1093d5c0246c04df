"""Searching rows that are not in the catalog yet: a sandbox's buffer, read by its own searches.

The catalog's filters (``query.passes``), full text (the same FTS5 tokenizer, the buffer's own statistics), session
neighbours and cosines (each text embedded once, kept per open index), for a handful of rows in memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from soulpass.embed.base import Embedder
from soulpass.ids import EPOCH
from soulpass.index.backlog import text_hash
from soulpass.index.catalog import CatalogRow
from soulpass.index.catalog.query import fts_query
from soulpass.index.catalog.schema import TOKENIZER
from soulpass.index.recipe import embed_passages, embed_text
from soulpass.vectors.base import unit_query

__all__ = ["BufferVectors", "buffer_fts", "buffer_links"]

EMBED_BATCH = 256
BUFFER_VECTORS_KEPT = 20_000  # buffer texts embedded for sandbox searches, kept per open index


def buffer_fts(query: str, rows: Sequence[CatalogRow]) -> dict[str, float]:
    """BM25 of rows that are not in the catalog, from a throw-away in-memory FTS5 table with the
    catalog's tokenizer (statistics of the buffer alone: scores are standardised before fusion)."""
    match = fts_query(query)
    if match is None:
        return {}
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5 (text, agent, rid UNINDEXED, tokenize = '{TOKENIZER}')")
        conn.executemany("INSERT INTO t (text, agent, rid) VALUES (?, ?, ?)",
                         [(r.text, r.agent or "", r.id) for r in rows])
        return {rid: -score for rid, score in conn.execute("SELECT rid, bm25(t) FROM t WHERE t MATCH ?", (match,))}
    finally:
        conn.close()


def buffer_links(turns: Sequence[CatalogRow]) -> dict[str, tuple[str | None, str | None]]:
    """Neighbours among a buffer's turns: by session, then event time and id, like the catalog's."""
    ordered = sorted(turns, key=lambda r: (r.session_id or "", r.event_time or EPOCH, r.id))
    links: dict[str, tuple[str | None, str | None]] = {}
    for i, row in enumerate(ordered):
        before = ordered[i - 1] if i > 0 and ordered[i - 1].session_id == row.session_id else None
        after = ordered[i + 1] if i + 1 < len(ordered) and ordered[i + 1].session_id == row.session_id else None
        links[row.id] = (before.id if before else None, after.id if after else None)
    return links


class BufferVectors:
    """Cosines of rows not in the vector index, passages included; each text is embedded once and
    kept (the ``BUFFER_VECTORS_KEPT`` latest), since a sandbox searches the same buffer turn after turn."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._kept: dict[str, npt.NDArray[np.float32]] = {}  # text hash -> unit vector

    def cosines(self, vector: Any, rows: Sequence[CatalogRow]) -> dict[str, float]:
        """Each row's best cosine to ``vector`` over its own text's and its passages' vectors."""
        dim = self._embedder.dim
        texts = {r.id: [embed_text(r), *embed_passages(r)] for r in rows}
        todo = list(dict.fromkeys(t for ts in texts.values() for t in ts if text_hash(t) not in self._kept))
        for i in range(0, len(todo), EMBED_BATCH):
            chunk = todo[i:i + EMBED_BATCH]
            for text, vec in zip(chunk, self._embedder.embed_batch(chunk), strict=True):
                self._kept[text_hash(text)] = unit_query(vec, dim)
        query = unit_query(vector, dim)
        out = {rid: max(float(np.dot(self._kept[text_hash(t)], query)) for t in ts) for rid, ts in texts.items()}
        while len(self._kept) > BUFFER_VECTORS_KEPT:
            self._kept.pop(next(iter(self._kept)))
        return out
