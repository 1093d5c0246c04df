#!/usr/bin/env python3
"""Late interaction (issue 42 item 3): what scoring every search candidate by ColBERT MaxSim gives and costs.

    PYTHONPATH=src python benchmarks/late_interaction.py --set locomo H1 ../shared/bench/locomo10.json \\
        --set beam H2 ../shared/bench/beam500k.json [--limit N] [--json benchmarks/results/late_interaction.json]

Each ``--set NAME HOME DATA`` is a data set and a home ``soulpass bench locomo`` ingested it into (as
``benchmarks/retrieval_fit.py``); nothing is written there. The late scorer is
``soulpass.embed.colbert.ColbertScorer``, one for all sets. Per set:

1. encoding: every turn's text (what its vector is made from) encoded once, as an index would at
   write time: turns/s on this machine, token rows per turn, bytes per turn (float16 as the scorer
   keeps them; int8 with one float32 scale per token, as a store of them could);
2. candidates: every question's, through ``AccountIndex.candidates`` with late scores
   (``retrieval_fit.prepare``);
3. quality, R@10 and NDCG@10 overall and per category: ``before`` (``W_LATE`` 0, the other weights as in
   ``ranking.py``), ``cv`` (``W_LATE`` fitted by two-fold cross-validation by conversation on every
   set together: fitted on fold A of all sets, tested on fold B, and back; the headline), ``fit_all``
   (fitted on all questions: in-sample, what ``ranking.W_LATE`` is rounded from), and the paired
   question-by-question change of ``cv`` against ``before`` (R@10 better / worse);
4. latency: ``Account.search`` (k 20, turn kinds, as the bench) p50/p95 over the first ``--timed``
   questions of each set, without late scores and with them (token vectors kept: the texts were
   encoded in step 1), and the query's ColBERT encoding alone.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import retrieval_fit as fit

from soulpass.bench import locomo
from soulpass.embed.colbert import DIM, TEXT_TOKENS, ColbertEncoder, ColbertScorer
from soulpass.engine import Account
from soulpass.index.recipe import embed_text

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "late_interaction.json"
TIMED = 100  # questions per set whose search is timed, each way
LATE = ("W_LATE",)


def encode_all(scorer: ColbertScorer, accounts: Sequence[Account]) -> dict[str, float]:
    """Every turn of ``accounts`` encoded (and kept by ``scorer``): throughput and size."""
    texts = []
    for account in accounts:
        index = account.index()
        texts += [embed_text(r) for r in index.catalog.get(list(locomo.dia_of(account)))]
    t0 = time.perf_counter()
    vectors = scorer.token_vectors(texts)
    seconds = time.perf_counter() - t0
    tokens = sum(len(v) for v in vectors)
    dim = vectors[0].shape[1] if vectors else 0
    return {"turns": len(texts), "seconds": round(seconds, 1), "turns_per_s": round(len(texts) / seconds, 1),
            "tokens_per_turn": round(tokens / len(texts), 1),
            "bytes_per_turn_float16": round(tokens * dim * 2 / len(texts)),
            "bytes_per_turn_int8": round(tokens * (dim + 4) / len(texts))}


def timed(accounts: Sequence[Account], conversations: Sequence[locomo.Conversation], n: int) -> list[float]:
    """Milliseconds of ``Account.search`` for the first ``n`` questions (as ``soulpass bench locomo``)."""
    out: list[float] = []
    for account, conv in zip(accounts, conversations, strict=True):
        for q in conv.questions:
            if len(out) >= n:
                return out
            t0 = time.perf_counter()
            account.search(q.text, fit.K, kinds=list(fit.KINDS))
            out.append((time.perf_counter() - t0) * 1000)
    return out


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
            "n": len(ms)}


def recalls(items: Sequence[fit.Prepared], values: fit.Weights) -> list[float]:
    out = []
    for item in items:
        s = locomo.Scores()
        s.add([item.dia.get(rid, rid) for rid in fit.matrix_ranked(item, values)], item.evidence)
        out.append(s.recall[10][0])
    return out


def quality(sets: Sequence[fit.DataSet]) -> dict[str, Any]:
    """``before``, two-fold CV by conversation over all sets together, the fit on all, per set."""
    before = {**fit.current_weights(), "W_LATE": 0.0}
    start = {**fit.current_weights(), "W_LATE": 1.0}
    folds = {}
    tested: dict[str, list[tuple[fit.Prepared, fit.Weights]]] = {ds.name: [] for ds in sets}
    for train, test in ((0, 1), (1, 0)):
        fitted = fit._rounded(fit.fit([ds.fold(train) for ds in sets if ds.fold(train)], start, names=LATE)["weights"])
        folds["AB"[train] + "->" + "AB"[test]] = fitted["W_LATE"]
        for ds in sets:
            tested[ds.name] += [(item, fitted) for item in ds.fold(test)]
    fitted_all = fit._rounded(fit.fit([ds.items for ds in sets], start, names=LATE)["weights"])
    out: dict[str, Any] = {"cv_w_late": folds, "fit_all_w_late": fitted_all["W_LATE"], "sets": {}}
    for ds in sets:
        cv_scores = locomo.Scores()
        cats: dict[int, locomo.Scores] = {}
        for item, w in tested[ds.name]:
            ranked = [item.dia.get(rid, rid) for rid in fit.matrix_ranked(item, w)]
            cv_scores.add(ranked, item.evidence)
            cats.setdefault(item.category, locomo.Scores()).add(ranked, item.evidence)
        order = [item for item, _ in tested[ds.name]]
        old = recalls(order, before)
        new = [cv_scores.recall[10][i] for i in range(len(order))]
        out["sets"][ds.name] = {
            "before": fit._metrics(fit.evaluate(ds.items, before)),
            "before_per_category": fit.per_category(ds.items, before),
            "cv": cv_scores.summary(),
            "cv_per_category": {f"{c} {locomo.CATEGORIES.get(c, '?')}": s.summary() for c, s in sorted(cats.items())},
            "fit_all": fit._metrics(fit.evaluate(ds.items, fitted_all)),
            "paired_r10_vs_before": {"better": sum(n > o for n, o in zip(new, old, strict=True)),
                                     "worse": sum(n < o for n, o in zip(new, old, strict=True))},
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True,
                        metavar=("NAME", "HOME", "DATA"), help="a data set, the home it was ingested into, its file")
    parser.add_argument("--limit", type=int, action="append", default=[],
                        help="only the first N conversations: once for every set, or once per set in order")
    parser.add_argument("--timed", type=int, default=TIMED, help="questions per set timed (default: %(default)s)")
    parser.add_argument("--dim", type=int, default=DIM, help="hidden-state columns kept (default: %(default)s)")
    parser.add_argument("--text-tokens", type=int, default=TEXT_TOKENS,
                        help="where a text is cut (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="result JSON (default: %(default)s)")
    args = parser.parse_args(argv)
    if len(args.limit) not in (0, 1, len(args.sets)):
        parser.error("give --limit once, or once per --set")
    limits = args.limit * len(args.sets) if len(args.limit) == 1 else args.limit or [None] * len(args.sets)
    scorer = ColbertScorer(ColbertEncoder(dim=args.dim, text_tokens=args.text_tokens))
    sets, report_sets = [], {}
    for (name, home, data), limit in zip(args.sets, limits, strict=True):
        conversations = locomo.load(Path(data))[:limit]
        entry: dict[str, Any] = {"conversations": len(conversations)}
        _, plain = fit.open_accounts(Path(home), conversations)
        try:
            entry["search_without_late"] = percentiles(timed(plain, conversations, args.timed))
        finally:
            for account in plain:
                account.close()
        _, accounts = fit.open_accounts(Path(home), conversations, scorer)
        try:
            entry["encoding"] = encode_all(scorer, accounts)
            print(f"{name}: encoded {entry['encoding']}", file=sys.stderr, flush=True)
            entry["search_with_late"] = percentiles(timed(accounts, conversations, args.timed))
            queries = [q.text for c in conversations for q in c.questions][:args.timed]
            t = []
            for q in queries:
                t0 = time.perf_counter()
                scorer.encoder.encode_query(q)
                t.append((time.perf_counter() - t0) * 1000)
            entry["query_encoding"] = percentiles(t)
            items = fit.prepare(accounts, conversations, progress=True)
            fit.check_decomposition(items)
        finally:
            for account in accounts:
                account.close()
        sets.append(fit.DataSet(name, items))
        report_sets[name] = entry
    result = quality(sets)
    for name, entry in report_sets.items():
        entry.update(result["sets"][name])
    report = {"benchmark": "late-interaction", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "model": scorer.model_id, "data": {n: d for n, _h, d in args.sets},
              "limits": dict(zip([n for n, _h, _d in args.sets], limits, strict=True)),
              "weights": {**fit.current_weights(), "cv_w_late": result["cv_w_late"],
                          "fit_all_w_late": result["fit_all_w_late"]},
              "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": 2},
              "sets": report_sets}
    for name, entry in report_sets.items():
        print(f"{name}: before R@10 {entry['before']['recall@10']} NDCG {entry['before']['ndcg@10']} | "
              f"cv R@10 {entry['cv']['recall@10']} NDCG {entry['cv']['ndcg@10']} | "
              f"fit_all R@10 {entry['fit_all']['recall@10']} NDCG {entry['fit_all']['ndcg@10']} | "
              f"paired {entry['paired_r10_vs_before']}")
        for cat, m in entry["cv_per_category"].items():
            b = entry["before_per_category"].get(cat, {})
            print(f"  {cat:24} R@10 {b.get('recall@10')} -> {m['recall@10']}  "
                  f"NDCG {b.get('ndcg@10')} -> {m['ndcg@10']}")
        print(f"  search p50 {entry['search_without_late']['p50_ms']} -> {entry['search_with_late']['p50_ms']} ms, "
              f"query encoding p50 {entry['query_encoding']['p50_ms']} ms; encoding {entry['encoding']}")
    print(f"W_LATE: cv folds {result['cv_w_late']}, fit on all {result['fit_all_w_late']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
