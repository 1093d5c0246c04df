"""What the memory browser's review badge costs each page: ``Account.awaiting_review()`` (which
plans every open sandbox when a review policy is set) on a large account, with and without the
policy "the profile needs review".

Builds the account of ``benchmarks/ui_pages.py`` (``--n`` turns, two archives, one sandbox left
open with a turn, a fact and a profile change), then times ``awaiting_review()`` ``--repeats``
times per round, alternating no policy and the policy over ``--rounds`` rounds.

    python benchmarks/review_badge.py --n 100000

Writes ``benchmarks/results/review_badge.json``.
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

from ui_pages import build

HERE = Path(__file__).resolve().parent


def time_badge(home: Path, policy: bool, repeats: int) -> dict[str, Any]:
    import soulpass
    from soulpass.consolidation.rules import ReviewRule, Rules

    acct = soulpass.open(home, embedder="none", rules=Rules(review=ReviewRule(profile=policy))).account("big")
    acct.awaiting_review()  # the first call opens the account's handles
    times, waiting = [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        waiting = len(acct.awaiting_review())
        times.append((time.perf_counter() - t) * 1000)
    return {"policy": "profile" if policy else "none", "awaiting": waiting,
            "p50_ms": round(statistics.median(times), 2), "max_ms": round(max(times), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "review_badge.json")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sp-review-badge-"))
    try:
        print(f"== building {args.n:,} turns", flush=True)
        build(work / "home", args.n, args.chunk, args.seed)
        rounds = []
        for _ in range(args.rounds):
            for policy in (False, True):
                rounds.append(time_badge(work / "home", policy, args.repeats))
                print(f"  policy {rounds[-1]['policy']:8s} awaiting {rounds[-1]['awaiting']}  "
                      f"p50 {rounds[-1]['p50_ms']:7.2f} ms  max {rounds[-1]['max_ms']:7.2f} ms", flush=True)
        result = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "n": args.n, "repeats": args.repeats,
                  "open_sandboxes": 1, "rounds": rounds}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
