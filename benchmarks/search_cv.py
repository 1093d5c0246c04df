#!/usr/bin/env python3
"""The engine's search (``Account.search``: the ranking and the standing lift), cross-validated.

    PYTHONPATH=src python benchmarks/search_cv.py --fit benchmarks/results/retrieval_fit.json \\
        --set locomo H1 ../shared/bench/locomo10.json --set beam H2 ../shared/bench/beam500k.json \\
        [--plans-fit benchmarks/results/session_units.json] [--rerank] \\
        [--before ROWS_LOCOMO ROWS_BEAM] [--json benchmarks/results/search_cv.json]

``benchmarks/retrieval_fit.py`` fits the ranking weights by two-fold cross-validation by
conversation over every set together and writes each fold's weights (``cv_pooled.folds``): fitted on
fold A (the conversations at even positions of each data file), tested on fold B, and back. That
script scores the plain ranking; this one runs what ``soulpass bench locomo`` runs, the engine's
search (the standing instructions that govern a question lifted on top), over each fold's
conversations with the weights fitted on the *other* fold, so no question reported had a say in
the weights that ranked it; with ``--plans-fit`` (``benchmarks/session_units.py``'s result, whose
folds are chosen the same way) the session units' constants too (or
``benchmarks/time_named.py``'s: the ``when`` part's). The homes are ones ``soulpass
bench locomo`` ingested (as for
``retrieval_fit.py``); nothing is written there but the index's own catch-up. ``--rerank`` searches
with the optional cross-encoder (``soulpass bench locomo --rerank``; its weight is not fitted).

Per set: R@1/5/10/20 and NDCG@10 overall and per category, and, with ``--before`` (a ``--rows``
file of ``soulpass bench locomo`` per set, in ``--set`` order), the paired question-by-question
change of R@10 against it (better / worse).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from plan_ablation import constants  # benchmarks/: on sys.path when run as a script

import soulpass
import soulpass.index.ranking as ranking
import soulpass.retrieval.plans as plans
from soulpass.bench import locomo
from soulpass.retrieval import Shape

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "search_cv.json"


def ranking_weights(values: dict[str, float]) -> AbstractContextManager[None]:
    """``soulpass.index.ranking``'s weights set to ``values`` for a while, restored afterwards."""
    unknown = [name for name in values if not name.startswith("W_") or name not in vars(ranking)]
    if unknown:
        raise SystemExit(f"{', '.join(unknown)}: no ranking weight of soulpass.index.ranking")
    return constants(values, ranking)


def plan_values(values: dict[str, Any]) -> AbstractContextManager[None]:
    """``soulpass.retrieval.plans``' constants set to ``values`` (as ``benchmarks/session_units.py``
    writes them: shapes by name; ``benchmarks/time_named.py``: windows in days) for a while, restored
    afterwards (``plan_ablation.constants``)."""
    unknown = [name for name in values if not name.isupper() or name not in vars(plans)]
    if unknown:
        raise SystemExit(f"{', '.join(unknown)}: no plan constant of soulpass.retrieval.plans")
    return constants({name: _constant(name, value) for name, value in values.items()})


def _constant(name: str, value: Any) -> Any:
    """A plan constant as a fit's JSON writes it: shapes by name, a window as ``{"days": N}``."""
    if name.endswith("_SHAPES"):
        return tuple(Shape(v) for v in value)
    if isinstance(value, dict) and set(value) == {"days"}:
        return timedelta(days=value["days"])
    return value


def fold_weights(fit_json: Path) -> dict[int, dict[str, float]]:
    """The weights each test fold is ranked with: {0: fitted on fold B, 1: fitted on fold A}."""
    folds = json.loads(fit_json.read_text(encoding="utf-8"))["cv_pooled"]["folds"]
    return {1: folds["A->B"]["weights"], 0: folds["B->A"]["weights"]}


def fold_plan_values(fit_json: Path | None) -> dict[int, dict[str, Any]]:
    """The plan constants each test fold is searched with (``benchmarks/session_units.py``'s folds,
    the same way round as ``fold_weights``); none without a file."""
    if fit_json is None:
        return {0: {}, 1: {}}
    folds = json.loads(fit_json.read_text(encoding="utf-8"))["folds"]
    return {1: folds["A->B"], 0: folds["B->A"]}


