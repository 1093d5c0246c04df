#!/usr/bin/env python3
"""The standing statements' lookup: a tag on few rows ranked among them, against the over-fetch paths.

    PYTHONPATH=src python benchmarks/tagged_lookup.py \\
        --set locomo H1 ../shared/bench/locomo10.json --set beam H2 ../shared/bench/beam500k.json \\
        [--warm] [--json benchmarks/results/tagged_lookup.json]

For most questions the engine's search (``governed_search``) looks up the standing statements with
a search filtered by their tags (``STANDING_TAGS``). A tag is on few rows, so that search now ranks
those rows outright: its full text from the question's matches, scored once and kept
(``FullTextSearch._fts5_among``; at most ``fulltext._FEW`` rows), its vectors by the rows' exact
cosines (``dense.few_tagged``; at most ``dense.FEW_TAGGED``). Before, a tag was a broad filter: the
best full-text matches and the nearest vectors were over-fetched and checked, widening until enough
passed, then the passing matches ranked in SQL again. Both limits set to 0 give that path back.

Every question of each set, in one process, is searched by the engine's search (top 20, turns
only, as ``soulpass bench locomo``) four times: before, after, after, before. Each time is cold (the
question embedded again and its full-text matches scored again, as for a new question) unless
``--warm``. The homes are ones ``soulpass bench locomo`` ingested. Printed and written: p50 and
mean of each path, their ratio, and how many top 20s are the same (ids and scores to 5 decimals).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plan_ablation import constants  # benchmarks/: on sys.path when run as a script

import soulpass
import soulpass.index.catalog.fulltext as fulltext
import soulpass.index.dense as dense
from soulpass.bench.locomo import TURN_KINDS, account_name
from soulpass.importers.locomo import read

ROOT = Path(__file__).resolve().parents[1]
K = 20
ORDER = (False, True, True, False)  # before, after, after, before: each path as often first as second


@contextmanager
def path(new: bool) -> Iterator[None]:
    """The lookup as it is (``new``), or the over-fetch paths (no tag is few)."""
    if new:
        yield
        return
    with constants({"_FEW": 0}, fulltext), constants({"FEW_TAGGED": 0}, dense):
        yield


def forget_query(index: Any) -> None:
    """The question's vector and full-text matches dropped, so that the next search pays for both."""
    index._search._query_vectors._kept.clear()
    index.catalog._full_text._matches = None


def timed(home: str, data: Path, warm: bool) -> dict[str, Any]:
    conversations, _ = read(data)
    sp = soulpass.open(home)
    took: dict[bool, list[float]] = {False: [], True: []}
    same = 0
    for conv in conversations:
        account = sp.account(account_name(conv))
        index = account.index()
        for q in conv.questions:
            account.search(q.text, K, kinds=TURN_KINDS)  # the account's files and model warm
            top: dict[bool, list[tuple[str, float]]] = {}
            for new in ORDER:
                with path(new):
                    if not warm:
                        forget_query(index)
                    start = time.perf_counter()
                    hits = account.search(q.text, K, kinds=TURN_KINDS)
                    took[new].append(time.perf_counter() - start)
                top[new] = [(h.id, round(h.score, 5)) for h in hits]
            same += top[False] == top[True]
        account.close()
    before, after = (sorted(took[new]) for new in (False, True))
    p50 = (statistics.median(before) * 1e3, statistics.median(after) * 1e3)
    mean = (statistics.fmean(before) * 1e3, statistics.fmean(after) * 1e3)
    return {"questions": len(before) // 2, "same_top20": same,
            "p50_ms": {"before": round(p50[0], 2), "after": round(p50[1], 2), "ratio": round(p50[1] / p50[0], 3)},
            "mean_ms": {"before": round(mean[0], 2), "after": round(mean[1], 2), "ratio": round(mean[1] / mean[0], 3)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--set", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"),
                   help="a set's name, the home `soulpass bench locomo` ingested it into, and its data file")
    p.add_argument("--warm", action="store_true", help="the question's vector and matches kept between searches")
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "tagged_lookup.json")
    args = p.parse_args(argv)
    sets = {}
    for name, home, data in args.set:
        sets[name] = got = timed(home, Path(data), args.warm)
        print(f"{name}: {got['questions']} questions, p50 {got['p50_ms']['before']} -> {got['p50_ms']['after']} ms"
              f" (x{got['p50_ms']['ratio']}), mean {got['mean_ms']['before']} -> {got['mean_ms']['after']} ms"
              f" (x{got['mean_ms']['ratio']}); same top {K}: {got['same_top20']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "tagged-lookup", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": {"python": platform.python_version(), "processor": platform.processor(),
                          "cpus": len(os.sched_getaffinity(0))},
              "k": K, "cold": not args.warm, "few": fulltext._FEW, "few_tagged": dense.FEW_TAGGED, "sets": sets}
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
