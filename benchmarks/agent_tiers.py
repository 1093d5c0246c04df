"""Time the agent tiers: log appends, hot(), context() and the scribe as the working log grows.

    python benchmarks/agent_tiers.py [--sizes 100,1000,5000] [--repeats 5] [--embedder none|minilm]

For each size a fresh sandbox gets that many log entries (two agents, no scribing: the worst case
for reading the buffer), then ``hot()``, ``context()`` (budget 2000, a clipboard of 3 items) and one
``scribe()`` of everything but the hot window are timed. Prints a table and writes
``benchmarks/results/agent_tiers.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import soulpass
from soulpass.agent import AgentConfig, AgentMemory

__all__ = ["main", "measure"]


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def measure(size: int, repeats: int, embedder: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as home:
        sp = soulpass.open(home, embedder="auto" if embedder == "minilm" else "none")
        acct = sp.account("bench", create=True)
        mem = AgentMemory(acct.create_sandbox("bench"), config=AgentConfig(log_limit=10 * size))
        for item in ("customer is ACME", "deploy on Tuesdays", "db-2 is fragile"):
            mem.clipboard_add("pro", item)
        t0 = time.perf_counter()
        for i in range(size):
            agent = "pro" if i % 2 else "flash"
            mem.log(agent, f"entry {i}: working on ticket OPS-{i % 97} for the billing migration",
                    kind="outcome" if i % 3 == 0 else "intent")
        append_s = time.perf_counter() - t0
        hot, ctx = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            mem.hot()
            hot.append(time.perf_counter() - t)
            t = time.perf_counter()
            mem.context("pro", "what is the state of the billing migration?", 2000)
            ctx.append(time.perf_counter() - t)
        t = time.perf_counter()
        mem.scribe()
        scribe_s = time.perf_counter() - t
        acct.close()
    return {"entries": size, "append_per_s": round(size / append_s, 1), "hot_ms": _ms(hot),
            "context_ms": _ms(ctx), "scribe_ms": round(scribe_s * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--embedder", choices=["none", "minilm"], default="none")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "agent_tiers.json")
    args = ap.parse_args()
    rows = [measure(int(s), args.repeats, args.embedder) for s in args.sizes.split(",")]
    print(f"{'entries':>8} {'append/s':>9} {'hot ms':>8} {'context ms':>11} {'scribe ms':>10}")
    for r in rows:
        print(f"{r['entries']:>8} {r['append_per_s']:>9} {r['hot_ms']:>8} {r['context_ms']:>11} {r['scribe_ms']:>10}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"embedder": args.embedder, "repeats": args.repeats, "rows": rows}, indent=2) + "\n",
                        encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
