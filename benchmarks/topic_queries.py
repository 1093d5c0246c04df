#!/usr/bin/env python3
"""A summary or an order asked outright, searched by its topic: the engine's search against variants.

    PYTHONPATH=src python benchmarks/topic_queries.py \\
        --set locomo H1 ../shared/bench/locomo10.json --set beam H2 ../shared/bench/beam500k.json \\
        [--json benchmarks/results/topic_queries.json]

The engine's search (``governed_search``) asks a question whose answer spans a topic across the
conversation (``QueryAnalysis.across``: a summary, an order asked outright) by its topic
(``topic_query``) when that has at least ``TOPIC_WORDS`` words. Every question of each set is
searched under each variant below (top 20, turns only, as ``soulpass bench locomo``):

- ``engine``: the engine's search as it is;
- ``asked``: every question asked as written (the engine before the topic);
- ``every_order``: the topic for every order and summary, one event placed against another too;
- ``every_question``: the topic for every question;
- ``one_topic_word``: ``TOPIC_WORDS`` 1 (a topic of one word stands for the question too);
- ``own_turns``: as ``engine``, and an order asked outright in the first person searched among the
  user's own turns only ("in which order did I bring up ...");
- ``one_per_session``: as ``engine``, and the hits of an order asked outright taken one per session
  first (the best 50), then the rest in score order.

Nothing here is fitted: the ranking weights are the module's. The homes are ones ``soulpass bench
locomo`` ingested. Printed and written: per set and variant, R@10 and NDCG@10 overall and per
category, and the paired better / worse against ``asked``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plan_ablation import constants  # benchmarks/: on sys.path when run as a script

import soulpass
import soulpass.retrieval.plans as plans
from soulpass.bench.locomo import CATEGORIES, TURN_KINDS, account_name, dia_of
from soulpass.importers.locomo import read
from soulpass.index.catalog import Filters
from soulpass.index.search import Hit
from soulpass.retrieval import Shape, analyse

ROOT = Path(__file__).resolve().parents[1]
K, DEPTH = 20, 50
Variant = Callable[[Any, str], list[Hit]]
SCOPE = Filters(kinds=TURN_KINDS)


_topic = plans.topic_to_ask


def engine(index: Any, question: str) -> list[Hit]:
    return plans.governed_search(index, question, K, SCOPE)


def asked(index: Any, question: str) -> list[Hit]:
    with constants({"TOPIC_WORDS": sys.maxsize}, plans):
        return plans.governed_search(index, question, K, SCOPE)


def every_order(index: Any, question: str) -> list[Hit]:
    topic = _topic(question)
    if analyse(question).shape in (Shape.ORDER, Shape.SUMMARY) and topic:
        return plans.governed_search(index, topic, K, SCOPE)
    return asked(index, question)


def every_question(index: Any, question: str) -> list[Hit]:
    return plans.governed_search(index, _topic(question) or question, K, SCOPE)


def one_topic_word(index: Any, question: str) -> list[Hit]:
    with constants({"TOPIC_WORDS": 1}, plans):
        return plans.governed_search(index, question, K, SCOPE)


def _outright_order(question: str) -> bool:
    reading = analyse(question)
    return reading.across and reading.shape is Shape.ORDER and bool(_topic(question))


def own_turns(index: Any, question: str) -> list[Hit]:
    if _outright_order(question) and analyse(question).user:
        return plans.governed_search(index, question, K, Filters(kinds=(plans.OWN_KIND,)))
    return engine(index, question)


def one_per_session(index: Any, question: str) -> list[Hit]:
    if not _outright_order(question):
        return engine(index, question)
    hits = plans.governed_search(index, question, DEPTH, SCOPE)
    seen: set[str | None] = set()
    first, rest = [], []
    for h in hits:
        session = h.row.session_id if h.row is not None else None
        (rest if session is not None and session in seen else first).append(h)
        seen.add(session)
    return (first + rest)[:K]


VARIANTS: dict[str, Variant] = {"engine": engine, "asked": asked, "every_order": every_order,
                                "every_question": every_question, "one_topic_word": one_topic_word,
                                "own_turns": own_turns, "one_per_session": one_per_session}


def searched(home: str, data: Path, variants: dict[str, Variant]) -> list[dict[str, Any]]:
    """Every question of ``data`` with its evidence and each variant's ranked dialog ids."""
    conversations, _ = read(data)
    sp = soulpass.open(home)
    out = []
    for conv in conversations:
        account = sp.account(account_name(conv))
        index, dia = account.index(), dia_of(account)
        for q in conv.questions:
            row: dict[str, Any] = {"category": q.category, "evidence": sorted(set(q.evidence))}
            for name, search in variants.items():
                row[name] = [dia.get(h.id, h.id) for h in search(index, q.text)]
            out.append(row)
        print(f"  {data.name}: {conv.sample_id}", file=sys.stderr)
    return out


def recall(ranked: list[str], evidence: list[str]) -> float:
    return len(set(evidence) & set(ranked[:10])) / len(evidence)


def ndcg(ranked: list[str], evidence: list[str]) -> float:
    gain = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in set(evidence))
    return gain / sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))


def scored(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """R@10 and NDCG@10 of variant ``name`` overall and per category, paired against ``asked``."""
    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 4) if values else 0.0

    per: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        per.setdefault(f"{row['category']} {CATEGORIES.get(row['category'], '?')}", []).append(row)
    paired = Counter("better" if recall(r[name], r["evidence"]) > recall(r["asked"], r["evidence"]) else
                     "worse" if recall(r[name], r["evidence"]) < recall(r["asked"], r["evidence"]) else "same"
                     for r in rows)
    return {"recall@10": mean([recall(r[name], r["evidence"]) for r in rows]),
            "ndcg@10": mean([ndcg(r[name], r["evidence"]) for r in rows]),
            "better": paired["better"], "worse": paired["worse"],
            "per_category": {c: {"recall@10": mean([recall(r[name], r["evidence"]) for r in rs]),
                                 "ndcg@10": mean([ndcg(r[name], r["evidence"]) for r in rs]), "questions": len(rs)}
                             for c, rs in sorted(per.items())}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--set", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"),
                   help="a set's name, the home `soulpass bench locomo` ingested it into, and its data file")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated (always with `asked`)")
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "topic_queries.json")
    args = p.parse_args(argv)
    names = ["asked", *(v for v in args.variants.split(",") if v and v != "asked")]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        p.error(f"unknown variants: {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    chosen = {n: VARIANTS[n] for n in names}
    sets: dict[str, Any] = {}
    for name, home, data in args.set:
        rows = searched(home, Path(data), chosen)
        sets[name] = {"questions": len(rows), "variants": {v: scored(rows, v) for v in chosen}}
        for v, s in sets[name]["variants"].items():
            print(f"{name}: {v:16s} R@10 {s['recall@10']:.4f} NDCG@10 {s['ndcg@10']:.4f}"
                  f" (against asked: {s['better']} better, {s['worse']} worse)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "topic-queries", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": {"python": platform.python_version(), "processor": platform.processor()},
              "k": K, "topic_words": plans.TOPIC_WORDS, "sets": sets}
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
