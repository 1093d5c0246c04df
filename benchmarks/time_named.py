#!/usr/bin/env python3
"""The ``when`` part of the engine's search (``soulpass.retrieval.plans``): a question that names a
time ("What did she paint in July 2023?") has what was said then lifted. Two-fold cross-validated
by conversation.

    .venv/bin/python benchmarks/time_named.py --set locomo H1 ../shared/bench/locomo10.json \\
        --set beam H2 ../shared/bench/beam500k.json [--latency 2] [--json benchmarks/results/time_named.json]

Each ``--set NAME HOME DATA`` is a home that ``soulpass --home HOME bench locomo --data DATA`` has
ingested (a home may hold some of the file's conversations: those are scored). Every search is
asked of the index once (``plan_ablation.Memo``); each point of ``GRID`` (the part's weight and its
window) ranks every question by the engine's search (``governed_search``); a question that names no
time is searched as before by construction and keeps the row of the search without the part
(``W_WHEN`` 0). Fit: the point with the best objective (R@10 + NDCG@10 / 2, averaged over the
sets) on fold A (conversations at even positions of each data file) of both sets together is tested
on fold B, and the other way round: the headline, reported beside the in-sample best point and the
search without the part, per set and category, with the paired question-by-question change. The
result's ``folds`` are what ``benchmarks/search_cv.py --plans-fit`` reads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import soulpass.retrieval.plans as plans
from soulpass.bench import locomo
from soulpass.index.catalog import Filters
from soulpass.retrieval import analyse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_ablation import constants
from session_units import best_point, fold, opened_set, points, report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "time_named.json"
K = max(locomo.KS)
WITHOUT = {"W_WHEN": 0.0}
GRID: dict[str, Sequence[Any]] = {
    "W_WHEN": (2.0, 4.0, 8.0, 16.0),
    "WHEN_BEFORE": (timedelta(0), timedelta(days=7)),
    "WHEN_AFTER": (timedelta(0), timedelta(days=7), timedelta(days=30)),
}

Row = dict[str, Any]


def names_time(question: str) -> bool:
    return bool(analyse(question).when)


def ranked(memos: list[tuple[Any, dict[str, str], Any]], values: dict[str, Any],
           base: Sequence[Row] | None = None) -> list[Row]:
    """One row per question under the engine's search with ``values``; with ``base``, a question
    that names no time keeps its row there."""
    filters = Filters(kinds=locomo.TURN_KINDS)
    rows: list[Row] = []
    with constants(values):
        for n, (memo, dia, conv) in enumerate(memos):
            for q in conv.questions:
                timed = names_time(q.text)
                if base is not None and not timed:
                    rows.append(base[len(rows)])
                    continue
                hits = plans.governed_search(memo, q.text, K, filters)
                rows.append({"conversation": n, "category": q.category, "evidence": list(q.evidence),
                             "ranked": [dia.get(h.id, h.id) for h in hits], "names_time": timed})
    return rows


def latency(index: Any, questions: Sequence[str], rounds: int) -> dict[str, float]:
    """p50 / mean ms of the engine's search over ``questions`` without and with the part (the index
    itself, no memo), alternating by round."""
    filters = Filters(kinds=locomo.TURN_KINDS)
    times: dict[str, list[float]] = {"without": [], "with": []}
    for r in range(rounds):
        for variant in (("without", "with") if r % 2 == 0 else ("with", "without")):
            with constants(WITHOUT if variant == "without" else {}):
                for q in questions:
                    t0 = time.perf_counter()
                    plans.governed_search(index, q, K, filters)
                    times[variant].append((time.perf_counter() - t0) * 1000)
    return {f"{v}_{stat}": round(sorted(t)[len(t) // 2] if stat == "p50" else sum(t) / len(t), 2)
            for v, t in times.items() for stat in ("p50", "mean")}


def fit_and_test(grid: list[dict[str, Any]], by_set: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each fold's best point tested on the other fold (the headline) and the in-sample best point,
    scored against the search without the part (``session_units``' fit)."""
    chosen = {0: best_point(len(grid), by_set, 0), 1: best_point(len(grid), by_set, 1)}
    in_sample = best_point(len(grid), by_set, None)
    out: dict[str, Any] = {"folds": {"A->B": grid[chosen[0]], "B->A": grid[chosen[1]]}, "in_sample": grid[in_sample],
                           "sets": {}}
    for name, s in by_set.items():
        cv = [r for parity in (0, 1) for r in fold(s["runs"][chosen[parity]], 1 - parity)]
        without_cv = [r for parity in (0, 1) for r in fold(s["without"], 1 - parity)]  # the same order as cv
        timed = [i for i, r in enumerate(cv) if r["names_time"]]
        naming = {"questions": len(timed), "without": None, "cv": None}
        if timed:
            naming.update(without=locomo.score([without_cv[i] for i in timed])["overall"],
                          cv=locomo.score([cv[i] for i in timed])["overall"])
        out["sets"][name] = {"without": report(s["without"], s["without"]), "cv": report(cv, without_cv),
                             "in_sample": report(s["runs"][in_sample], s["without"]), "naming_a_time": naming,
                             "latency": s["latency"]}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"))
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--latency", type=int, default=0, metavar="ROUNDS",
                        help="also time the search without and with the part over the questions naming a time")
    args = parser.parse_args(argv)
    grid = points(GRID)
    by_set: dict[str, dict[str, Any]] = {}
    for name, home, data in args.sets:
        with opened_set(home, data) as opened:
            without = ranked(opened.memos, WITHOUT)
            runs = [ranked(opened.memos, p, without) for p in grid]
            print(f"{name}: {len(without)} questions, {sum(r['names_time'] for r in without)} naming a time, "
                  f"{len(grid)} points", file=sys.stderr, flush=True)
            timing = None
            if args.latency:
                asked = [(a, q.text) for a, c in zip(opened.accounts, opened.conversations, strict=True)
                         for q in c.questions if names_time(q.text)]
                first = asked[0][0] if asked else None
                timing = latency(first.index(), [q for a, q in asked if a is first], args.latency) if first else None
        by_set[name] = {"without": without, "runs": runs, "latency": timing}
    out = fit_and_test(grid, by_set)
    out.update(benchmark="time-named", date=datetime.now(UTC).isoformat(timespec="seconds"),
               grid={k: [repr(v) for v in vs] for k, vs in GRID.items()},
               data={name: data for name, _home, data in args.sets})
    _print(out)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1, default=_plain) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


