"""The ``VectorIndex`` contract and what every backend shares: the folder's ``meta.json``, input checks.

A vector index is derived data: it maps record ids to unit vectors made by one embedder and answers
"which ids are nearest to this vector" by cosine similarity. The folder it lives in records the
``model_id`` and ``dim`` it was built with; opening it with another model is refused, so vectors
from two embedders are never mixed (a new model means a re-embed into a fresh folder).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from soulpass.errors import ConfigError, Corrupted, InvalidInput
from soulpass.store.fsio import atomic_write, dump_json, load_json

__all__ = [
    "FORMAT",
    "SAVE_MIN_ROWS",
    "IndexMeta",
    "Matrix",
    "VectorIndex",
    "as_id_set",
    "check_ids",
    "open_meta",
    "unit_query",
    "unit_rows",
]

FORMAT = 1
META_FILE = "meta.json"

# Derived state of fewer rows (the sign bits; the index's filter columns and row map read it too) is
# rebuilt in memory when needed, not written to disk: building it costs next to nothing. From this
# size on it is saved, and again each time its rows grow by a quarter.
SAVE_MIN_ROWS = 16_384

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class VectorIndex(Protocol):
    """Cosine-similarity search over vectors keyed by record id, persisted in one folder."""

    @property
    def meta(self) -> IndexMeta:
        """The backend, embedder ``model_id`` and ``dim`` this index was built with."""
        ...

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Store one vector per id (row ``i`` of ``vectors`` for ``ids[i]``), replacing any
        vector the id had. Durable when it returns. Raises ``InvalidInput`` on a shape, dim,
        zero-vector or duplicate-id problem; nothing is stored then."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Forget these ids; ids the index does not hold are ignored. Durable when it returns."""
        ...

    def search(self, vector: npt.ArrayLike, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` ids most similar to ``vector`` as ``(id, cosine similarity)``, best first.

        With ``allowed``, only ids in it are returned (ids it names that the index lacks are
        ignored), and the result is still the top ``k`` among those ids."""
        ...

    def count(self) -> int:
        """How many ids hold a vector."""
        ...

    def close(self) -> None:
        """Write what is cheap to keep for the next open and release the folder. Idempotent."""
        ...


@dataclass(frozen=True)
class IndexMeta:
    """What ``meta.json`` records: which backend and which embedder built the index."""

    backend: str
    model_id: str
    dim: int

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, "backend": self.backend, "model_id": self.model_id, "dim": self.dim}


def open_meta(folder: Path, wanted: IndexMeta) -> IndexMeta:
    """Create ``folder/meta.json`` for ``wanted``, or check that the one there matches it.

    A different ``model_id``, ``dim`` or backend raises ``ConfigError`` naming both sides."""
    if not wanted.model_id:
        raise ConfigError("model_id must be a non-empty string", path=str(folder))
    if isinstance(wanted.dim, bool) or not isinstance(wanted.dim, int) or wanted.dim <= 0:
        raise ConfigError(f"dim must be a positive integer, got {wanted.dim!r}", path=str(folder))
    path = folder / META_FILE
    if not path.exists():
        atomic_write(path, dump_json(wanted.to_json()))
        return wanted
    raw = load_json(path)
    try:
        found = IndexMeta(backend=str(raw["backend"]), model_id=str(raw["model_id"]), dim=int(raw["dim"]))
        fmt = int(raw["format"])
    except (KeyError, TypeError, ValueError) as exc:
        raise Corrupted(f"{path} lacks backend/model_id/dim/format: {exc}", path=str(path)) from exc
    if fmt != FORMAT:
        raise Corrupted(f"{path} has format {fmt}, this Soulpass reads format {FORMAT}", path=str(path))
    if found.model_id != wanted.model_id:
        raise ConfigError(
            f"vector index at {folder} was built with model {found.model_id!r}, not {wanted.model_id!r}: "
            "re-embed into a new index instead of mixing vectors",
            path=str(folder), model_id=found.model_id, wanted_model_id=wanted.model_id,
        )
    if found.dim != wanted.dim:
        raise ConfigError(
            f"vector index at {folder} holds {found.dim}-d vectors, not {wanted.dim}-d (model {found.model_id!r})",
            path=str(folder), dim=found.dim, wanted_dim=wanted.dim,
        )
    if found.backend != wanted.backend:
        raise ConfigError(
            f"vector index at {folder} is a {found.backend!r} index, not {wanted.backend!r}",
            path=str(folder), backend=found.backend, wanted_backend=wanted.backend,
        )
    return found


def check_ids(ids: Sequence[str]) -> list[str]:
    """``ids`` as a list of non-empty strings without repeats, else ``InvalidInput``."""
    if isinstance(ids, str):
        raise InvalidInput("ids must be a sequence of strings, not one string", ids=ids)
    out = list(ids)
    for i in out:
        if not isinstance(i, str) or not i:
            raise InvalidInput(f"every id must be a non-empty string, got {i!r}")
    if len(set(out)) != len(out):
        dupes = sorted({i for i in out if out.count(i) > 1})
        raise InvalidInput(f"ids repeat within one call: {dupes[:5]}", ids=dupes)
    return out


def unit_rows(vectors: npt.ArrayLike, n: int, dim: int) -> Matrix:
    """``vectors`` as an ``(n, dim)`` float32 matrix of unit rows; refuses bad shapes and zero rows."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1 and n == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise InvalidInput(f"expected {n} vectors of dim {dim}, got an array of shape {arr.shape}", dim=dim)
    if arr.shape[1] != dim:
        raise InvalidInput(f"vectors have dim {arr.shape[1]}, this index holds {dim}-d vectors", dim=dim,
                           got_dim=arr.shape[1])
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise InvalidInput("vectors must be finite and non-zero")
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def unit_query(vector: npt.ArrayLike, dim: int) -> npt.NDArray[np.float32]:
    """A query vector as a 1-d float32 unit vector of length ``dim``."""
    arr = np.asarray(vector, dtype=np.float32)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    row: npt.NDArray[np.float32] = unit_rows(arr, 1, dim)[0]
    return row


def as_id_set(allowed: Collection[str]) -> Collection[str]:
    """``allowed`` in a form with O(1) membership tests."""
    if isinstance(allowed, AbstractSet | Mapping):
        return allowed
    return set(allowed)
