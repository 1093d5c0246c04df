"""An account's vectors for a passport to carry (``soulpass export --vectors``), so an import embeds
nothing again.

They are keyed by what was embedded, not by record id: for each embedded text (a record's own text
and its passages, ``soulpass.index.recipe.embed_text``/``embed_passages``), its SHA-256 and its
vector, with the embedder and recipe (``key``) they came from (the file: ``soulpass.index.carried``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulpass.index.backlog import indexing_embed, text_hash
from soulpass.index.carried import CarriedVectors, embedding_key
from soulpass.index.catalog import Catalog
from soulpass.index.passages import passage_id
from soulpass.index.recipe import SEARCHABLE_KINDS, embed_passages, embed_text

if TYPE_CHECKING:
    from soulpass.index.account import AccountIndex

__all__ = ["collect"]


def collect(index: AccountIndex) -> tuple[str, CarriedVectors] | None:
    """The account's vectors to carry (everything embedded first), or None when the account has
    no embedder or its vectors are not in our own index (ChromaDB keeps them)."""
    vectors, embedder, catalog = index.stored_vectors, index.embedder, index.catalog
    if vectors is None or embedder is None or not isinstance(catalog, Catalog):
        return None
    if index.backlog is not None:
        index.backlog.enqueue()
        index.backlog.drain_all(indexing_embed(embedder))
    latest = {row.id: row for row in catalog.rows() if row.kind in SEARCHABLE_KINDS and row.text.strip()}
    wanted: dict[str, str] = {}  # vector id -> text hash
    for rid, row in latest.items():
        wanted[rid] = text_hash(embed_text(row))
        wanted.update({passage_id(rid, n): text_hash(p) for n, p in enumerate(embed_passages(row))})
    found = vectors.vectors_of(list(wanted))
    return embedding_key(embedder.model_id), {wanted[vid]: vec for vid, vec in found.items()}
