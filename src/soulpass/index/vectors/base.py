"""The ``VectorIndex`` contract and what every backend shares: the folder's ``meta.json``, input checks.

A vector index is derived data: it maps record ids to unit vectors made by one embedder and answers
"which ids are nearest to this vector" by cosine similarity. The folder it lives in records the
``model_id`` and ``dim`` it was built with; opening it with another model is refused, so vectors
from two embedders are never mixed (a new model means a re-embed into a fresh folder).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from soulpass.errors import ConfigError, Corrupted, InvalidInput
from soulpass.store.fsio import atomic_write, dump_json, load_json

__all__ = [
    "FORMAT",
    "IndexMeta",
    "Matrix",
    "VectorIndex",
    "as_id_set",
    "one_blas_thread",
    "check_ids",
    "huge_copy",
    "huge_pages_on_request",
    "populate",
    "open_meta",
    "unit_query",
    "unit_rows",
]

FORMAT = 1
META_FILE = "meta.json"
MADV_POPULATE_READ = 22  # Linux 5.14 on

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


_BLAS: list[Any] = []  # [threadpoolctl controller or None], made on first use


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS on one thread (restored after), where threadpoolctl is installed.

    Why: a single query's matrix-vector product is memory-bound; on a 2-core machine with another
    busy process, OpenBLAS's second thread waits for a core and turns a 0.15 ms product over 2k
    rows into a p95 of ~17 ms (measured; at 20k rows 1.3 ms on one thread vs 8 ms on two)."""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:  # pragma: no cover - depends on the install
            _BLAS.append(None)
        else:
            _BLAS.append(ThreadpoolController())
    if _BLAS[0] is None:
        yield
        return
    with _BLAS[0].limit(limits=1, user_api="blas"):
        yield


def populate(array: npt.NDArray[Any] | None = None, path: Path | None = None) -> bool:
    """Fault every page of a read-only file mapping into this process's page tables now: ``array``'s
    (a memory-mapped array) or every mapping of the file ``path`` (one a library mapped, found in
    /proc/self/maps), with Linux's ``MADV_POPULATE_READ``, so that searches do not fault their rows
    in one by one. Measured at 1M rows (1.5 GB of vectors, a 196 MB graph), the first 100 searches of a
    process: p50 / p95 2.06 / 13.8 -> 0.92 / 1.31 ms, for ~0.15 s once. False (nothing done) off Linux, on a kernel
    without it, or for a mapping larger than half the memory."""
    if sys.platform != "linux":
        return False
    ranges = []
    if array is not None and array.nbytes:
        ranges.append((array.ctypes.data, array.ctypes.data + array.nbytes))
    if path is not None:
        with contextlib.suppress(OSError):
            name = os.path.realpath(path)  # as the kernel names the file
            for line in Path("/proc/self/maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5] == name:
                    first, last = fields[0].split("-")
                    ranges.append((int(first, 16), int(last, 16)))
    try:
        half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return False
    if not ranges or sum(high - low for low, high in ranges) > half:
        return False
    import ctypes

    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = True
    for low, high in ranges:
        start = low - low % mmap.PAGESIZE
        done = madvise(start, high - start, MADV_POPULATE_READ) == 0 and done  # EINVAL before Linux 5.14
    return done


HUGE_COPY_BYTES = 64 << 20  # a saved graph from this size on is searched from a copy in huge pages
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_on_request() -> bool:
    """Whether this system backs memory advised ``MADV_HUGEPAGE`` with 2 MB pages (Linux, THP not "never")."""
    if sys.platform != "linux" or not hasattr(mmap, "MADV_HUGEPAGE"):
        return False
    try:
        return any(f"[{mode}]" in THP_SETTING.read_text() for mode in ("always", "madvise"))
    except OSError:
        return False


def huge_copy(path: Path) -> mmap.mmap | None:
    """The bytes of file ``path`` in anonymous memory backed by 2 MB pages (Linux transparent huge
    pages), for a read-only library to map instead of the file; None (nothing done) off Linux, where
    the kernel gives no huge pages on request, for a file under ``HUGE_COPY_BYTES`` or over a quarter
    of the free memory, or when the file cannot be read whole.

    A graph walk is a chain of reads at random places: through 4 kB pages nearly each one misses the
    TLB as well as the cache. Measured on a 1M-row sign-bit graph (244 MB, ``benchmarks/graph_pages.py``):
    p50 / p95 of the walk 2.05 / 3.39 -> 1.32 / 2.27 ms; the copy costs ~0.1 s once (the file's pages
    were populated anyway)."""
    if not huge_pages_on_request():
        return None
    try:
        size = path.stat().st_size
        if size < HUGE_COPY_BYTES or size > os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") // 4:
            return None
        buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return None
    buffer.madvise(mmap.MADV_HUGEPAGE)
    with contextlib.suppress(OSError):  # every page at once (Linux 5.14+): ~3x faster than faulting them in
        buffer.madvise(getattr(mmap, "MADV_POPULATE_WRITE", 23))
    view, done = memoryview(buffer), 0
    try:
        with open(path, "rb") as f:
            while done < size and (n := f.readinto(view[done:])):
                done += n
    except OSError:
        done = -1
    finally:
        view.release()
    if done != size:  # replaced or cut short meanwhile: the caller maps the file as before
        buffer.close()
        return None
    return buffer
