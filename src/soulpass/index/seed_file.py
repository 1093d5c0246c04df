"""The vector seed file a passport carries (``soulpass.index.seed``): text hash -> vector, with the
embedder and recipe that made them; no pickles."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from soulpass.errors import Corrupted
from soulpass.index.vectors import model_tag

__all__ = ["Seed", "load_seed", "seed_bytes", "seed_name"]

Seed = dict[str, npt.NDArray[np.float32]]  # text hash -> unit vector


def seed_name(model_id: str) -> str:
    return f"seed-{model_tag(model_id)}.npz"


def seed_bytes(key: str, seed: Seed) -> bytes:
    """The seed as an ``.npz`` file (no pickles: hashes as fixed-width bytes)."""
    out = io.BytesIO()
    hashes = np.array(sorted(seed), dtype="S64")
    matrix = np.stack([seed[h.decode()] for h in hashes]) if len(hashes) else np.zeros((0, 0), np.float32)
    np.savez(out, key=np.array(key.encode("utf-8")), hashes=hashes, vectors=matrix.astype(np.float32))
    return out.getvalue()


def load_seed(data: bytes | Path, key: str) -> Seed | None:
    """The seed in ``data`` when it was made by ``key`` (embedder and recipe), else None;
    ``Corrupted`` when it is not a seed file."""
    try:
        with np.load(data if isinstance(data, Path) else io.BytesIO(data), allow_pickle=False) as npz:
            if bytes(npz["key"].item()).decode("utf-8") != key:
                return None
            hashes, matrix = npz["hashes"], np.asarray(npz["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise Corrupted(f"vector seed {data if isinstance(data, Path) else 'in the passport'} is not readable: "
                        f"{exc}") from exc
    if len(hashes) != len(matrix):
        raise Corrupted("vector seed lists a different number of hashes and vectors")
    return {h.decode(): matrix[n] for n, h in enumerate(hashes)}
