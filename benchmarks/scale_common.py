"""What the sections of ``search_scale.py`` share: the synthetic vectors, exact answers, the
per-size context, and running a measurement in a fresh child process of ``search_scale.py``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

SCRIPT = Path(__file__).resolve().with_name("search_scale.py")
MODEL_ID = "synthetic/clustered-384"
Matrix = npt.NDArray[np.float32]


# -- data ----------------------------------------------------------------------------------------


def clustered_chunks(n: int, dim: int, seed: int, sample_seed: int, chunk: int = 100_000) -> Any:
    """Yield float32 unit vectors in chunks: 1,000 clusters in a 96-d latent space, projected."""
    latent = 96
    rng = np.random.default_rng(seed)
    proj = (rng.standard_normal((latent, dim)) / np.sqrt(latent)).astype(np.float32)
    centres = rng.standard_normal((1000, latent)).astype(np.float32)
    rng = np.random.default_rng(sample_seed)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        z = centres[rng.integers(0, len(centres), m)] + 1.2 * rng.standard_normal((m, latent), dtype=np.float32)
        x = z @ proj + 0.4 * rng.standard_normal((m, dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        yield x


def ensure_data(path: Path, n: int, dim: int, seed: int, sample_seed: int) -> Matrix:
    if path.exists():
        data = np.load(path, mmap_mode="r")
        if data.shape == (n, dim):
            return data  # type: ignore[no-any-return]
    tmp = path.with_suffix(".tmp.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, dim))
    pos = 0
    for block in clustered_chunks(n, dim, seed, sample_seed):
        out[pos:pos + len(block)] = block
        pos += len(block)
    out.flush()
    del out
    tmp.replace(path)
    return np.load(path, mmap_mode="r")  # type: ignore[no-any-return]


def exact_top(data: Matrix, queries: Matrix, k: int, chunk: int = 100_000) -> npt.NDArray[np.int64]:
    """Exact top-``k`` rows of ``data`` for each query (cosine on unit vectors), chunked."""
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    best_scores = np.zeros((len(queries), 0), dtype=np.float32)
    for start in range(0, len(data), chunk):
        scores = queries @ np.asarray(data[start:start + chunk]).T
        rows = np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape)
        all_scores = np.concatenate([best_scores, scores], axis=1)
        all_rows = np.concatenate([best_rows, rows], axis=1)
        keep = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
        best_scores = np.take_along_axis(all_scores, keep, axis=1)
        best_rows = np.take_along_axis(all_rows, keep, axis=1)
    return best_rows


@dataclass(frozen=True)
class SizeContext:
    """What every measurement of one size shares: the data, the queries and the exact answers."""

    n: int
    dim: int
    k: int
    data_path: Path
    queries_path: Path
    truth_path: Path
    workdir: Path
    args: argparse.Namespace


def run_child(args: list[str], src: Path | None = None) -> dict[str, Any]:
    """This script in a fresh interpreter; ``src`` first on its ``PYTHONPATH`` (an earlier commit's
    code, ``earlier_source``), else this checkout's."""
    env = {**os.environ, "PYTHONPATH": str(src)} if src is not None else None
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[:3]} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@contextlib.contextmanager
def earlier_source(root: Path, revision: str) -> Iterator[Path]:
    """The ``src`` folder of ``revision`` of the repository at ``root``, checked out into a temporary
    git worktree (removed afterwards): put first on ``PYTHONPATH``, it runs that commit's code with
    this checkout's interpreter and packages, so a before/after differs only in Soulpass's code."""
    worktree = Path(tempfile.mkdtemp(prefix="sp-before-")) / "before"
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(worktree), revision],
                   check=True, capture_output=True)
    try:
        yield worktree / "src"
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(worktree)], capture_output=True)
        shutil.rmtree(worktree.parent, ignore_errors=True)
