#!/usr/bin/env python3
"""A question of several parts searched part by part, on top of the engine's search: cross-validated.

    PYTHONPATH=src python benchmarks/question_parts.py \\
        --set locomo H1 ../shared/bench/locomo10.json --set beam H2 ../shared/bench/beam500k.json \\
        [--fulltext] [--json benchmarks/results/question_parts.json]

A question that lists what it is about ("Given my X, my Y, and my Z, how should I …") is cut at
commas, semicolons and the words joining clauses into parts of at least ``MIN_WORDS`` topic words
(up to ``MAX_PARTS``; fewer than two parts: left alone). The engine's search (``governed_search``)
gives the best ``DEPTH``; each part is searched (top ``PART_K``) and its hits lifted by a weight
times their score there, scaled 0..1 (a hit new to the engine's search enters at its lowest score).
With ``--fulltext`` each part is searched by full text alone (the catalog's ``fts_search``: no
embedding, no fusion), a cheaper second search. The weight is chosen per fold among ``WEIGHTS``
(fold A: the conversations at even positions of each data file, B: the odd ones; both sets pooled)
and tested on the other fold. The homes are ones
``soulpass bench locomo`` ingested. Printed and written: per set, R@10 against the engine's search at
the same depth (weight 0), per category, the paired better / worse, how many questions have parts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import soulpass
from soulpass.bench.locomo import TURN_KINDS, account_name, dia_of
from soulpass.importers.locomo import read
from soulpass.index.catalog import Filters
from soulpass.retrieval.plans import governed_search
from soulpass.retrieval.words import topic_words

ROOT = Path(__file__).resolve().parents[1]
CUT = re.compile(r"\s*(?:[,;:]|\band\b|\bor\b|\bwhile\b|\bwhere\b)\s*", re.IGNORECASE)
MIN_WORDS, MAX_PARTS, DEPTH, PART_K = 2, 4, 50, 20
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)


def parts(question: str) -> list[str]:
    """The parts a question lists (none when it lists fewer than two)."""
    found = [p.strip(" ?.!") for p in CUT.split(question)]
    found = [p for p in found if len(topic_words(p)) >= MIN_WORDS]
    return found[:MAX_PARTS] if len(found) >= 2 else []


def searched(home: str, data: Path, fulltext: bool = False) -> list[dict[str, Any]]:
    """Every question of ``data``: its evidence, the engine's best ``DEPTH`` and each part's hits
    (by the engine's hybrid search, or by full text alone)."""
    conversations, _ = read(data)
    sp = soulpass.open(home)
    scope = Filters(kinds=TURN_KINDS)
    out = []
    for n, conv in enumerate(conversations):
        account = sp.account(account_name(conv))
        index, dia = account.index(), dia_of(account)
        for q in conv.questions:
            if fulltext:
                found = [[(dia.get(i, i), s) for i, s in index.catalog.fts_search(p, PART_K, scope)]
                         for p in parts(q.text)]
            else:
                found = [[(dia.get(h.id, h.id), h.score) for h in index.search(p, PART_K, scope)]
                         for p in parts(q.text)]
            out.append({"fold": n % 2, "category": q.category, "evidence": sorted(set(q.evidence)),
                        "base": [(dia.get(h.id, h.id), h.score) for h in governed_search(index, q.text, DEPTH, scope)],
                        "parts": found})
        account.close()
    return out


def top10(row: dict[str, Any], weight: float) -> list[str]:
    score = dict(row["base"])
    floor = min(score.values(), default=0.0)
    lift: dict[str, float] = defaultdict(float)
    for hits in row["parts"]:
        if hits:
            low, high = min(s for _, s in hits), max(s for _, s in hits)
            for dia, s in hits:
                lift[dia] = max(lift[dia], (s - low) / (high - low) if high > low else 1.0)
    for dia, v in lift.items():
        score[dia] = score.get(dia, floor) + weight * v
    return sorted(score, key=lambda d: (-score[d], d))[:10]


def recall(row: dict[str, Any], weight: float) -> float:
    return len(set(row["evidence"]) & set(top10(row, weight))) / len(row["evidence"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--set", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"))
    ap.add_argument("--fulltext", action="store_true", help="search each part by full text alone")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "question_parts.json")
    args = ap.parse_args(argv)
    rows = {name: searched(home, Path(data), args.fulltext) for name, home, data in args.set}
    chosen = {}
    for fold in (0, 1):  # fitted on this fold, pooled over the sets (each set weighed by its size)
        chosen[fold] = max(WEIGHTS, key=lambda w: sum(
            recall(r, w) / len(rs) for rs in rows.values() for r in rs if r["fold"] == fold))
    out: dict[str, Any] = {"weights_chosen": {"fitted on A": chosen[0], "fitted on B": chosen[1]},
                           "constants": {"min_words": MIN_WORDS, "max_parts": MAX_PARTS, "depth": DEPTH,
                                         "part_k": PART_K}, "parts_searched_by": "full text" if args.fulltext
                           else "the engine's hybrid search", "sets": {}}
    for name, rs in rows.items():
        cv = [recall(r, chosen[1 - r["fold"]]) for r in rs]
        base = [recall(r, 0.0) for r in rs]
        per: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for r, a, b in zip(rs, cv, base, strict=True):
            per[r["category"]][0] += b
            per[r["category"]][1] += a
            per[r["category"]][2] += 1
        result = {"questions": len(rs), "with_parts": sum(bool(r["parts"]) for r in rs),
                  "recall@10_engine_depth50": round(sum(base) / len(rs), 4),
                  "recall@10_cv": round(sum(cv) / len(rs), 4),
                  "better": sum(a > b for a, b in zip(cv, base, strict=True)),
                  "worse": sum(a < b for a, b in zip(cv, base, strict=True)),
                  "in_sample": {str(w): round(sum(recall(r, w) for r in rs) / len(rs), 4) for w in WEIGHTS},
                  "per_category": {str(c): {"before": round(v[0] / v[2], 3), "cv": round(v[1] / v[2], 3),
                                            "questions": int(v[2])} for c, v in sorted(per.items())}}
        out["sets"][name] = result
        print(f"{name}: R@10 {result['recall@10_engine_depth50']} -> {result['recall@10_cv']} (2-fold CV; "
              f"{result['better']} better, {result['worse']} worse; {result['with_parts']} of {len(rs)} with parts)")
    print(f"weights chosen: {out['weights_chosen']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
