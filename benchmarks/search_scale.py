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
same ``SizeContext``, registered in ``SECTIONS``; ``"vector"`` is the above. ``"hybrid"`` times
``AccountIndex.search`` (full text + dense, fused, read in context) over an account of ``n``
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
from functools import partial
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


# -- hybrid: full text + dense over an account --------------------------------------------------
#
# n turn records of synthetic English-ish text (Zipf-distributed words, function words at the
# head, so BM25 doclists have realistic lengths), grouped into sessions of 20-30 turns by 2-3
# speakers with increasing event times, bulk-appended in chunks, then caught up with a synthetic
# embedder that maps record i's text to row i of the data file (so 1M texts skip MiniLM); queries
# are 3-6 vocabulary words paired with the query vectors. The query child times
# ``AccountIndex.search`` (and ``Account.search``, which also checks the store for new versions on
# every call) per filter variant, with the time spent in each catalog / vector call.

HYBRID_TARGET_P95_MS = 25.0  # at 1M records, query embedding excluded
HYBRID_VOCAB = 50_000  # words by rank; the most frequent are English function words
HYBRID_ACCOUNT = "bench"
SPEAKERS = ("alice", "bruno", "chen", "dara", "elif", "femi", "gus", "hana", "ivan", "jade", "kofi", "lena")
ASSISTANT = "eva"  # a third speaker in some sessions, writing turn_llm records
FILTERED_AGENT = SPEAKERS[0]
ACCOUNT_QUERIES = 50  # Account.search re-checks the store on every call: fewer queries keep 1M runs short
_FUNCTION_TEXT = (
    "the of and to a in is it you that he was for on are with as i his they be at one have this from or had by "
    "not but what some we can out other were all there when up use your how said an each she which do their time "
    "if will way about many then them would so these her him has more could go come did my no most who over "
    "just than into been now only very after also our well"
)
_FUNCTION_WORDS = _FUNCTION_TEXT.split()
_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
           "st", "tr", "pl", "gr", "sh", "th", "cl", "fr", "sp", "qu")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "ee", "oa", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng", "rt", "sh")


