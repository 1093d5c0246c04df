#!/usr/bin/env python3
"""How many sign bits the HNSW graph should hold: the vectors' signs alone, or those and a rotation's.

    python benchmarks/graph_bits.py --size 1000000 --widths 100,150,200,250,300
    python benchmarks/graph_bits.py --size 1000000 --projections 2 --expansion-add 64,200 --widths 140,160,180,220

Builds usearch graphs (Hamming, M=16, expansion_add=64 unless ``--expansion-add`` says otherwise) over the
benchmark's clustered 384-d vectors (``scale_common.py``: the data ``search_scale.py`` uses) with one
projection (the signs: 48 bytes a row) and with two (``hnsw.graph_bits``: the signs and those of the
vectors turned by the fixed rotation, 96 bytes), then for each width asks each graph for that many
candidates, re-scores them exactly and reports recall@10 against the exact answer and the time per
query (one process, the graphs built first; single queries, so the ratios are what matters). With
more than one ``--expansion-add`` (how widely a row looks for neighbours as it joins: HNSW's
ef_construction) a graph is built for each, named ``P@E`` (P projections, built with E) in the
results. Writes ``benchmarks/results/graph_bits.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the sibling modules, also when this file is loaded by path

from scale_common import clustered_chunks, exact_top  # noqa: E402


def measure(size: int, widths: list[int], queries: int, dim: int, k: int = 10,
            projection_counts: tuple[int, ...] = (1, 2), expansions: tuple[int, ...] = (64,)) -> dict[str, Any]:
    from usearch.index import Index

    from soulpass.vectors.hnsw import graph_bits

    data = np.concatenate(list(clustered_chunks(size, dim, 42, 1)))
    asked = next(clustered_chunks(queries, dim, 42, 7))
    truth = exact_top(data, asked, k)
    out: dict[str, Any] = {"size": size, "dim": dim, "queries": queries, "k": k, "projections": {}}
    graphs = {}
    for projections in projection_counts:
        for expansion in expansions:
            label = str(projections) if len(expansions) == 1 else f"{projections}@{expansion}"
            t0 = time.perf_counter()
            graph = Index(ndim=dim * projections, metric="hamming", dtype="b1x8", connectivity=16,
                          expansion_add=expansion)
            for start in range(0, size, 65536):
                part = data[start:start + 65536]
                graph.add(np.arange(start, start + len(part), dtype=np.uint64), graph_bits(part, projections),
                          threads=0)
            graphs[label] = (projections, graph)
            out["projections"][label] = {"build_s": round(time.perf_counter() - t0, 2), "expansion_add": expansion,
                                         "widths": {}}
            print(f"{projections} projection(s), expansion_add {expansion}: graph of {size:,} built in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    for width in widths:
        for label, (projections, graph) in graphs.items():
            graph.expansion_search = width
            found, spent = 0, []
            for n, query in enumerate(asked):
                t0 = time.perf_counter()
                keys = np.sort(np.asarray(graph.search(graph_bits(query, projections), width).keys, dtype=np.int64))
                scores = data[keys] @ query
                top = keys[np.argpartition(-scores, k)[:k]] if len(keys) > k else keys
                spent.append(time.perf_counter() - t0)
                found += len(set(top.tolist()) & set(truth[n].tolist()))
            ms = np.asarray(spent) * 1000
            row = {"recall": round(found / (k * len(asked)), 4), "p50_ms": round(float(np.percentile(ms, 50)), 3),
                   "p95_ms": round(float(np.percentile(ms, 95)), 3)}
            out["projections"][label]["widths"][str(width)] = row
            print(f"  {width:4d} candidates, graph {label}: recall@{k} {row['recall']:.4f}  "
                  f"p50 {row['p50_ms']:.3f} ms  p95 {row['p95_ms']:.3f} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000, help="vectors in each graph")
    ap.add_argument("--widths", default="100,150,200,250,300", help="candidates asked for and re-scored")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--projections", default="1,2", help="graphs over 1 and/or 2 sign projections")
    ap.add_argument("--expansion-add", default="64", help="expansion_add of the graphs built (comma-separated)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "graph_bits.json")
    args = ap.parse_args(argv)
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"),
              **measure(args.size, [int(w) for w in args.widths.split(",") if w], args.queries, args.dim,
                        projection_counts=tuple(int(p) for p in args.projections.split(",") if p),
                        expansions=tuple(int(e) for e in args.expansion_add.split(",") if e))}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
