"""An optional tantivy index beside the catalog: the same rows' text, for top-k BM25 in milliseconds.

FTS5 scores every row that matches any query term, so an OR query over common words costs
hundreds of milliseconds at 1M rows; tantivy skips rows that cannot reach the top k (block-max
WAND). The sidecar holds only ``(row, text, agent)``: the catalog stays the truth, filters are
checked there, and the sidecar is rebuilt from it whenever in doubt. Catalog rows are only ever
appended (a rebuild starts a new generation, and with it a new sidecar folder), so "synced" is
one number: the highest row id indexed.
"""

from __future__ import annotations

import importlib
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["TantivySidecar", "tantivy_module"]

_BATCH = 50_000
_TOKENIZER = "soulpass_en"


def tantivy_module() -> Any | None:
    """The ``tantivy`` module, or None when it is not installed (the catalog then uses FTS5 only)."""
    try:
        return importlib.import_module("tantivy")
    except ImportError:
        return None


class TantivySidecar:
    """The tantivy index of one catalog generation: ``<catalog>.fulltext-<generation>/`` beside it."""

    def __init__(self, tantivy: Any, catalog_file: Path, generation: int) -> None:
        self._t = tantivy
        self.folder = catalog_file.with_name(f"{catalog_file.stem}.fulltext-{generation}")
        # Older generations belong to a catalog that was rebuilt since: nothing reads them.
        for old in catalog_file.parent.glob(f"{catalog_file.stem}.fulltext-*"):
            if old != self.folder:
                shutil.rmtree(old, ignore_errors=True)
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", tokenizer_name=_TOKENIZER)
        builder.add_text_field("agent", tokenizer_name=_TOKENIZER)
        builder.add_integer_field("row", indexed=True, fast=True)
        self.schema = builder.build()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.index = tantivy.Index(self.schema, path=str(self.folder), reuse=True)
        except ValueError:  # unreadable or another schema: it is derived, so start it again
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            self.index = tantivy.Index(self.schema, path=str(self.folder), reuse=True)
        # FTS5's tokenizer, as near as tantivy has it: letters and digits, lower case, accents
        # folded, English stems. Tokenizers are not stored in the index: register on every open.
        analyzer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(40))
                    .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.ascii_fold())
                    .filter(tantivy.Filter.stemmer("english")).build())
        self.index.register_tokenizer(_TOKENIZER, analyzer)

    def indexed_upto(self, newest: int | None = None) -> int:
        """The highest catalog row id in the index (0 when empty). ``newest``: the catalog's highest
        row with text; when the index holds it, that is the answer, found by one term lookup (rows
        go in in order and each commit keeps a prefix: holding the newest, it holds them all).
        Otherwise every document's row is read (~10 ms at 1M rows)."""
        self.index.reload()
        searcher = self.index.searcher()
        if newest is not None:
            query = self._t.Query.term_query(self.schema, "row", newest, index_option="basic")
            if searcher.search(query, 1, count=False).hits:
                return newest
        hits = searcher.search(self._t.Query.all_query(), 1, order_by_field="row").hits
        return int(hits[0][0]) if hits else 0

    def sync(self, conn: sqlite3.Connection) -> bool:
        """Add the catalog rows newer than the index; False when another writer holds the index."""
        upto = self.indexed_upto()
        try:
            writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        except ValueError:  # LockBusy: another process is syncing this very index
            return False
        rows = conn.execute("SELECT row, text, agent FROM catalog WHERE row > ? AND text != '' ORDER BY row", (upto,))
        for added, (row, text, agent) in enumerate(rows, 1):
            writer.add_document(self._t.Document(row=row, text=text, agent=agent or ""))
            if added % _BATCH == 0:
                writer.commit()  # each commit is atomic and rows are in order: a crash loses no place
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        return True

    def search(self, terms: Sequence[str], limit: int, rows: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """``(row, score)`` of the best ``limit`` rows for the OR of ``terms``, optionally only
        among ``rows``; scores are tantivy's BM25 (higher is better)."""
        t = self._t
        text = self.index.parse_query(" ".join(terms), ["text", "agent"])
        query = text if rows is None else t.Query.boolean_query([
            (t.Occur.Must, text),
            (t.Occur.Must, t.Query.const_score_query(t.Query.term_set_query(self.schema, "row", list(rows)), 0.0))])
        searcher = self.index.searcher()
        hits = searcher.search(query, limit, count=False).hits
        if not hits:
            return []
        row_ids = searcher.fast_field_values("row", [addr for _, addr in hits])
        return [(int(r), float(score)) for (score, _), r in zip(hits, row_ids, strict=True)]
