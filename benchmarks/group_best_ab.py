"""Does ``GroupBest`` pay? A paired A/B inside one process: every LoCoMo question searched with the
grouped dense path on and off, in alternating order, on the accounts ``search_ab.py`` built.

Each question is searched once first, so its query vector is kept and both sides time the search
without the embedding (the part the grouped path changes); the saving is then set against the
end-to-end p50 that ``search_ab.py`` measures (a cache or class stays when it pays >= 5% of it).

    python benchmarks/group_best_ab.py --workdir /tmp/sp-ab --rounds 3
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import soulpass
from soulpass.bench.locomo import TURN_KINDS
from soulpass.index.dense import LocalDense


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--workdir", type=Path, required=True, help="a --workdir search_ab.py built and kept")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    plain = json.loads((args.workdir / "locomo-plain.json").read_text("utf-8"))
    sp = soulpass.open(args.workdir / "soulpass")
    accounts = {c["id"]: sp.account("locomo-" + re.sub(r"[^A-Za-z0-9_-]", "-", c["id"]))
                for c in plain["conversations"]}
    for c in plain["conversations"]:  # every query vector made once, and kept
        for q in c["questions"]:
            accounts[c["id"]].search(q["text"], 10, kinds=TURN_KINDS)
    on: list[float] = []
    off: list[float] = []
    for round_no in range(args.rounds):
        for c in plain["conversations"]:
            acct = accounts[c["id"]]
            dense = acct.index().dense
            assert isinstance(dense, LocalDense)
            groups = dense._groups
            for n, q in enumerate(c["questions"]):
                for use in ((True, False) if (n + round_no) % 2 == 0 else (False, True)):
                    dense._groups = groups if use else None
                    t0 = time.perf_counter()
                    acct.search(q["text"], 10, kinds=TURN_KINDS)
                    (on if use else off).append((time.perf_counter() - t0) * 1000)
            dense._groups = groups
    saved = statistics.median(b - a for a, b in zip(on, off, strict=True))
    print(f"grouped on : p50 {statistics.median(on):.3f} ms\ngrouped off: p50 {statistics.median(off):.3f} ms\n"
          f"saved per search (paired median): {saved:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
