"""The vectors a passport carries (``soulpass export --vectors``, made by
``soulpass.index.export_vectors``): text hash -> vector, with the embedder and recipe that made them;
no pickles. An import places them beside the new account's index (``place_carried``), where the
embedding backlog takes a text's vector from them before it asks the embedder. Derived data:
dropping the index deletes them."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from soulpass.errors import Corrupted
from soulpass.index.recipe import EMBED_RECIPE
from soulpass.store.contract import AccountBackend
from soulpass.store.fsio import atomic_write
from soulpass.vectors import model_tag

__all__ = ["CarriedVectors", "carried_bytes", "carried_name", "embedding_key", "load_carried", "place_carried"]

CarriedVectors = dict[str, npt.NDArray[np.float32]]  # text hash -> unit vector


def carried_name(model_id: str) -> str:
    """The carried vectors' file in the index folder, for embedder ``model_id``."""
    return f"carried-{model_tag(model_id)}.npz"


def embedding_key(model_id: str) -> str:
    """What made a vector: the embedder and the recipe of what it embeds (``soulpass.index.recipe``)."""
    return f"{model_id}|{EMBED_RECIPE}"


def place_carried(store: AccountBackend, model_id: str, data: bytes) -> None:
    """Write carried vectors (``carried_bytes``) beside ``store``'s index, for embedder ``model_id``."""
    folder = store.index_location().folder  # either location keeps carried vectors in its local folder
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / carried_name(model_id), data)


def carried_bytes(key: str, carried: CarriedVectors) -> bytes:
    """The vectors as an ``.npz`` file (no pickles: hashes as fixed-width bytes)."""
    out = io.BytesIO()
    hashes = np.array(sorted(carried), dtype="S64")
    matrix = np.stack([carried[h.decode()] for h in hashes]) if len(hashes) else np.zeros((0, 0), np.float32)
    np.savez(out, key=np.array(key.encode("utf-8")), hashes=hashes, vectors=matrix.astype(np.float32))
    return out.getvalue()


def load_carried(data: bytes | Path, key: str) -> CarriedVectors | None:
    """The vectors in ``data`` when they were made by ``key`` (embedder and recipe), else None;
    ``Corrupted`` when it is not such a file."""
    try:
        with np.load(data if isinstance(data, Path) else io.BytesIO(data), allow_pickle=False) as npz:
            if bytes(npz["key"].item()).decode("utf-8") != key:
                return None
            hashes, matrix = npz["hashes"], np.asarray(npz["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise Corrupted(f"carried vectors {data if isinstance(data, Path) else 'in the passport'} are not readable: "
                        f"{exc}") from exc
    if len(hashes) != len(matrix):
        raise Corrupted("carried vectors list a different number of hashes and vectors")
    return {h.decode(): matrix[n] for n, h in enumerate(hashes)}
