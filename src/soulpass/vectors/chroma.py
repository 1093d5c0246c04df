"""ChromaDB backend: a real ``chromadb.PersistentClient`` fed our own embeddings.

Chroma never embeds anything here (the collection has no embedding function; vectors are passed
explicitly), its space is cosine, and our record ids are Chroma's ids. ``meta.json`` beside the
Chroma folder records the embedder, as for every backend.

Layout of the folder: ``meta.json`` and ``chroma/`` (Chroma's own files; Chroma makes its writes
durable itself).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.vectors.base import IndexMeta, check_ids, open_meta, unit_query, unit_rows

__all__ = ["ChromaIndex"]

BACKEND = "chroma"
COLLECTION = "soulpass"


def _import_chromadb() -> Any:
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BackendUnavailable(
            "the ChromaDB backend needs chromadb: pip install 'soulpass[chroma]'", package="chromadb"
        ) from exc
    return chromadb, Settings


class ChromaIndex:
    """A ``VectorIndex`` kept in ChromaDB (HNSW, cosine space) under ``folder/chroma``."""

    def __init__(self, folder: str | Path, *, model_id: str, dim: int) -> None:
        self.folder = Path(folder)
        self._meta = open_meta(self.folder, IndexMeta(backend=BACKEND, model_id=model_id, dim=dim))
        chromadb, settings = _import_chromadb()
        self._client = chromadb.PersistentClient(
            path=str(self.folder / "chroma"), settings=settings(anonymized_telemetry=False)
        )
        self._collection = self._client.get_or_create_collection(
            COLLECTION,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"model_id": model_id, "dim": dim},
            embedding_function=None,
        )
        self._batch = int(self._client.get_max_batch_size())

    @property
    def meta(self) -> IndexMeta:
        return self._meta

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        id_list = check_ids(ids)
        rows = unit_rows(vectors, len(id_list), self._meta.dim)
        for start in range(0, len(id_list), self._batch):
            stop = start + self._batch
            self._collection.upsert(ids=id_list[start:stop], embeddings=rows[start:stop])

    def delete(self, ids: Sequence[str]) -> None:
        id_list = check_ids(ids)
        for start in range(0, len(id_list), self._batch):
            self._collection.delete(ids=id_list[start:start + self._batch])

    def search(self, vector: npt.ArrayLike, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        if k <= 0:
            raise InvalidInput(f"k must be positive, got {k}", k=k)
        query = unit_query(vector, self._meta.dim)
        id_filter: list[str] | None = None
        if allowed is not None:
            id_filter = self._present(allowed)  # Chroma fails on ids it does not hold
            if not id_filter:
                return []
        # Chroma caps n_results at what it holds by itself; asking it for count() first would cost a round trip
        n = k if id_filter is None else min(k, len(id_filter))
        result = self._collection.query(
            query_embeddings=[query], n_results=n, ids=id_filter, include=["distances"]
        )
        found_ids: list[str] = result["ids"][0]
        distances: list[float] = (result["distances"] or [[]])[0]
        return [(i, 1.0 - float(d)) for i, d in zip(found_ids, distances, strict=True)]

    def cosine_array(self, vector: npt.ArrayLike, ids: Sequence[str]) -> npt.NDArray[np.float32]:
        """The exact cosine of each of ``ids`` in their order (the stored unit vectors read back),
        -2 for an id Chroma does not hold (``ids`` are distinct)."""
        query = unit_query(vector, self._meta.dim)
        out = np.full(len(ids), -2.0, dtype=np.float32)
        at = {rid: n for n, rid in enumerate(ids)}
        for start in range(0, len(ids), self._batch):
            got = self._collection.get(ids=list(ids[start:start + self._batch]), include=["embeddings"])
            if got["ids"]:
                rows = np.asarray(got["embeddings"], dtype=np.float32)
                out[[at[rid] for rid in got["ids"]]] = rows @ query
        return out

    def count(self) -> int:
        return int(self._collection.count())

    def close(self) -> None:
        """Nothing to do: Chroma persists every write before returning."""

    def _present(self, allowed: Collection[str]) -> list[str]:
        wanted = [i for i in allowed if isinstance(i, str)]
        present: list[str] = []
        for start in range(0, len(wanted), self._batch):
            got = self._collection.get(ids=wanted[start:start + self._batch], include=[])
            present.extend(got["ids"])
        return present