def _plain(value: Any) -> Any:
    """JSON for a constant: a window in days (what ``search_cv.py --plans-fit`` reads back)."""
    return {"days": value.days} if isinstance(value, timedelta) else repr(value)


def _print(out: dict[str, Any]) -> None:
    print(f"folds: {out['folds']}\nin sample: {out['in_sample']}")
    for name, s in out["sets"].items():
        print(f"{name}: {'variant':12} {'R@10':>7} {'NDCG@10':>8} {'better':>7} {'worse':>6}")
        for variant in ("without", "cv", "in_sample"):
            r = s[variant]
            print(f"{'':{len(name) + 2}}{variant:12} {r['overall']['recall@10']:>7.4f} {r['overall']['ndcg@10']:>8.4f} "
                  f"{r['paired_vs_plain']['better']:>7} {r['paired_vs_plain']['worse']:>6}")
        t = s["naming_a_time"]
        if t["questions"]:
            print(f"  naming a time ({t['questions']} q): R@10 {t['without']['recall@10']} -> {t['cv']['recall@10']}, "
                  f"NDCG@10 {t['without']['ndcg@10']} -> {t['cv']['ndcg@10']} (CV)")
        for c in s["without"]["per_category"]:
            print(f"  {c:22}" + " ".join(f"{v}={s[v]['per_category'][c]['recall@10']:.3f}"
                                         for v in ("without", "cv", "in_sample")))
        if s["latency"]:
            print(f"  latency (questions naming a time, first conversation): {s['latency']}")


if __name__ == "__main__":
    raise SystemExit(main())
