#!/usr/bin/env python3
"""Search at scale: our default vector index against ChromaDB on the same vectors, in one run.

For each size (default 100k and 1M) the benchmark

1. writes ``n`` synthetic 384-d unit vectors to ``WORKDIR/data-<n>.npy`` (seeded, generated in
   chunks): a mixture of 1,000 clusters in a 96-d latent space projected to 384-d plus isotropic
   noise, which gives nearest-neighbour similarities (~0.5 top-1) and HNSW recall close to what
   real MiniLM sentence vectors give; queries come from the same distribution with another seed;
2. computes the exact top-``k`` of every query (chunked brute force) as the recall reference;
3. for each backend (default ``hnsw`` = our default index, and ``chroma``): builds the index in a
   child process (timed, upserts in chunks of ``--chunk``), then opens it in a *fresh* child
   process and times ``--queries`` single top-``k`` searches one after the other;
   This query step runs ``--rounds`` times, alternating the order of the backends, and the
   medians over rounds are reported (the machines are shared and noisy);
4. prints open time, first query, p50/p95 per backend, recall@k against exact, build time, disk
   size, and the ratio p95(ours) / p95(chroma) (the goal: <= 0.5), and writes it all as JSON;
   once per size it also times ours with other ``expansion_search`` values (``--ef-sweep``) and
   with an ``allowed`` filter keeping every 1/f-th record (``--filtered``), recall against the
   exact answer within the filter.

Sections: each size's result is a dict of sections, each a ``measure_*`` function taking the
same ``SizeContext``, registered in ``SECTIONS``; ``"vector"`` is the above. ``"hybrid"``
(``search_scale_hybrid.py``; shared helpers in ``scale_common.py``) times ``AccountIndex.search``
(full text + dense, fused, read in context) over an account of ``n``
synthetic turns (Zipf-distributed English-ish words, sessions of 20-30 turns by 2-3 speakers),
built with ``bulk_append`` and caught up with an embedder that maps record ``i``'s text to row
``i`` of the data file; the target is p95 <= 25 ms at 1M, query embedding excluded (MiniLM's
single-query time is reported beside it). Results merge into ``--json``: the sections measured
replace theirs, per size, the others are kept.

    .venv/bin/python benchmarks/search_scale.py                            # 100k and 1M, vector
    .venv/bin/python benchmarks/search_scale.py --sizes 20000 --queries 50 --workdir /tmp/ss
    .venv/bin/python benchmarks/search_scale.py --sections hybrid --keep --reuse --workdir /tmp/ss
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the sibling modules, also when this file is loaded by path

from scale_common import (  # noqa: E402
    MODEL_ID,
    Matrix,
    SizeContext,
    clustered_chunks,
    disk_bytes,
    ensure_data,
    exact_top,
    run_child,
)
from search_scale_hybrid import (  # noqa: E402
    measure_hybrid,
    worker_hybrid_build,
    worker_hybrid_embed,
    worker_hybrid_query,
)

DEFAULT_JSON = HERE / "results" / "search_scale.json"
BACKENDS = ("hnsw", "chroma", "exact", "hnsw-f16")  # hnsw-f16: our graph over f16 vectors, not sign bits



# -- child processes -----------------------------------------------------------------------------


def open_backend(backend: str, folder: Path, dim: int) -> Any:
    from soulpass.vectors import HnswIndex, open_vector_index

    if backend == "hnsw-f16":
        return HnswIndex(folder, model_id=MODEL_ID, dim=dim, quantization="f16")

    return open_vector_index(folder, model_id=MODEL_ID, dim=dim, backend=backend)  # type: ignore[arg-type]


def worker_build(backend: str, folder: Path, data_path: Path, chunk: int) -> dict[str, Any]:
    data = np.load(data_path, mmap_mode="r")
    start = time.perf_counter()
    index = open_backend(backend, folder, data.shape[1])
    for pos in range(0, len(data), chunk):
        block = np.asarray(data[pos:pos + chunk])
        index.upsert([f"r{i}" for i in range(pos, pos + len(block))], block)
    index.close()
    return {"build_s": time.perf_counter() - start}


def worker_query(backend: str, folder: Path, queries_path: Path, truth_path: Path, k: int,
                 ef_sweep: list[int], filtered: list[float], data_path: Path | None) -> dict[str, Any]:
    queries = np.load(queries_path)
    truth = np.load(truth_path)
    start = time.perf_counter()
    index = open_backend(backend, folder, queries.shape[1])
    open_s = time.perf_counter() - start
    out: dict[str, Any] = {"open_s": open_s, **timed_queries(index, queries, truth, k)}
    inner = getattr(index, "inner", index)  # open_vector_index gives a shared handle
    graph = getattr(inner, "_graph", None)
    if ef_sweep and graph is not None:
        # A sign-bit (b1) graph's width is the number of neighbours re-scored exactly: set both.
        default_ef, b1 = graph.expansion_search, getattr(inner, "quantization", "") == "b1"
        out["ef_sweep"] = {}
        for ef in ef_sweep:
            graph.expansion_search = ef
            if b1:
                inner.b1_base = ef
            out["ef_sweep"][str(ef)] = timed_queries(index, queries, truth, k)
        graph.expansion_search = default_ef
        if b1:
            inner.b1_base = None
    if filtered and data_path is not None:
        data = np.load(data_path, mmap_mode="r")
        out["filtered"] = {}
        for fraction in filtered:  # every step-th record allowed, as a kind/agent filter would
            rows = np.arange(0, len(data), max(1, round(1 / fraction)))
            allowed = {f"r{i}" for i in rows.tolist()}
            truth_f = rows[exact_top(data[rows], queries, k)]
            out["filtered"][str(fraction)] = timed_queries(index, queries, truth_f, k, allowed)
    index.close()
    return out


def timed_queries(index: Any, queries: Matrix, truth: npt.NDArray[np.int64], k: int,
                  allowed: set[str] | None = None) -> dict[str, Any]:
    latencies, cpu, recalls = [], [], []
    for q, want in zip(queries, truth, strict=True):
        t0, c0 = time.perf_counter(), time.process_time()
        hits = index.search(q, k, allowed=allowed)
        latencies.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        recalls.append(len({int(i[1:]) for i, _ in hits} & set(want.tolist())) / k)
    ms = np.asarray(latencies)
    return {
        "first_ms": latencies[0],
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "mean_ms": float(ms.mean()),
        # CPU time of the whole process (all threads): what the query costs, without the waits for
        # a core that dominate wall-clock tails on a shared 2-core machine
        "cpu_p50_ms": float(np.percentile(cpu, 50)),
        "cpu_p95_ms": float(np.percentile(cpu, 95)),
        "recall": float(np.mean(recalls)),
    }


# -- measurements --------------------------------------------------------------------------------


def measure_vector(ctx: SizeContext) -> dict[str, Any]:
    """Each backend built in one child, then ``--rounds`` rounds of queries, each backend from a fresh
    child, the order alternating per round so both see the same machine noise; medians over rounds."""
    out: dict[str, Any] = {}
    for backend in ctx.args.backends:
        folder = ctx.workdir / f"{backend}-{ctx.n}"
        out[backend] = {"rounds": []}
        if not (ctx.args.reuse and folder.exists()):
            shutil.rmtree(folder, ignore_errors=True)
            print(f"  {backend}: building {ctx.n:,} ...", flush=True)
            out[backend].update(run_child(["--_worker", "build", "--_backend", backend, "--_folder", str(folder),
                                           "--_data", str(ctx.data_path), "--chunk", str(ctx.args.chunk)]))
            print(f"  {backend}: built in {out[backend]['build_s']:.1f} s", flush=True)
        out[backend]["disk_mb"] = disk_bytes(folder) / 2**20
    for round_no in range(ctx.args.rounds):
        order = ctx.args.backends if round_no % 2 == 0 else ctx.args.backends[::-1]
        for backend in order:
            first_ours = backend.startswith("hnsw") and round_no == 0  # extras once, after the timed queries
            got = run_child(["--_worker", "query", "--_backend", backend, "--_folder",
                             str(ctx.workdir / f"{backend}-{ctx.n}"), "--_queries", str(ctx.queries_path),
                             "--_truth", str(ctx.truth_path), "--k", str(ctx.k), "--_data", str(ctx.data_path),
                             "--_ef", ",".join(map(str, ctx.args.ef_sweep)) if first_ours else "",
                             "--filtered", ",".join(map(str, ctx.args.filtered)) if first_ours else ""])
            for extra in ("ef_sweep", "filtered"):
                if extra in got:
                    out[backend][extra] = got.pop(extra)
                    for key, r in out[backend][extra].items():
                        print(f"    {extra} {key}: p50 {r['p50_ms']:.3f} ms, p95 {r['p95_ms']:.3f} ms, "
                              f"recall {r['recall']:.3f}", flush=True)
            out[backend]["rounds"].append(got)
            print(f"  round {round_no + 1} {backend}: " + ", ".join(f"{key} {fmt(v)}" for key, v in got.items()),
                  flush=True)
    if ctx.args.rounds == 0:  # build only
        return out
    for backend in ctx.args.backends:
        rounds = out[backend]["rounds"]
        for key in ("open_s", "first_ms", "p50_ms", "p95_ms", "mean_ms", "cpu_p50_ms", "cpu_p95_ms", "recall"):
            out[backend][key] = statistics.median(r[key] for r in rounds)
    if "hnsw" in out and "chroma" in out:
        out["p95_ratio_ours_over_chroma"] = out["hnsw"]["p95_ms"] / out["chroma"]["p95_ms"]
        out["p50_ratio_ours_over_chroma"] = out["hnsw"]["p50_ms"] / out["chroma"]["p50_ms"]
        out["p95_ratio_per_round"] = [a["p95_ms"] / b["p95_ms"] for a, b in
                                      zip(out["hnsw"]["rounds"], out["chroma"]["rounds"], strict=True)]
        out["cpu_p95_ratio_ours_over_chroma"] = out["hnsw"]["cpu_p95_ms"] / out["chroma"]["cpu_p95_ms"]
    for backend in ctx.args.backends:
        r = out[backend]
        print(f"  {backend:7s} p50 {r['p50_ms']:.3f} ms  p95 {r['p95_ms']:.3f} ms  "
              f"(cpu {r['cpu_p50_ms']:.3f} / {r['cpu_p95_ms']:.3f} ms)  recall@{ctx.k} {r['recall']:.3f}  "
              f"open {r['open_s']:.2f} s  build {fmt(r.get('build_s', '-'))} s  disk {r['disk_mb']:.0f} MB", flush=True)
    return out


SECTIONS: dict[str, Callable[[SizeContext], dict[str, Any]]] = {"vector": measure_vector, "hybrid": measure_hybrid}


def fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


# -- driver --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--sizes", default="100000,1000000", help="comma-separated record counts")
    p.add_argument("--queries", type=int, default=200, help="single queries timed per backend")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3, help="query rounds (fresh processes) per backend")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--chunk", type=int, default=100_000, help="vectors per upsert call while building")
    p.add_argument("--backends", default="hnsw,chroma", help=f"comma-separated, of {', '.join(BACKENDS)}")
    p.add_argument("--ef-sweep", default="",
                   help="extra widths to time for hnsw: expansion_search, and for a sign-bit graph the "
                        "neighbours re-scored for a top 10 too, e.g. 200,300")
    p.add_argument("--filtered", default="0.1,0.01",
                   help="also time ours with every 1/f-th record allowed, for these fractions f")
    p.add_argument("--sections", default="vector", help=f"comma-separated, of {', '.join(SECTIONS)}")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "soulpass-search-scale")
    p.add_argument("--reuse", action="store_true", help="reuse indexes already built in --workdir")
    p.add_argument("--keep", action="store_true", help="keep --workdir (data and indexes) afterwards")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the result")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--hybrid-chunk", type=int, default=100_000, help="turns per bulk_append (version) for hybrid")
    p.add_argument("--profile", action="store_true", help="hybrid: cProfile one pass of the queries (first round)")
    p.add_argument("--before", default=None,
                   help="hybrid: also time an earlier commit's code (a git worktree), rounds alternating")
    for hidden in ("--_worker", "--_backend", "--_folder", "--_data", "--_queries", "--_truth", "--_ef", "--_n"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    args.ef_sweep = [int(e) for e in args.ef_sweep.split(",") if e]
    args.filtered = [float(f) for f in args.filtered.split(",") if f]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        p.error(f"unknown backends {unknown}")
    return args


def merged(path: Path, report: dict[str, Any]) -> dict[str, Any]:
    """``report`` over the one already at ``path``: the sections measured now replace theirs, per
    size; the others (and their run's params) are kept."""
    try:
        old = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return report
    if old.get("benchmark") != report["benchmark"]:
        return report
    sizes = old.get("sizes", {})
    for n, sections in report["sizes"].items():
        sizes[n] = {**sizes.get(n, {}), **sections}
    return {**old, "sizes": dict(sorted(sizes.items(), key=lambda item: int(item[0])))}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._worker == "build":
        print(json.dumps(worker_build(args._backend, Path(args._folder), Path(args._data), args.chunk)))
        return 0
    if args._worker == "query":
        ef = [int(e) for e in (args._ef or "").split(",") if e]
        print(json.dumps(worker_query(args._backend, Path(args._folder), Path(args._queries), Path(args._truth),
                                      args.k, ef, args.filtered, Path(args._data) if args._data else None)))
        return 0
    if args._worker == "hybrid-build":
        print(json.dumps(worker_hybrid_build(Path(args._folder), Path(args._data), int(args._n), args.seed,
                                             args.hybrid_chunk)))
        return 0
    if args._worker == "hybrid-embed":
        print(json.dumps(worker_hybrid_embed(args.queries, args.seed)))
        return 0
    if args._worker == "hybrid-query":
        print(json.dumps(worker_hybrid_query(Path(args._folder), Path(args._queries), args.queries, args.seed,
                                             args.k, args.profile)))
        return 0

    made_workdir = not args.workdir.exists()
    args.workdir.mkdir(parents=True, exist_ok=True)
    already = set(args.workdir.iterdir())  # without --keep only what this run made is removed
    sizes = [int(s) for s in args.sizes.split(",") if s]
    report: dict[str, Any] = {
        "benchmark": "search_scale",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": __import__("os").cpu_count()},
        "params": {"queries": args.queries, "k": args.k, "dim": args.dim, "seed": args.seed,
                   "backends": args.backends, "chunk": args.chunk, "rounds": args.rounds},
        "sizes": {},
    }
    try:
        queries_path = args.workdir / f"queries-{args.queries}.npy"
        np.save(queries_path, next(clustered_chunks(args.queries, args.dim, args.seed, args.seed + 7)))
        for n in sizes:
            print(f"{n:,} vectors", flush=True)
            t0 = time.perf_counter()
            data = ensure_data(args.workdir / f"data-{n}.npy", n, args.dim, args.seed, args.seed + 1)
            truth_path = args.workdir / f"truth-{n}-{args.queries}.npy"
            np.save(truth_path, exact_top(data, np.load(queries_path), args.k))
            print(f"  data + exact answers: {time.perf_counter() - t0:.1f} s", flush=True)
            ctx = SizeContext(n, args.dim, args.k, args.workdir / f"data-{n}.npy", queries_path, truth_path,
                              args.workdir, args)
            report["sizes"][str(n)] = {name: SECTIONS[name](ctx) for name in args.sections.split(",") if name}
            vector = report["sizes"][str(n)].get("vector", {})
            if "p95_ratio_ours_over_chroma" in vector:
                print(f"  p95 ours/chroma = {vector['p95_ratio_ours_over_chroma']:.3f} (goal <= 0.5); "
                      f"cpu p95 ours/chroma = {vector['cpu_p95_ratio_ours_over_chroma']:.3f}", flush=True)
    finally:
        if not args.keep:
            remove_made(args.workdir, already, made_workdir)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(merged(args.json, report), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


def remove_made(workdir: Path, already: set[Path], made_workdir: bool) -> None:
    """Remove what this run put in ``workdir`` (and the folder itself if this run made it): a
    ``--workdir`` that already held other files, or other accounts, keeps them."""
    for entry in set(workdir.iterdir()) - already:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if made_workdir:
        with contextlib.suppress(OSError):
            workdir.rmdir()


if __name__ == "__main__":
    sys.exit(main())
