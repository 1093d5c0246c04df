#!/usr/bin/env python3
"""Session units (``soulpass.retrieval.units``) for order and summary questions: what they carry,
two-fold cross-validated by conversation.

    .venv/bin/python benchmarks/session_units.py --set locomo H1 ../shared/bench/locomo10.json \\
        --set beam H2 ../shared/bench/beam500k.json [--latency 2] [--json benchmarks/results/session_units.json]

Each ``--set NAME HOME DATA`` is a home that ``soulpass --home HOME bench locomo --data DATA`` has
ingested. Every search is asked of the index once (``plan_ablation.Memo``); each point of ``GRID``
(the units' constants of ``soulpass.retrieval.plans``) ranks every question by ``planned_search``.
Fit: the point with the best objective (R@10 + NDCG@10 / 2, averaged over the sets) on fold A
(conversations at even positions of each data file) of both sets together is tested on fold B, and
the other way round: the headline. In-sample: the point best on everything. Reported beside the
plain search and the plans without units (``W_TOPIC = W_UNIT = 0``): R@10 and NDCG@10 per set and
category, and the paired question-by-question change (better / worse) against the plain search.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import soulpass
import soulpass.retrieval.plans as plans
from soulpass.bench import locomo
from soulpass.index.catalog import Filters
from soulpass.retrieval import Shape

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_ablation import Memo, constants, latency

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "session_units.json"
K = max(locomo.KS)
NO_UNITS = {"W_TOPIC": 0.0, "W_UNIT": 0.0}
GRID: dict[str, Sequence[Any]] = {
    "W_TOPIC": (0.0, 1.0, 2.0, 4.0),
    "W_UNIT": (0.0, 2.0, 4.0, 8.0),
    "UNIT_SESSIONS": (3, 5, 8),
    "UNIT_TURNS": (1, 2),
    "OWN_TURNS_SHAPES": ((), (Shape.ORDER,)),
}

Row = dict[str, Any]


class Opened(NamedTuple):
    """A set's conversations that a home holds, opened (``opened_set``)."""

    accounts: list[Any]
    conversations: list[Any]
    memos: list[tuple[Memo, dict[str, str], Any]]


def points(grid: dict[str, Sequence[Any]] | None = None) -> list[dict[str, Any]]:
    """Every point of ``grid`` (each constant's values crossed; None: ``GRID`` as it is when called)."""
    grid = GRID if grid is None else grid
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


@contextmanager
def opened_set(home: str, data: str, limit: int | None = None) -> Iterator[Opened]:
    """The conversations of ``data`` (its first ``limit``) that ``home`` holds, each one's account
    and its memo (``Memo`` over its index, its dialog ids, the conversation); closed afterwards."""
    sp = soulpass.open(Path(home))
    present = set(sp.accounts())
    conversations = [c for c in locomo.load(Path(data))[:limit] if locomo.account_name(c) in present]
    accounts = [sp.account(locomo.account_name(c)) for c in conversations]
    try:
        yield Opened(accounts, conversations,
                     [(Memo(a.index()), locomo.dia_of(a), c) for a, c in zip(accounts, conversations, strict=True)])
    finally:
        for a in accounts:
            a.close()


def ranked(memos: list[tuple[Any, dict[str, str], Any]], values: dict[str, Any] | None,
           base: Sequence[Row] | None = None) -> list[Row]:
    """One row per question (its conversation's position, category, evidence, ranked dialog ids)
    under the plans with ``values``; ``None`` values: the plain search. With ``base`` (the rows of
    another point), a question without session units keeps its row there: the units' constants
    cannot move it."""
    filters = Filters(kinds=locomo.TURN_KINDS)
    rows: list[Row] = []
    with constants(values or {}):
        for n, (memo, dia, conv) in enumerate(memos):
            for q in conv.questions:
                if base is not None and not plans.plan_for(plans.analyse(q.text)).topic:
                    rows.append(base[len(rows)])
                    continue
                hits = memo.search(q.text, K, filters) if values is None else plans.planned_search(memo, q.text, K,
                                                                                                    filters)
                rows.append({"conversation": n, "category": q.category, "evidence": list(q.evidence),
                             "ranked": [dia.get(h.id, h.id) for h in hits]})
    return rows


def objective(rows: Sequence[Row]) -> float:
    if not rows:
        return 0.0
    o = locomo.score(rows)["overall"]
    return float(o["recall@10"] + o["ndcg@10"] / 2)


def _value(row: Row) -> float:
    s = locomo.Scores()
    s.add(row["ranked"], row["evidence"])
    return s.recall[10][0] + s.ndcg[0] / 2


def paired(mine: Sequence[Row], plain: Sequence[Row]) -> dict[str, int]:
    a, b = [_value(r) for r in mine], [_value(r) for r in plain]
    return {"better": sum(x > y for x, y in zip(a, b, strict=True)),
            "worse": sum(x < y for x, y in zip(a, b, strict=True))}


