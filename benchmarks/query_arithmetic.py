"""Recall with a search's query embedded in float32 and in int8 arithmetic, question by question.

    python benchmarks/query_arithmetic.py --home H --data ../shared/bench/locomo10.json [--json F]

``H`` is a home ``soulpass --home H bench locomo --data DATA`` has filled (one account per
conversation); nothing is written there. Every question is searched twice over the same accounts:
with ``MiniLM(int8_queries=False)`` (the query embedded as a stored text) and with
``MiniLM(int8_queries=True)`` (``soulpass.embed.minilm_int8``). Reported: recall@10 and NDCG@10 of
the evidence turns each way (as ``soulpass bench locomo`` scores them), their paired differences
with a 95% bootstrap interval (5,000 resamples of the questions, seed 0), how many questions' recall
rose and fell, and how many top 10s changed at all. With the weights of ``soulpass.index.search``,
which were fitted on LoCoMo and BEAM-500K with float32 queries: these figures are in-sample, and a
change of the query vector can only move away from what the fit chose; ``benchmarks/retrieval_fit.py``
run each way gives the leave-one-data-set-out figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
DEFAULT_JSON = REPO / "benchmarks" / "results" / "query_arithmetic.json"
K = 10


def per_question(home: Path, data: Path, int8: bool) -> list[dict[str, Any]]:
    """Every question's row (``soulpass.bench.locomo.evaluate``) with the query embedded one way."""
    import soulpass
    from soulpass.bench import locomo
    from soulpass.embed.minilm import MiniLM
    from soulpass.importers.locomo import load

    sp = soulpass.open(home, embedder=MiniLM(int8_queries=int8))
    rows: list[dict[str, Any]] = []
    for conv in load(data):
        account = sp.account(locomo.account_name(conv))
        try:
            rows += locomo.evaluate(account, conv, k=K)[0]
        finally:
            account.close()
    return rows


def recall(row: dict[str, Any]) -> float:
    evidence = set(row["evidence"])
    return len(set(row["ranked"][:K]) & evidence) / len(evidence)


def ndcg(row: dict[str, Any]) -> float:
    evidence = set(row["evidence"])
    dcg = sum(1 / np.log2(i + 2) for i, dia in enumerate(row["ranked"][:K]) if dia in evidence)
    return float(dcg / sum(1 / np.log2(i + 2) for i in range(min(len(evidence), K))))


def compare(exact: list[dict[str, Any]], int8: list[dict[str, Any]], resamples: int = 5000) -> dict[str, Any]:
    """The paired comparison of two runs over the same questions (rows without evidence left out)."""
    pairs = [(a, b) for a, b in zip(exact, int8, strict=True) if a["evidence"]]
    table = np.array([(recall(a), recall(b), ndcg(a), ndcg(b)) for a, b in pairs])
    picks = np.random.default_rng(0).integers(0, len(table), (resamples, len(table)))
    out: dict[str, Any] = {"questions": len(table),
                           "float32": {"recall@10": table[:, 0].mean(), "ndcg@10": table[:, 2].mean()},
                           "int8": {"recall@10": table[:, 1].mean(), "ndcg@10": table[:, 3].mean()}}
    for metric, (before, after) in (("recall@10", (0, 1)), ("ndcg@10", (2, 3))):
        delta = table[:, after] - table[:, before]
        means = delta[picks].mean(axis=1)
        out[f"delta_{metric}"] = {"mean": delta.mean(), "ci95": [np.percentile(means, 2.5), np.percentile(means, 97.5)],
                                  "questions_up": int((delta > 0).sum()), "questions_down": int((delta < 0).sum())}
    out["top10_changed"] = sum(a["ranked"][:K] != b["ranked"][:K] for a, b in pairs)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--home", type=Path, required=True, help="a home `soulpass bench locomo` filled from --data")
    p.add_argument("--data", type=Path, required=True, help="the data set (LoCoMo layout)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    for path in (args.home, args.data):
        if not path.exists():
            print(f"{path} does not exist", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    result = compare(per_question(args.home, args.data, False), per_question(args.home, args.data, True))
    report = {"benchmark": "query_arithmetic", "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "data": str(args.data),
              "seconds": round(time.perf_counter() - t0, 1), **result}
    for metric in ("recall@10", "ndcg@10"):
        d = result[f"delta_{metric}"]
        print(f"{metric}: float32 {result['float32'][metric]:.4f}, int8 {result['int8'][metric]:.4f}, difference "
              f"{d['mean']:+.4f} (95% interval {d['ci95'][0]:+.4f} to {d['ci95'][1]:+.4f}); "
              f"{d['questions_up']} questions up, {d['questions_down']} down")
    print(f"{result['questions']} questions, {result['top10_changed']} top 10s changed (order included)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, default=float) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
