#!/usr/bin/env python3
"""Late interaction as a first stage: what the best turns by MaxSim over a whole conversation add to
a search's candidates and to its top 10 (issue 42, item 3: where late interaction belongs).

    PYTHONPATH=src python benchmarks/late_first_stage.py --set locomo H ../shared/bench/locomo10.json \\
        [--limit N] [--json benchmarks/results/late_first_stage.json]

Each ``--set NAME HOME DATA`` is a data set and a home ``soulpass bench locomo`` ingested it into (as
``benchmarks/retrieval_fit.py``); nothing is written there. Every turn of each conversation is encoded
once (answerai-colbert-small-v1, ``soulpass.embed.colbert``: what a store of token vectors would
hold), and every question is scored against all of them. Per set:

- ``pool``: the share of the evidence turns among the search's candidates
  (``AccountIndex.candidates``, as ``retrieval_fit.prepare``), and with the best ``--late-depth``
  turns by MaxSim added;
- ``late_alone``: R@10 and R@50 of the MaxSim ranking over the whole conversation;
- ``fused``: R@10 and NDCG@10 of one ranking over the candidates (and, with ``late_depth`` above 0,
  the late stage's best turns): the production score standardised over the candidates (a turn only
  the late stage found takes the lowest), plus ``weight`` x the turn's MaxSim standardised over the
  conversation; weight 0 is the plain ranking. A grid, not a fit: the question is whether the turns
  the late stage adds reach the top 10 at any weight;
- ``misses``: per category, where each evidence turn stands in the plain ranking (top 10, 11-20,
  21-50, past 50 among the candidates, not a candidate).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import retrieval_fit as fit

from soulpass.bench import locomo
from soulpass.embed.colbert import ColbertEncoder, max_sims
from soulpass.index.recipe import embed_text

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "late_first_stage.json"
WEIGHTS = (0.0, 0.3, 0.5, 0.8, 1.2)
LATE_DEPTHS = (0, 20, 50)


def scored(home: Path, conversations: Sequence[locomo.Conversation], encoder: ColbertEncoder,
           ) -> list[dict[str, Any]]:
    """Every question with evidence: its plain ranking with scores, and every turn's MaxSim."""
    _, accounts = fit.open_accounts(home, conversations)
    out: list[dict[str, Any]] = []
    try:
        for account, conv in zip(accounts, conversations, strict=True):
            index = account.index()
            dia = locomo.dia_of(account)
            rows = index.catalog.get(sorted(dia))
            tokens = encoder.encode_texts([embed_text(r) for r in rows])
            for q in conv.questions:
                if not q.evidence:
                    continue
                found = fit.candidates(index, q.text)
                ranked = found.scores.rank(found.sessions, found.links, dense=found.dense)
                out.append({"category": q.category, "evidence": list(q.evidence), "dia": dia,
                            "ranked": [(rid, parts["score"]) for rid, parts in ranked],
                            "turns": [r.id for r in rows],
                            "late": np.asarray(max_sims(encoder.encode_query(q.text), tokens))})
            print(f"  {conv.sample_id}: {len(conv.questions)} questions", file=sys.stderr, flush=True)
    finally:
        for account in accounts:
            account.close()
    return out


def fused(item: dict[str, Any], weight: float, late_depth: int) -> list[str]:
    """The dialog ids of one ranking (see the module's doc), best first."""
    late, turns = item["late"], item["turns"]
    late_z = dict(zip(turns, (late - late.mean()) / (late.std() or 1.0), strict=True))
    prod = dict(item["ranked"])
    values = np.array(list(prod.values()))
    mean, std = values.mean(), values.std() or 1.0
    lowest = (values.min() - mean) / std
    pool = set(prod) | {turns[i] for i in np.argsort(-late, kind="stable")[:late_depth]}
    score = {rid: ((prod[rid] - mean) / std if rid in prod else lowest) + weight * late_z.get(rid, min(late_z.values()))
             for rid in pool}
    return [item["dia"].get(rid, rid) for rid in sorted(pool, key=lambda r: (-score[r], r))]


def report(items: Sequence[dict[str, Any]], late_depth_max: int) -> dict[str, Any]:
    pool, pool_late, alone10, alone50 = [], [], [], []
    misses: dict[str, Counter[str]] = {}
    for item in items:
        ev = item["evidence"]
        plain = [item["dia"].get(rid, rid) for rid, _ in item["ranked"]]
        order = [item["dia"][item["turns"][i]] for i in np.argsort(-item["late"], kind="stable")]
        pool.append(sum(e in plain for e in ev) / len(ev))
        pool_late.append(sum(e in set(plain) | set(order[:late_depth_max]) for e in ev) / len(ev))
        alone10.append(sum(e in order[:10] for e in ev) / len(ev))
        alone50.append(sum(e in order[:50] for e in ev) / len(ev))
        where = misses.setdefault(f"{item['category']} {locomo.CATEGORIES.get(item['category'], '?')}", Counter())
        for e in ev:
            at = plain.index(e) if e in plain else -1
            where["not a candidate" if at < 0 else "top 10" if at < 10 else "11-20" if at < 20
                  else "21-50" if at < 50 else "past 50"] += 1
    grid = []
    for late_depth in LATE_DEPTHS:
        for weight in WEIGHTS:
            s = locomo.Scores()
            for item in items:
                s.add(fused(item, weight, late_depth), item["evidence"])
            summary = s.summary()
            grid.append({"late_depth": late_depth, "weight": weight, "recall@10": summary["recall@10"],
                         "ndcg@10": summary["ndcg@10"]})
    return {"questions": len(items), "pool": round(float(np.mean(pool)), 4),
            f"pool_with_late_{late_depth_max}": round(float(np.mean(pool_late)), 4),
            "late_alone": {"recall@10": round(float(np.mean(alone10)), 4),
                           "recall@50": round(float(np.mean(alone50)), 4)},
            "fused": grid,
            "misses": {cat: {k: round(v / sum(c.values()), 3) for k, v in c.most_common()}
                       for cat, c in sorted(misses.items())}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True,
                        metavar=("NAME", "HOME", "DATA"), help="a data set, the home it was ingested into, its file")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations of each set")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="result JSON (default: %(default)s)")
    args = parser.parse_args(argv)
    encoder = ColbertEncoder()
    result: dict[str, Any] = {"benchmark": "late-first-stage", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                              "machine": {"python": platform.python_version(), "platform": platform.platform()},
                              "sets": {}}
    t0 = time.perf_counter()
    for name, home, data in args.sets:
        items = scored(Path(home).expanduser(), locomo.load(Path(data))[:args.limit], encoder)
        result["sets"][name] = entry = report(items, max(LATE_DEPTHS))
        best = max(entry["fused"], key=lambda g: (g["recall@10"], -g["late_depth"]))
        print(f"{name}: {entry['questions']} questions; evidence among the candidates {entry['pool']}, with the "
              f"late stage's best {max(LATE_DEPTHS)} {entry[f'pool_with_late_{max(LATE_DEPTHS)}']}; late alone "
              f"R@10 {entry['late_alone']['recall@10']}")
        for g in entry["fused"]:
            print(f"  late depth {g['late_depth']:>3}  weight {g['weight']:.1f}  R@10 {g['recall@10']:.4f}"
                  f"  NDCG@10 {g['ndcg@10']:.4f}")
        print(f"  best: late depth {best['late_depth']}, weight {best['weight']}")
        for cat, where in entry["misses"].items():
            print(f"  {cat:<22} {where}")
    result["seconds"] = round(time.perf_counter() - t0, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