@dataclass(frozen=True)
class Vocabulary:
    """Words by rank and the cumulative Zipf-Mandelbrot probabilities to draw them with."""

    words: list[str]
    cumulative: npt.NDArray[np.float64]

    @classmethod
    def make(cls, size: int, seed: int, exponent: float = 1.0, shift: float = 2.7) -> Vocabulary:
        rng = np.random.default_rng(seed)
        words = list(_FUNCTION_WORDS)
        seen = set(words)
        while len(words) < size:
            word = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
                           + _CODAS[rng.integers(len(_CODAS))] for _ in range(int(rng.integers(1, 4))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        weights = 1.0 / (np.arange(size) + shift) ** exponent
        return cls(words, np.cumsum(weights) / weights.sum())

    def draw(self, rng: np.random.Generator, count: int) -> npt.NDArray[np.int64]:
        return np.minimum(np.searchsorted(self.cumulative, rng.random(count)), len(self.words) - 1)

    def sentence(self, ranks: npt.NDArray[np.int64], question: bool) -> str:
        text = " ".join(self.words[r] for r in ranks.tolist())
        return text[:1].upper() + text[1:] + ("?" if question else ".")


@dataclass(frozen=True)
class Turn:
    text: str
    speaker: str
    session: str
    at: Any  # datetime


def conversation(n: int, vocab: Vocabulary, seed: int, chunk: int) -> Any:
    """Yield lists of ``Turn`` (about ``chunk`` each, whole sessions), ``n`` in all, in event order."""
    from datetime import UTC, datetime, timedelta

    rng = np.random.default_rng(seed)
    clock = datetime(2019, 1, 1, tzinfo=UTC)
    out: list[Turn] = []
    made = session_no = 0
    while made < n:
        size = min(int(rng.integers(20, 31)), n - made)
        people = [SPEAKERS[i] for i in rng.choice(len(SPEAKERS), 2, replace=False)]
        if rng.random() < 0.3:
            people.append(ASSISTANT)
        session = f"s{session_no:07d}"
        lengths = rng.integers(6, 36, size)
        ranks = vocab.draw(rng, int(lengths.sum()))
        pos, speaker = 0, people[0]
        for length in lengths.tolist():
            speaker = people[(people.index(speaker) + int(rng.integers(1, len(people)))) % len(people)]
            clock += timedelta(seconds=int(rng.integers(20, 120)))
            out.append(Turn(vocab.sentence(ranks[pos:pos + length], rng.random() < 0.2), speaker, session, clock))
            pos += length
        clock += timedelta(hours=float(rng.exponential(1.5)))
        made += size
        session_no += 1
        if len(out) >= chunk or made >= n:
            yield out
            out = []


def hybrid_queries(count: int, vocab: Vocabulary, seed: int) -> list[str]:
    """3-6 words each: half drawn by frequency (function words among them), half uniformly from the
    content words (mostly rare); made distinct, since the query embedder looks queries up by text."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < count:
        size = int(rng.integers(3, 7))
        frequent = vocab.draw(rng, size)
        rare = rng.integers(len(_FUNCTION_WORDS), len(vocab.words), size)
        words = [vocab.words[int(f if rng.random() < 0.5 else r)] for f, r in zip(frequent, rare, strict=True)]
        text = " ".join(words)
        if text not in out:
            out.append(text)
    return out


class TableEmbedder:
    """An ``Embedder`` that looks texts up: text -> row of a matrix (the benchmark's clustered vectors)."""

    def __init__(self, rows: dict[str, int], matrix: Matrix) -> None:
        self.model_id = MODEL_ID
        self.dim = int(matrix.shape[1])
        self._rows, self._matrix = rows, matrix

    def embed_batch(self, texts: Any) -> Matrix:
        return np.asarray(self._matrix[[self._rows[t] for t in texts]], dtype=np.float32)


def turn_record(turn: Turn) -> Any:
    from soulpass.ids import new_temp_id
    from soulpass.records import TurnLLM, TurnUser

    if turn.speaker == ASSISTANT:
        return TurnLLM(id=new_temp_id("turn_llm"), text_excerpt=turn.text, agent=turn.speaker, created_at=turn.at,
                       session_id=turn.session)
    return TurnUser(id=new_temp_id("turn_user"), text_excerpt=turn.text, agent=turn.speaker, created_at=turn.at,
                    session_id=turn.session)


def worker_hybrid_build(home: Path, data_path: Path, n: int, seed: int, chunk: int) -> dict[str, Any]:
    import soulpass
    from soulpass.index.search import AccountIndex

    vocab = Vocabulary.make(HYBRID_VOCAB, seed)
    data = np.load(data_path, mmap_mode="r")
    acct = soulpass.open(home, embedder="none").account(HYBRID_ACCOUNT, create=True)
    rows: dict[str, int] = {}
    t0 = time.perf_counter()
    generate_s = 0.0
    for turns in conversation(n, vocab, seed, chunk):
        tg = time.perf_counter()
        records = [turn_record(t) for t in turns]
        for t in turns:
            rows[f"{t.speaker}: {t.text}"] = len(rows)  # what search.embed_text makes of the row
        generate_s += time.perf_counter() - tg
        acct.bulk_append(records)
        print(f"  appended {len(rows):,}/{n:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    append_s = time.perf_counter() - t0
    index = AccountIndex(acct.store, TableEmbedder(rows, data), backend="hnsw")
    t1 = time.perf_counter()
    caught = index.catalog.catch_up(acct.store)  # the catalog, FTS5 and (when installed) the tantivy sidecar
    t2 = time.perf_counter()
    index.catch_up()  # now only the embeddings: vectors and graph
    t3 = time.perf_counter()
    status = index.status()
    index.close()
    return {"append_s": append_s, "generate_s": generate_s, "versions": acct.head(), "catalog_s": t2 - t1,
            "embed_s": t3 - t2, "build_s": t3 - t0, "catalog_rows": caught.rows_added, "vectors": status.vectors,
            "account_path": str(acct.store.path)}


class CallTimer:
    """Wraps methods of an object so that each call's wall time is added to a per-query tally."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}

    def wrap(self, owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.current[label] = self.current.get(label, 0.0) + (time.perf_counter() - t0) * 1000

        setattr(owner, name, timed)


def hybrid_variants() -> dict[str, Any]:
    from soulpass.index.catalog import Filters

    return {"all": Filters(), f"agent={FILTERED_AGENT}": Filters(agent=FILTERED_AGENT)}


def worker_hybrid_query(home: Path, queries_path: Path, n_queries: int, seed: int, k: int,
                        profile: bool) -> dict[str, Any]:
    import soulpass
    from soulpass.index.search import AccountIndex

    vocab = Vocabulary.make(HYBRID_VOCAB, seed)
    texts = hybrid_queries(n_queries, vocab, seed + 11)
    vectors = np.load(queries_path)[:n_queries]
    embedder = TableEmbedder({t: i for i, t in enumerate(texts)}, vectors)
    sp = soulpass.open(home, embedder=embedder)
    acct = sp.account(HYBRID_ACCOUNT)
    t0 = time.perf_counter()
    index = AccountIndex(acct.store, embedder, backend="hnsw")
    out: dict[str, Any] = {"open_s": time.perf_counter() - t0, "variants": {}}
    timer = CallTimer()
    for name, label in (("fts_search", "fts_search"), ("fts_scores", "fts_scores"), ("passing", "dense_passing"),
                        ("ids_matching", "ids_matching"), ("neighbours", "neighbours"), ("get", "get_rows")):
        timer.wrap(index.catalog, name, label)
    assert index.vectors is not None
    timer.wrap(index.vectors, "search", "vectors")
    timer.wrap(index, "_query_vector", "query_vector")
    for variant, filters in hybrid_variants().items():
        out["variants"][variant] = hybrid_timed(partial(index.search, k=k, filters=filters), texts, timer)
    if profile:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        for filters in hybrid_variants().values():
            for q in texts:
                index.search(q, k, filters)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
        out["profile"] = text.getvalue()
    index.close()
    # The public path: Account.search (its own index, opened by the first call) also checks the
    # store for new versions before every search.
    out["variants"]["account.search"] = hybrid_timed(partial(acct.search, k=k), texts[:ACCOUNT_QUERIES], None)
    acct.close()
    return out


def hybrid_timed(search: Callable[[str], Any], texts: list[str], timer: CallTimer | None) -> dict[str, Any]:
    latencies, cpu, parts, found = [], [], [], []
    for q in texts:
        if timer is not None:
            timer.current = {}
        t0, c0 = time.perf_counter(), time.process_time()
        hits = search(q)
        latencies.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        found.append(len(hits))
        if timer is not None:
            parts.append(timer.current)
    ms = np.asarray(latencies)
    out: dict[str, Any] = {
        "first_ms": latencies[0], "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
        "mean_ms": float(ms.mean()), "max_ms": float(ms.max()), "cpu_p50_ms": float(np.percentile(cpu, 50)),
        "cpu_p95_ms": float(np.percentile(cpu, 95)), "mean_hits": float(np.mean(found)),
    }
    if parts:  # mean and p95 per call kind, per query (a query without the call counts 0)
        labels = sorted({label for p in parts for label in p})
        out["breakdown_ms"] = {label: {"mean": float(np.mean([p.get(label, 0.0) for p in parts])),
                                       "p95": float(np.percentile([p.get(label, 0.0) for p in parts], 95))}
                               for label in labels}
        other = [lat - sum(p.values()) for lat, p in zip(latencies, parts, strict=True)]
        out["breakdown_ms"]["other"] = {"mean": float(np.mean(other)), "p95": float(np.percentile(other, 95))}
    return out


def worker_hybrid_embed(n_queries: int, seed: int) -> dict[str, Any]:
    """What the excluded step costs: MiniLM on one query at a time (None when not installed).

    A process of its own: importing onnxruntime after usearch crashes (usearch 2.26.6 /
    onnxruntime 1.31.1: ``import usearch.index; import onnxruntime`` segfaults in libstdc++)."""
    from soulpass.errors import BackendUnavailable

    texts = hybrid_queries(n_queries, Vocabulary.make(HYBRID_VOCAB, seed), seed + 11)
    try:
        from soulpass.embed.minilm import MiniLM

        model = MiniLM()
    except (BackendUnavailable, ImportError):
        return {"model": None}
    model.embed_batch([texts[0]])
    ms = []
    for q in texts:
        t0 = time.perf_counter()
        model.embed_batch([q])
        ms.append((time.perf_counter() - t0) * 1000)
    return {"model": model.model_id, "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def measure_hybrid(ctx: SizeContext) -> dict[str, Any]:
    """Build an account of ``n`` turns in one child, then ``--rounds`` fresh children time the
    searches; medians over rounds."""
    home = ctx.workdir / f"hybrid-{ctx.n}"
    done = home / "build.json"
    out: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "target_p95_ms": HYBRID_TARGET_P95_MS,
                           "params": {"queries": ctx.args.queries, "k": ctx.k, "rounds": ctx.args.rounds,
                                      "chunk": ctx.args.hybrid_chunk, "vocabulary": HYBRID_VOCAB,
                                      "speakers": len(SPEAKERS) + 1, "filtered_agent": FILTERED_AGENT}}
    if ctx.args.reuse and done.exists():
        out["build"] = json.loads(done.read_text("utf-8"))
    else:
        shutil.rmtree(home, ignore_errors=True)
        print(f"  hybrid: building an account of {ctx.n:,} turns ...", flush=True)
        out["build"] = run_child(["--_worker", "hybrid-build", "--_folder", str(home), "--_data", str(ctx.data_path),
                                  "--_n", str(ctx.n), "--seed", str(ctx.args.seed),
                                  "--hybrid-chunk", str(ctx.args.hybrid_chunk)])
        done.write_text(json.dumps(out["build"]), encoding="utf-8")
    build = out["build"]
    account = Path(build["account_path"])
    index_dir = account / "index"
    out["disk_mb"] = {"account": disk_bytes(account) / 2**20, "index": disk_bytes(index_dir) / 2**20}
    for part in sorted(index_dir.iterdir()):
        out["disk_mb"][f"index/{part.name}"] = (disk_bytes(part) if part.is_dir() else part.stat().st_size) / 2**20
    print(f"  hybrid: built in {build['build_s']:.0f} s (append {build['append_s']:.0f} s, catalog "
          f"{build['catalog_s']:.0f} s, embed {build['embed_s']:.0f} s), disk {out['disk_mb']['account']:.0f} MB "
          f"(index {out['disk_mb']['index']:.0f} MB)", flush=True)
    rounds: list[dict[str, Any]] = []
    for round_no in range(ctx.args.rounds):
        profile = ctx.args.profile and round_no == 0
        got = run_child(["--_worker", "hybrid-query", "--_folder", str(home), "--_queries", str(ctx.queries_path),
                         "--queries", str(ctx.args.queries), "--seed", str(ctx.args.seed), "--k", str(ctx.k),
                         *(["--profile"] if profile else [])])
        if "profile" in got:
            out["profile"] = got.pop("profile")
            print(out["profile"], flush=True)
        rounds.append(got)
        print(f"  hybrid round {round_no + 1}: open {got['open_s']:.2f} s, " + "; ".join(
            f"{v} p50 {r['p50_ms']:.2f} / p95 {r['p95_ms']:.2f} ms" for v, r in got["variants"].items()), flush=True)
    if not rounds:
        return out
    embedding = run_child(["--_worker", "hybrid-embed", "--queries", str(ctx.args.queries),
                           "--seed", str(ctx.args.seed)])
    return summarise_hybrid(out, rounds, embedding)


def summarise_hybrid(out: dict[str, Any], rounds: list[dict[str, Any]], embedding: dict[str, Any]) -> dict[str, Any]:
    """Medians over the query rounds, printed and added to ``out``."""
    out["rounds"] = rounds
    out["open_s"] = statistics.median(r["open_s"] for r in rounds)
    out["query_embedding_excluded"] = embedding
    out["variants"] = {}
    for variant in rounds[0]["variants"]:
        per = [r["variants"][variant] for r in rounds]
        med = {key: statistics.median(p[key] for p in per) for key in per[0] if key != "breakdown_ms"}
        if "breakdown_ms" in per[0]:
            med["breakdown_ms"] = {label: {s: statistics.median(p["breakdown_ms"][label][s] for p in per)
                                           for s in ("mean", "p95")} for label in per[0]["breakdown_ms"]}
        out["variants"][variant] = med
        parts = ", ".join(f"{label} {b['mean']:.2f}" for label, b in med.get("breakdown_ms", {}).items())
        print(f"  hybrid {variant:16s} p50 {med['p50_ms']:.2f} ms  p95 {med['p95_ms']:.2f} ms  "
              f"(cpu {med['cpu_p50_ms']:.2f} / {med['cpu_p95_ms']:.2f} ms)  first {med['first_ms']:.1f} ms"
              + (f"  mean ms: {parts}" if parts else ""), flush=True)
    out["pass"] = out["variants"]["all"]["p95_ms"] <= HYBRID_TARGET_P95_MS
    emb = out["query_embedding_excluded"]
    if emb.get("model"):
        print(f"  (excluded) query embedding with {emb['model']}: p50 {emb['p50_ms']:.2f} ms, "
              f"p95 {emb['p95_ms']:.2f} ms", flush=True)
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
    p.add_argument("--ef-sweep", default="", help="extra expansion_search values to time for hnsw, e.g. 32,128")
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
    args.json.write_text(json.dumps(merged(args.json, report), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
