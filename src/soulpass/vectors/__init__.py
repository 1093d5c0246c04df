"""The vector store: record ids -> unit vectors in a folder, nearest search by cosine. One
``VectorIndex`` protocol, one module per backend; the optional abilities are Protocols of their own
(``abilities.py``). It knows nothing of accounts, records or catalogs: ``soulpass.index`` consumes it
through those Protocols (docs/adr/0008-the-index-seam.md).

* ``hnsw``   (default) exact numpy search while small, above ``ann_threshold`` rows a usearch HNSW
             graph (over sign bits from 256-d on) whose candidates are re-scored exactly
* ``exact``  numpy brute force over memory-mapped float32 rows (recall 1.0, no build)
* ``chroma`` a real ChromaDB ``PersistentClient`` fed our embeddings

Every index lives in a folder the caller names and records the embedder (``model_id``, ``dim``)
that filled it; opening it for another embedder raises ``ConfigError``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from soulpass.vectors.base import SAVE_MIN_ROWS, IndexMeta, VectorIndex
from soulpass.vectors.exact import ExactIndex
from soulpass.vectors.hnsw import HnswIndex
from soulpass.vectors.shared import LocalVectorIndex, SharedIndex, open_shared

if TYPE_CHECKING:  # loaded when first asked for: most processes never use ChromaDB
    from soulpass.vectors.chroma import ChromaIndex

__all__ = [
    "SAVE_MIN_ROWS",
    "ChromaIndex",
    "ExactIndex",
    "HnswIndex",
    "IndexMeta",
    "SharedIndex",
    "VectorBackend",
    "VectorIndex",
    "model_tag",
    "open_vector_index",
]

VectorBackend = Literal["hnsw", "exact", "chroma"]


def model_tag(model_id: str) -> str:
    """A short, stable name for an embedder's vectors (the end of their folder's name)."""
    return hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:10]


def open_vector_index(folder: str | Path, *, model_id: str, dim: int, backend: VectorBackend = "hnsw") -> SharedIndex:
    """Open (or create) the vector index of ``backend`` in ``folder`` for embedder ``model_id``.

    Handles opened in one process on one folder share one open index (``shared.py``); when another
    process writes the folder, a local index is opened as a reader (``rows.py``)."""
    return open_shared(folder, IndexMeta(backend=backend, model_id=model_id, dim=dim),
                       lambda path: _open_backend(path, model_id=model_id, dim=dim, backend=backend))


def _open_backend(folder: Path, *, model_id: str, dim: int, backend: VectorBackend) -> LocalVectorIndex:
    match backend:
        case "hnsw":
            return HnswIndex(folder, model_id=model_id, dim=dim)
        case "exact":
            return ExactIndex(folder, model_id=model_id, dim=dim)
        case "chroma":
            from soulpass.vectors.chroma import ChromaIndex

            return ChromaIndex(folder, model_id=model_id, dim=dim)


def __getattr__(name: str) -> Any:
    if name == "ChromaIndex":
        from soulpass.vectors.chroma import ChromaIndex

        return ChromaIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
