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

Sections: each size's result is a dict of sections; ``"vector"`` is this one. A hybrid (full-text
+ dense) section is meant to be added as another ``measure_*`` function taking the same
``SizeContext`` (ids ``r<i>`` match row ``i`` of the data file) and registered in ``SECTIONS``.

    .venv/bin/python benchmarks/search_scale.py                            # 100k and 1M
    .venv/bin/python benchmarks/search_scale.py --sizes 20000 --queries 50 --workdir /tmp/ss
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results" / "search_scale.json"
MODEL_ID = "synthetic/clustered-384"
BACKENDS = ("hnsw", "chroma", "exact")

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


# -- child processes -----------------------------------------------------------------------------


def open_backend(backend: str, folder: Path, dim: int) -> Any:
    from soulpass.index.vectors import open_vector_index

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
    graph = getattr(index, "_graph", None)
    if ef_sweep and graph is not None:
        default_ef = graph.expansion_search
        out["ef_sweep"] = {}
        for ef in ef_sweep:
            graph.expansion_search = ef
            out["ef_sweep"][str(ef)] = timed_queries(index, queries, truth, k)
        graph.expansion_search = default_ef
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


def run_child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[:3]} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


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
            first_ours = backend == "hnsw" and round_no == 0  # extras once, after the timed queries
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


# A hybrid measurement goes here: def measure_hybrid(ctx: SizeContext) -> dict[str, Any], registered below.
SECTIONS: dict[str, Callable[[SizeContext], dict[str, Any]]] = {"vector": measure_vector}


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
    p.add_argument("--ef-sweep", default="", help="extra expansion_search values to time for hnsw, e.g. 32,128")
    p.add_argument("--filtered", default="0.1,0.01",
                   help="also time ours with every 1/f-th record allowed, for these fractions f")
    p.add_argument("--sections", default="vector", help=f"comma-separated, of {', '.join(SECTIONS)}")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "soulpass-search-scale")
    p.add_argument("--reuse", action="store_true", help="reuse indexes already built in --workdir")
    p.add_argument("--keep", action="store_true", help="keep --workdir (data and indexes) afterwards")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the result")
    p.add_argument("--seed", type=int, default=42)
    for hidden in ("--_worker", "--_backend", "--_folder", "--_data", "--_queries", "--_truth", "--_ef"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    args.ef_sweep = [int(e) for e in args.ef_sweep.split(",") if e]
    args.filtered = [float(f) for f in args.filtered.split(",") if f]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        p.error(f"unknown backends {unknown}")
    return args


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

    args.workdir.mkdir(parents=True, exist_ok=True)
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
            shutil.rmtree(args.workdir, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
