"""Measure the embedded model: load time, batch throughput, single-query latency, fidelity.

    python benchmarks/embed_quality.py --data ../shared/bench/locomo10.json [--reference REF.npy]

The texts are ``--n`` conversation turns taken at even steps over every turn of a LoCoMo-style
file. ``--save`` writes their vectors; ``--reference`` compares them with vectors another model
or variant made for the same texts (mean cosine, and overlap of each text's 10 nearest
neighbours). The torch reference was made, in a separate environment, with
``SentenceTransformer(<all-MiniLM-L6-v2 dir>).encode(texts, batch_size=64, normalize_embeddings=True)``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from soulpass.embed.base import Vectors

__all__ = ["knn_overlap", "main", "sample_turns"]


def sample_turns(data: Path, n: int) -> list[str]:
    """``n`` turn texts at even steps over all turns of all conversations, in file order."""
    turns: list[str] = []
    for sample in json.loads(data.read_text(encoding="utf-8")):
        conversation: dict[str, Any] = sample["conversation"]
        session = 1
        while f"session_{session}" in conversation:
            turns += [turn["text"] for turn in conversation[f"session_{session}"]]
            session += 1
    step = len(turns) / n
    return [turns[int(k * step)] for k in range(min(n, len(turns)))]


def knn_overlap(a: Vectors, b: Vectors, k: int = 10) -> float:
    """Mean share of each row's k nearest rows (itself excluded) that ``a`` and ``b`` agree on."""

    def nearest(x: Vectors) -> npt.NDArray[np.intp]:
        sims = x @ x.T
        np.fill_diagonal(sims, -np.inf)
        return np.argsort(-sims, axis=1)[:, :k]

    na, nb = nearest(a), nearest(b)
    return float(np.mean([len(set(na[i]) & set(nb[i])) / k for i in range(len(a))]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo-style JSON file")
    parser.add_argument("--n", type=int, default=1000, help="how many turns (default 1000)")
    parser.add_argument("--batch", type=int, default=64, help="texts per embed_batch call (default 64)")
    parser.add_argument("--threads", type=int, default=2, help="worker threads for batches (default 2)")
    parser.add_argument("--queries", type=int, default=200, help="single queries timed (default 200)")
    parser.add_argument("--save", type=Path, help="write the vectors here (.npy)")
    parser.add_argument("--reference", type=Path, help="compare with these vectors (.npy, same texts)")
    args = parser.parse_args(argv)

    texts = sample_turns(args.data, args.n)
    start = time.perf_counter()
    from soulpass.embed.minilm import MiniLM  # timed: the import of onnxruntime is part of loading

    model = MiniLM(threads=args.threads)
    load_s = time.perf_counter() - start

    model.embed_batch(texts[: args.batch])  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    vectors = np.concatenate([model.embed_batch(texts[i : i + args.batch]) for i in range(0, len(texts), args.batch)])
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu

    latencies = []
    for text in texts[: args.queries]:
        start = time.perf_counter()
        model.embed_batch([text])
        latencies.append(time.perf_counter() - start)
    cuts = statistics.quantiles(latencies, n=20)

    print(f"model      {model.model_id} (dim {model.dim})")
    print(f"load       {load_s:.2f} s (imports included)")
    print(f"batch {args.batch:<4} {len(texts) / wall_s:.0f} sentences/s with {args.threads} threads "
          f"({len(texts) / cpu_s:.0f} per CPU-second) over {len(texts)} turns")
    print(f"query      p50 {statistics.median(latencies) * 1e3:.1f} ms, p95 {cuts[18] * 1e3:.1f} ms "
          f"over {len(latencies)} turns, one at a time")
    if args.save:
        np.save(args.save, vectors)
    if args.reference:
        ref = np.load(args.reference)[: len(vectors)].astype(np.float32)
        cosines = (vectors * ref).sum(axis=1)
        print(f"fidelity   mean cosine {cosines.mean():.4f} (min {cosines.min():.4f}), "
              f"kNN@10 overlap {knn_overlap(vectors, ref):.3f} vs {args.reference.name}")


if __name__ == "__main__":
    main()
