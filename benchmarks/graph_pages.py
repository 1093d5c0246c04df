#!/usr/bin/env python3
"""The HNSW graph walk from the file's pages or from a copy in huge pages, on one saved index.

    python benchmarks/graph_pages.py --vectors W/hnsw-1000000 --queries W/queries-200.npy --rounds 4

``--vectors`` is a saved local vector index (``search_scale.py --sections vector --keep``: its
``hnsw-<n>`` folder, or an account's ``index/vectors/hnsw-*`` folder). Opens its graph twice in one
process: mapped from the file (4 kB pages) and from ``huge_copy`` (anonymous memory asked to use
2 MB pages; ``--plain`` instead copies into ordinary pages, to tell the copy from the page size),
then times the graph search alone (as many candidates as a search re-scores) for every query,
rounds alternating which goes first. Prints p50 / p95 per round and their medians and writes
``benchmarks/results/graph_pages.json``. Both graphs must answer alike: the same bytes.
"""

from __future__ import annotations

import argparse
import json
import mmap
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=Path, required=True, help="a saved hnsw vector index folder")
    ap.add_argument("--queries", type=Path, required=True, help="query vectors (.npy)")
    ap.add_argument("--model-id", default="synthetic/clustered-384")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--plain", action="store_true", help="copy into ordinary pages (no huge pages)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "graph_pages.json")
    args = ap.parse_args(argv)
    from soulpass.vectors import HnswIndex
    from soulpass.vectors import os_memory as base
    from soulpass.vectors.hnsw import _b1_candidates, _usearch_index_class

    queries = np.load(args.queries).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    index = HnswIndex(args.vectors, model_id=args.model_id, dim=queries.shape[1])
    index._cold = False  # the graph, not the sign bits
    saved = base.HUGE_COPY_BYTES
    base.HUGE_COPY_BYTES = 1 << 62  # the index maps the file: the baseline
    try:
        if not index._has_graph():
            ap.error(f"{args.vectors} holds no saved graph")
    finally:
        base.HUGE_COPY_BYTES = saved
    assert index._graph_path is not None
    from_file = index._graph
    if args.plain:
        size = index._graph_path.stat().st_size
        copy: mmap.mmap | None = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        copy.madvise(mmap.MADV_NOHUGEPAGE)
        copy[:] = index._graph_path.read_bytes()
    else:
        base.HUGE_COPY_BYTES = 1  # whatever its size: this is what is measured
        copy = base.huge_copy(index._graph_path)
        base.HUGE_COPY_BYTES = saved
    if copy is None:
        print("this system gives no huge pages on request: nothing to compare", file=sys.stderr)
        return 1
    copied = _usearch_index_class().restore(copy, view=True, enable_key_lookups=False)
    copied.expansion_search = from_file.expansion_search
    width = _b1_candidates(10, len(from_file), index.b1_base, index._projections()) \
        if index.quantization == "b1" else from_file.expansion_search
    asked = [index._graph_vectors(q) for q in queries]
    same = all(np.array_equal(from_file.search(q, width).keys, copied.search(q, width).keys) for q in asked[:20])
    sides = {"file": from_file, "copy": copied}
    rounds: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for n in range(args.rounds):
        for side in (sides if n % 2 == 0 else reversed(list(sides))):
            graph, times = sides[side], []
            for q in asked:
                t0 = time.perf_counter()
                graph.search(q, width)
                times.append((time.perf_counter() - t0) * 1000)
            rounds[side].append({"p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95))})
            last = rounds[side][-1]
            print(f"round {n + 1} {side:4s} p50 {last['p50_ms']:.3f} ms  p95 {last['p95_ms']:.3f} ms", flush=True)
    result: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "vectors": str(args.vectors),
                              "rows": len(from_file), "graph_bytes": index._graph_path.stat().st_size,
                              "width": width, "queries": len(asked), "copy": "plain" if args.plain else "huge pages",
                              "same_answers": same, "rounds": rounds, "median": {}}
    for side, runs in rounds.items():
        result["median"][side] = {k: round(statistics.median(r[k] for r in runs), 4) for k in ("p50_ms", "p95_ms")}
    file_m, copy_m = result["median"]["file"], result["median"]["copy"]
    print(f"medians: file p50 {file_m['p50_ms']:.3f} / p95 {file_m['p95_ms']:.3f} ms; {result['copy']} p50 "
          f"{copy_m['p50_ms']:.3f} / p95 {copy_m['p95_ms']:.3f} ms; same answers: {same}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    del copied
    index.close()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
