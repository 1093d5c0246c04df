#!/usr/bin/env python3
"""What each part of the retrieval plans (``soulpass.retrieval.plans``) carries, one at a time.

    .venv/bin/python benchmarks/plan_ablation.py --set locomo H1 ../shared/bench/locomo10.json \\
        --set beam H2 ../shared/bench/beam500k.json [--limit N] [--json benchmarks/results/plan_ablation.json]

Each ``--set NAME HOME DATA`` is a home that ``soulpass --home HOME bench locomo --data DATA`` has
ingested. Every search the plans make is asked of the index once and kept (the plans are pure
functions of the searches' hits), so each variant — the plain search, every plan, and every plan
with one of its parts switched off — is scored on the same searches: R@10 and NDCG@10 per set and
per category, and the paired question-by-question change against the plain search (better / worse).
No variant is fitted: the parts' constants are the module's.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import soulpass.retrieval.plans as plans
from soulpass.bench import locomo
from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.search import Hit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "plan_ablation.json"
K = max(locomo.KS)
# Variants: the constants of ``soulpass.retrieval.plans`` changed from the module's values.
VARIANTS: dict[str, dict[str, Any]] = {
    "plans": {},
    "no person": {"W_PERSON": 0.0},
    "no hop": {"W_HOP": 0.0},
    "no standing": {"W_STANDING": 0.0, "STANDING_MAX": 0},
    "no units": {"W_TOPIC": 0.0, "W_UNIT": 0.0},
}


class Memo:
    """The index's search, each distinct call asked once."""

    def __init__(self, index: plans.Searcher) -> None:
        self.index = index
        self.kept: dict[tuple[str, int, str], list[Hit]] = {}

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               extra: Sequence[CatalogRow] = ()) -> list[Hit]:
        key = (query, k, repr(filters))
        if key not in self.kept:
            self.kept[key] = self.index.search(query, k, filters, extra)
        return self.kept[key]


@contextmanager
def constants(values: dict[str, Any], module: ModuleType = plans) -> Iterator[None]:
    """``module``'s constants set to ``values`` for a while, restored afterwards."""
    saved = {name: getattr(module, name) for name in values}
    try:
        for name, value in values.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def main(argv: Sequence[str] | None = None) -> int:
    import soulpass
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"))
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N conversations of each set (and only those the home holds)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--latency", type=int, default=0, metavar="ROUNDS",
                        help="also time the plain and the planned search over the first conversation's questions")
    args = parser.parse_args(argv)
    filters = Filters(kinds=locomo.TURN_KINDS)
    report: dict[str, Any] = {"benchmark": "plan-ablation", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                              "limit": args.limit, "constants": {n: repr(getattr(plans, n)) for n in
                                                                 ("W_PERSON", "W_HOP", "W_STANDING", "DEPTH",
                                                                  "STANDING_MAX", "W_TOPIC", "W_UNIT",
                                                                  "UNIT_SESSIONS", "UNIT_TURNS")},
                              "sets": {}}
    for name, home, data in args.sets:
        sp = soulpass.open(Path(home))
        present = set(sp.accounts())  # the conversations the home holds (a benchmark run's --limit)
        conversations = [c for c in locomo.load(Path(data))[:args.limit] if locomo.account_name(c) in present]
        rows: dict[str, list[dict[str, Any]]] = {"plain": [], **{v: [] for v in VARIANTS}}
        for conv in conversations:
            account = sp.account(locomo.account_name(conv))
            try:
                memo = Memo(account.index())
                dia = locomo.dia_of(account)
                for q in conv.questions:
                    found = {"plain": memo.search(q.text, K, filters)}
                    for variant, values in VARIANTS.items():
                        with constants(values):
                            found[variant] = plans.planned_search(memo, q.text, K, filters)
                    for variant, hits in found.items():
                        rows[variant].append({"category": q.category, "evidence": list(q.evidence),
                                              "ranked": [dia.get(h.id, h.id) for h in hits]})
            finally:
                account.close()
        report["sets"][name] = _compare(rows)
        if args.latency and conversations:
            account = sp.account(locomo.account_name(conversations[0]))
            try:
                report["sets"][name]["latency"] = latency(account.index(), [q.text for q in conversations[0].questions],
                                                          args.latency)
            finally:
                account.close()
            print(f"{name}: latency {report['sets'][name]['latency']}")
        _print(name, report["sets"][name])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


def latency(index: plans.Searcher, questions: Sequence[str], rounds: int, k: int = 10) -> dict[str, float]:
    """p50 and p95 in ms of the plain search and of the planned one, top ``k``, in alternating
    passes over ``questions`` (each pass asks every question once: a pass longer than the query
    vector cache embeds every query again, as a first search does)."""
    filters = Filters(kinds=locomo.TURN_KINDS)
    times: dict[str, list[float]] = {"plain": [], "plans": []}
    for _ in range(rounds):
        for name in times:
            for q in questions:
                t0 = time.perf_counter()
                if name == "plain":
                    index.search(q, k, filters)
                else:
                    plans.planned_search(index, q, k, filters)
                times[name].append((time.perf_counter() - t0) * 1000)
    out = {}
    for name, values in times.items():
        ordered = sorted(values)
        out[f"{name}_p50_ms"] = round(ordered[len(ordered) // 2], 2)
        out[f"{name}_p95_ms"] = round(ordered[int(len(ordered) * 0.95)], 2)
    return out


def _compare(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    plain = [_per_question(r) for r in rows["plain"]]
    for variant, variant_rows in rows.items():
        scored = locomo.score(variant_rows)
        mine = [_per_question(r) for r in variant_rows]
        scored["paired_vs_plain"] = {"better": sum(m > p for m, p in zip(mine, plain, strict=True)),
                                     "worse": sum(m < p for m, p in zip(mine, plain, strict=True))}
        out[variant] = scored
    return out


def _per_question(row: dict[str, Any]) -> float:
    s = locomo.Scores()
    s.add(row["ranked"], row["evidence"])
    return s.recall[10][0] + s.ndcg[0] / 2


def _print(name: str, result: dict[str, Any]) -> None:
    result = {variant: r for variant, r in result.items() if variant != "latency"}
    print(f"{name}: {'variant':14} {'R@10':>7} {'NDCG@10':>8} {'better':>7} {'worse':>6}")
    for variant, r in result.items():
        o = r["overall"]
        print(f"{'':{len(name) + 2}}{variant:14} {o['recall@10']:>7.4f} {o['ndcg@10']:>8.4f} "
              f"{r['paired_vs_plain']['better']:>7} {r['paired_vs_plain']['worse']:>6}")
    cats = sorted({c for r in result.values() for c in r["per_category"]})
    for c in cats:
        print(f"  {c:22}" + " ".join(f"{v[:10]}={r['per_category'].get(c, {}).get('recall@10', 0):.3f}"
                                     for v, r in result.items()))


if __name__ == "__main__":
    raise SystemExit(main())
