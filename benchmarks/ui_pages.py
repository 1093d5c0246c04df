"""The memory browser on a large account: how long each page of ``/ui`` takes to render.

Builds an account of ``--n`` turns (synthetic conversations, ``bulk_append`` in ``--chunk``-turn
versions), then a few archived sandboxes on top (facts, one superseded, a journal entry), and
times every page through the real ASGI app (``create_app`` + Starlette's TestClient, a logged-in
cookie): the timeline, a small version, the bulk version (``--chunk`` records added), the diff
from 0 to HEAD (every record), a record, a fact, search, the fact graph, health without and with
the audit. Full text only (``embedder="none"``): page cost, not embedding cost.

    python benchmarks/ui_pages.py --n 100000

Writes ``benchmarks/results/ui_pages.json``; target: every page but the audit p50 <= 500 ms.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from search_scale_hybrid import HYBRID_VOCAB, Vocabulary, conversation, turn_record

HERE = Path(__file__).resolve().parent
TARGET_MS = 500.0


def build(home: Path, n: int, chunk: int, seed: int) -> dict[str, Any]:
    import soulpass
    from soulpass.server.keys import FileKeyStore

    acct = soulpass.open(home, embedder="none").account("big", create=True)
    t0 = time.perf_counter()
    made = 0
    for turns in conversation(n, Vocabulary.make(HYBRID_VOCAB, seed), seed, chunk):
        acct.bulk_append([turn_record(t) for t in turns])
        made += len(turns)
        print(f"  appended {made:,}/{n:,} ({time.perf_counter() - t0:.0f} s)", flush=True)
    sb = acct.create_sandbox("monday")
    turn = sb.add_turn("user", "I adopted a grey cat called Pixel")
    sb.add_fact(content="User lives in Lisbon", confidence=0.9)
    sb.add_journal("# Pixel\n\nA **grey** cat.", title="pixel")
    v1 = sb.archive()
    sb = acct.create_sandbox("tuesday")
    sb.add_fact(content="User lives in Porto", confidence=0.95)
    v2 = sb.archive()
    sb = acct.create_sandbox("wednesday")  # left open: the Sandboxes and review pages show it
    sb.add_turn("user", "We moved again, to Faro")
    sb.add_fact(content="User lives in Faro", confidence=0.95)
    sb.update_profile({"city": "Faro"})
    t1 = time.perf_counter()
    acct.search("grey cat", 5)  # the catalog catches up once, as a server's first search would
    key = FileKeyStore(home).create("big").secret
    return {"append_s": round(t1 - t0, 1), "index_s": round(time.perf_counter() - t1, 1), "key": key,
            "bulk_version": v1.version - 1, "small_version": v2.version, "turn": v1.plan.id_map[turn],
            "fact": v2.plan.added["fact"][0], "head": v2.version, "open_sandbox": sb.id}


def time_pages(home: Path, built: dict[str, Any], repeats: int, policy: str = "profile") -> dict[str, Any]:
    from fastapi.testclient import TestClient

    import soulpass
    from soulpass.consolidation.rules import ReviewRule, Rules
    from soulpass.server.app import create_app
    from soulpass.server.limits import ServerLimits

    pages = {
        "timeline": "/ui/a/big",
        "version (small)": f"/ui/a/big/v/{built['small_version']}",
        "version (bulk)": f"/ui/a/big/v/{built['bulk_version']}",
        "diff 0..HEAD": f"/ui/a/big/diff?a=0&b={built['head']}",
        "record": f"/ui/a/big/r/{built['turn']}",
        "fact": f"/ui/a/big/r/{built['fact']}",
        "search": "/ui/a/big/search?q=grey+cat+Pixel",
        "graph": "/ui/a/big/graph",
        "health": "/ui/a/big/health",
        "health + audit": "/ui/a/big/health?audit=1",
        "sandboxes": "/ui/a/big/sandboxes",
        "review": f"/ui/a/big/sandboxes/{built['open_sandbox']}",
    }
    rules = Rules(review=ReviewRule(profile=policy == "profile"))
    out: dict[str, Any] = {}
    limits = ServerLimits(rate=0, burst=0, failed_keys=0, quota_bytes=0)
    app = create_app(soulpass.open(home, embedder="none", rules=rules), limits=limits)
    with TestClient(app) as client:
        assert client.post("/ui/login", data={"key": built["key"]}, follow_redirects=False).status_code == 303
        for name, path in pages.items():
            times = []
            for i in range(repeats + 1):
                t = time.perf_counter()
                r = client.get(path)
                ms = (time.perf_counter() - t) * 1000
                if r.status_code != 200 or "X-Soulpass-Login" in r.headers:
                    raise SystemExit(f"{name}: {path} answered {r.status_code}")
                if i:  # the first load warms the pool's handles
                    times.append(ms)
            out[name] = {"p50_ms": round(statistics.median(times), 1),
                         "max_ms": round(max(times), 1), "bytes": len(r.content)}
            print(f"  {name:16s} p50 {out[name]['p50_ms']:8.1f} ms  max {out[name]['max_ms']:8.1f} ms  "
                  f"{len(r.content) / 1024:.0f} KiB", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--policy", choices=("profile", "none"), default="profile",
                    help="serve under the review policy 'the profile needs review', or none")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ui_pages.json")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sp-ui-pages-"))
    try:
        print(f"== building {args.n:,} turns", flush=True)
        built = build(work / "home", args.n, args.chunk, args.seed)
        print(f"  built: append {built['append_s']} s, index {built['index_s']} s", flush=True)
        pages = time_pages(work / "home", built, args.repeats, args.policy)
        worst = max(v["p50_ms"] for k, v in pages.items() if k != "health + audit")
        result = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "n": args.n, "chunk": args.chunk,
                  "repeats": args.repeats, "policy": args.policy, "target_p50_ms": TARGET_MS,
                  "build": {k: built[k] for k in ("append_s", "index_s")},
                  "pages": pages, "worst_p50_ms": worst, "pass": worst <= TARGET_MS}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}; slowest page p50 {worst:.0f} ms (target {TARGET_MS:.0f}): pass={result['pass']}")
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
