"""Vectors a passport carries (``soulpass export --vectors``), so an import embeds nothing again.

A seed is keyed by what was embedded, not by record id: for each embedded text (a record's own
text and its passages, ``soulpass.index.recipe.embed_text``/``embed_passages``), its SHA-256 and
its vector, with the embedder and recipe (``key``) they came from. An import writes the seed beside
the new account's index (``<index>/seed-<model>.npz``); the embedding backlog looks each text up
there before it asks the embedder (``EmbedBacklog.drain``), so only texts the seed lacks are
embedded. The seed is derived data: dropping the index (a forget does) deletes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulpass.index.backlog import indexing_embed, text_hash
from soulpass.index.catalog import Catalog
from soulpass.index.passages import passage_id
from soulpass.index.recipe import EMBED_RECIPE, SEARCHABLE_KINDS, embed_passages, embed_text
from soulpass.index.seed_file import Seed

if TYPE_CHECKING:
    from soulpass.index.account import AccountIndex

__all__ = ["collect"]


def collect(index: AccountIndex) -> tuple[str, Seed] | None:
    """The account's vectors as a seed (everything embedded first), or None when the account has
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
    return f"{embedder.model_id}|{EMBED_RECIPE}", {wanted[vid]: vec for vid, vec in found.items()}