def run_set(home: Path, data: Path, weights: dict[int, dict[str, float]],
            plan_folds: dict[int, dict[str, Any]], rerank: bool = False) -> list[dict[str, Any]]:
    """Every question's row (as ``soulpass bench locomo --rows``), each fold under its weights (and
    its plan constants); with ``rerank``, the cross-encoder re-orders each search's best."""
    conversations = locomo.load(data)
    # The default embedder and no late scorer, as ``soulpass bench locomo`` (its --rerank too).
    sp = soulpass.open(home, reranker="auto" if rerank else "none")
    rows: list[dict[str, Any]] = []
    for n, conv in enumerate(conversations):
        name = locomo.account_name(conv)
        if name not in sp.accounts():
            raise SystemExit(f"{home} lacks the account {name}; ingest it first with "
                             f"`soulpass --home {home} bench locomo --data {data} --out ...`")
        account = sp.account(name)
        try:
            with ranking_weights(weights[n % 2]), plan_values(plan_folds[n % 2]):
                found, _ = locomo.evaluate(account, conv)
        finally:
            account.close()
        rows += found
        print(f"  {data.name}: {conv.sample_id} (fold {'AB'[n % 2]})", file=sys.stderr, flush=True)
    return rows


def r10(row: dict[str, Any]) -> float:
    """A ``--rows`` row's recall at 10: the share of its evidence among its first 10 ranked ids."""
    gold = set(row["evidence"])
    return len(gold & set(row["ranked"][:10])) / len(gold)


def paired(rows: Sequence[dict[str, Any]], before: Path) -> dict[str, int]:
    """R@10 of each question against the same question in ``before`` (a ``--rows`` file)."""
    lines = before.read_text(encoding="utf-8").splitlines()
    old = {(r["conversation"], r["question"]): r for r in map(json.loads, lines)}
    better = worse = 0
    for row in rows:
        was = old.get((row["conversation"], row["question"]))
        if was is None:
            continue
        better += r10(row) > r10(was)
        worse += r10(row) < r10(was)
    return {"better": better, "worse": worse}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--fit", type=Path, required=True, help="a retrieval_fit.py result JSON (its cv_pooled folds)")
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True,
                        metavar=("NAME", "HOME", "DATA"), help="a data set, the home it was ingested into, its file")
    parser.add_argument("--plans-fit", type=Path, default=None,
                        help="a session_units.py result JSON: each fold's plan constants (its folds)")
    parser.add_argument("--rerank", action="store_true", help="re-order each search's best with the cross-encoder")
    parser.add_argument("--before", nargs="+", type=Path, default=[], help="a --rows file per set, to pair against")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="result JSON (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.before and len(args.before) != len(args.sets):
        parser.error("give one --before rows file per --set")
    weights, plan_folds = fold_weights(args.fit), fold_plan_values(args.plans_fit)
    report: dict[str, Any] = {"benchmark": "engine-search-cv", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                              "fit": str(args.fit), "fold_weights": {"A": weights[0], "B": weights[1]},
                              "plans_fit": str(args.plans_fit) if args.plans_fit else None,
                              "fold_plan_values": {"A": plan_folds[0], "B": plan_folds[1]}, "rerank": args.rerank,
                              "machine": {"python": platform.python_version(), "platform": platform.platform()},
                              "sets": {}}
    for n, (name, home, data) in enumerate(args.sets):
        rows = run_set(Path(home), Path(data), weights, plan_folds, args.rerank)
        entry = locomo.score(rows)
        if args.before:
            entry["paired_r10_vs_before"] = paired(rows, args.before[n])
        report["sets"][name] = entry
        o = entry["overall"]
        print(f"{name}: 2-fold CV R@1 {o['recall@1']} R@5 {o['recall@5']} R@10 {o['recall@10']} "
              f"R@20 {o['recall@20']} NDCG@10 {o['ndcg@10']}"
              + (f"; against before {entry['paired_r10_vs_before']}" if args.before else ""))
        for cat, m in entry["per_category"].items():
            print(f"  {cat:24} R@10 {m['recall@10']}  NDCG@10 {m['ndcg@10']}  ({m['questions']} q)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