def report(rows: Sequence[Row], plain: Sequence[Row]) -> dict[str, Any]:
    return {**locomo.score(rows), "paired_vs_plain": paired(rows, plain)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"))
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations of each set")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--latency", type=int, default=0, metavar="ROUNDS",
                        help="also time the plain and the planned search over each set's order and summary questions")
    args = parser.parse_args(argv)
    grid = points()
    by_set: dict[str, dict[str, Any]] = {}
    for name, home, data in args.sets:
        with opened_set(home, data, args.limit) as opened:
            plain = ranked(opened.memos, None)
            no_units = ranked(opened.memos, NO_UNITS)
            runs = [ranked(opened.memos, p, no_units) for p in grid]
            print(f"{name}: {len(plain)} questions, {len(grid)} points", file=sys.stderr, flush=True)
            timing = None
            if args.latency:
                asked = [q.text for c in opened.conversations[:1] for q in c.questions
                         if plans.plan_for(plans.analyse(q.text)).topic]
                timing = latency(opened.accounts[0].index(), asked, args.latency) if asked else None
        by_set[name] = {"plain": plain, "runs": runs, "no_units": no_units, "latency": timing}
    out = fit_and_test(grid, by_set)
    out.update(benchmark="session-units", date=datetime.now(UTC).isoformat(timespec="seconds"), limit=args.limit,
               grid={k: [repr(v) for v in vs] for k, vs in GRID.items()},
               data={name: data for name, _home, data in args.sets})
    _print(out)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1, default=repr) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


def fold(rows: Sequence[Row], parity: int) -> list[Row]:
    """The rows of one fold: the conversations at even (0) or odd (1) positions of each data file."""
    return [r for r in rows if r["conversation"] % 2 == parity]


def best_point(points: int, by_set: dict[str, dict[str, Any]], parity: int | None) -> int:
    """The grid point (an index into each set's ``runs``) with the best objective averaged over the
    sets, on one fold (``parity``) or on everything (None); ties: the earlier (smaller) point."""
    def mean(i: int) -> float:
        chosen = [s["runs"][i] if parity is None else fold(s["runs"][i], parity) for s in by_set.values()]
        return sum(objective(c) for c in chosen) / len(chosen)
    return max(range(points), key=lambda i: (mean(i), -i))


def fit_and_test(grid: list[dict[str, Any]], by_set: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Two-fold cross-validation by conversation over the sets together (the headline), and the
    in-sample best point, each scored against the plain search and the plans without units."""
    chosen = {0: best_point(len(grid), by_set, 0), 1: best_point(len(grid), by_set, 1)}
    in_sample = best_point(len(grid), by_set, None)
    out: dict[str, Any] = {"folds": {"A->B": grid[chosen[0]], "B->A": grid[chosen[1]]}, "in_sample": grid[in_sample],
                           "sets": {}}
    for name, s in by_set.items():
        cv = [r for parity in (0, 1) for r in fold(s["runs"][chosen[parity]], 1 - parity)]
        plain_cv = [r for parity in (0, 1) for r in fold(s["plain"], 1 - parity)]  # the same order as cv
        no_units_cv = [r for parity in (0, 1) for r in fold(s["no_units"], 1 - parity)]
        out["sets"][name] = {"plain": report(s["plain"], s["plain"]),
                             "plans_without_units": report(s["no_units"], s["plain"]),
                             "cv": report(cv, plain_cv), "cv_vs_plans_without_units": paired(cv, no_units_cv),
                             "in_sample": report(s["runs"][in_sample], s["plain"]), "latency": s["latency"]}
    return out


def _print(out: dict[str, Any]) -> None:
    print(f"folds: {out['folds']}\nin sample: {out['in_sample']}")
    for name, s in out["sets"].items():
        print(f"{name}: {'variant':22} {'R@10':>7} {'NDCG@10':>8} {'better':>7} {'worse':>6}")
        for variant in ("plain", "plans_without_units", "cv", "in_sample"):
            r = s[variant]
            print(f"{'':{len(name) + 2}}{variant:22} {r['overall']['recall@10']:>7.4f} {r['overall']['ndcg@10']:>8.4f} "
                  f"{r['paired_vs_plain']['better']:>7} {r['paired_vs_plain']['worse']:>6}")
        for c in s["plain"]["per_category"]:
            print(f"  {c:22}" + " ".join(f"{v[:10]}={s[v]['per_category'][c]['recall@10']:.3f}"
                                         for v in ("plain", "plans_without_units", "cv", "in_sample")))
        if s["latency"]:
            print(f"  latency (order and summary questions): {s['latency']}")


if __name__ == "__main__":
    raise SystemExit(main())
