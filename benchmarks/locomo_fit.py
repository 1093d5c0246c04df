#!/usr/bin/env python3
"""How the ranking weights of ``soulpass.index.search`` were fitted on LoCoMo, reproducibly.

    .venv/bin/python benchmarks/locomo_fit.py --home H [--data ../shared/bench/locomo10.json]
        [--json benchmarks/results/locomo_fit.json]

``H`` is a home where ``soulpass --home H bench locomo --data ... --out X`` has already ingested the
conversations (one account each); this script only opens them and searches, it writes nothing there.

The weights fitted are the module constants ``W_FTS``, ``W_DENSE``, ``W_CONTEXT``, ``W_SESSION``,
``W_SPEAKER``, ``W_ASKS`` and ``W_LENGTH``. The candidates of a query (the best 50 by BM25 and by
cosine, and the neighbours of the best 20 by the *unweighted* fused score) do not depend on them:
only ``_Scores.rank`` does. So every question's candidate step runs once, through the same
``AccountIndex.candidates`` that ``search`` calls, and a weight vector
is evaluated by setting the module constants for a while and calling the production ``rank``. A
self-check compares the ranking with the current constants to ``Account.search`` for the first
questions of every conversation and fails loudly when the two drift apart.

Metric as ``soulpass bench locomo`` (``soulpass.bench.locomo``): fractional Recall@10 and binary
NDCG@10 of the evidence turns, averaged over questions. Objective: R@10 + NDCG@10 / 2. Fit:
coordinate ascent from ``START`` (the ranking before the fit), at most ``ROUNDS`` rounds; for each
weight in turn the six relative steps ``STEPS`` x max(|w|, 0.3) are tried from the current point and
the best is kept when it improves the objective by more than ``MIN_GAIN``.

Two-fold cross-validation by conversation: fold A holds the conversations at even positions of
the data file, fold B the odd ones; fit on A and test on B, fit on B and test on A; the
cross-validated R@10 and NDCG@10 are the question-weighted averages of the two test folds. A fit on
all questions is reported too (what the constants in ``search.py`` were rounded from).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import soulpass
import soulpass.index.search as search_mod
from soulpass.bench import locomo
from soulpass.engine import Account, Soulpass
from soulpass.index.catalog import Filters, Traits
from soulpass.index.search import AccountIndex, _Scores

__all__ = ["Prepared", "candidates", "current_weights", "evaluate", "fit", "main", "objective", "prepare",
           "ranked_ids", "self_check", "weights"]

WEIGHTS = ("W_FTS", "W_DENSE", "W_CONTEXT", "W_SESSION", "W_SPEAKER", "W_ASKS", "W_LENGTH")
K = max(locomo.KS)  # as ``soulpass bench locomo``: the top 20 are asked for (candidate depth 50)
KINDS = ("turn_user",)
ROUNDS = 12  # a fit stops earlier when a whole round moves nothing
STEPS = (-0.3, -0.15, -0.07, 0.07, 0.15, 0.3)
# The ranking before the weights were fitted (the previous release's): the two z-scores added, half
# the better neighbour's and half the session's best, no traits. Fits start here, so neither fold's
# test questions have a say in where a fit begins.
START = {"W_FTS": 1.0, "W_DENSE": 1.0, "W_CONTEXT": 0.5, "W_SESSION": 0.5, "W_SPEAKER": 0.0, "W_ASKS": 0.0,
         "W_LENGTH": 0.0}
MIN_GAIN = 1e-5
CHECK_PER_CONVERSATION = 3  # questions per conversation compared with ``Account.search``
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo10.json"
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "locomo_fit.json"

Weights = dict[str, float]


@dataclass
class Prepared:
    """One question's candidates, scored by both retrievers: all that ``rank`` needs."""

    conversation: int  # position in the data file (fold A: even, fold B: odd)
    question: str
    evidence: tuple[str, ...]
    scores: _Scores
    traits: dict[str, Traits]
    links: dict[str, tuple[str | None, str | None]]
    named: set[str]
    dense: bool
    dia: dict[str, str]  # record id -> dialog id (shared by the conversation's questions)


def current_weights() -> Weights:
    return {name: float(getattr(search_mod, name)) for name in WEIGHTS}


@contextmanager
def weights(values: Weights) -> Iterator[None]:
    """The module's ranking constants set to ``values`` for a while, restored afterwards."""
    saved = current_weights()
    try:
        for name, value in values.items():
            if name not in WEIGHTS:
                raise KeyError(name)
            setattr(search_mod, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(search_mod, name, value)


def candidates(index: AccountIndex, query: str, k: int = K) -> tuple[_Scores, dict[str, Traits],
                                                                      dict[str, tuple[str | None, str | None]],
                                                                      set[str], bool]:
    """The candidate step of ``AccountIndex.search`` (``AccountIndex.candidates``) for
    ``kinds=["turn_user"]``, as ``soulpass bench locomo`` searches; ``self_check`` compares the result."""
    found = index.candidates(query, k, Filters(kinds=KINDS))
    return found.scores, found.traits, found.links, found.named, found.dense


def ranked_ids(item: Prepared, k: int = K) -> list[str]:
    """The production ranking (``_Scores.rank``) with the module constants as they are now."""
    ranked = item.scores.rank(item.traits, item.links, named=item.named, dense=item.dense)
    return [rid for rid, _ in ranked[:k]]


def open_accounts(home: Path, conversations: Sequence[locomo.Conversation]) -> tuple[Soulpass, list[Account]]:
    """The ingested accounts, in data-file order; SystemExit with a clear message if one is missing."""
    if not (home / "accounts").is_dir():
        raise SystemExit(f"{home} is not a Soulpass home with accounts; ingest first with "
                         f"`soulpass --home {home} bench locomo --data ... --out ...`")
    sp = soulpass.open(home)  # the default embedder and no reranker, as ``soulpass bench locomo``
    present = set(sp.accounts())
    missing = [locomo.account_name(c) for c in conversations if locomo.account_name(c) not in present]
    if missing:
        raise SystemExit(f"{home} lacks the account(s) {', '.join(missing)}; ingest them first with "
                         f"`soulpass --home {home} bench locomo --data ... --out ...`")
    accounts = [sp.account(locomo.account_name(c)) for c in conversations]
    empty = [a.name for a in accounts if a.head() == 0]
    if empty:
        for account in accounts:
            account.close()
        raise SystemExit(f"account(s) {', '.join(empty)} in {home} hold nothing; ingest them first")
    return sp, accounts


def prepare(accounts: Sequence[Account], conversations: Sequence[locomo.Conversation],
            progress: bool = False) -> list[Prepared]:
    """Every question's candidates (the slow part: embedding and the two retrievers), once."""
    out: list[Prepared] = []
    for n, (account, conv) in enumerate(zip(accounts, conversations, strict=True)):
        index = account.index()  # caught up to HEAD: nothing to do on a home the benchmark ingested
        if index.embedder is None or index.status().pending_embeddings:
            raise SystemExit(f"account {account.name}: the index has no (complete) vectors; is the 'embed' extra "
                             f"installed and was the home ingested with it?")
        dia = locomo.dia_of(account)
        for q in conv.questions:
            scores, traits, links, named, dense = candidates(index, q.text)
            out.append(Prepared(n, q.text, q.evidence, scores, traits, links, named, dense, dia))
        if progress:
            print(f"  candidates: {conv.sample_id} ({len(conv.questions)} questions)", file=sys.stderr, flush=True)
    return out


def self_check(accounts: Sequence[Account], items: Sequence[Prepared], per_conversation: int = CHECK_PER_CONVERSATION,
               ) -> int:
    """Assert that, with the current constants, the script's top ``K`` equals ``Account.search``'s
    for the first ``per_conversation`` questions of each conversation; the number checked."""
    seen: dict[int, int] = {}
    checked = 0
    for item in items:
        if seen.get(item.conversation, 0) >= per_conversation:
            continue
        seen[item.conversation] = seen.get(item.conversation, 0) + 1
        mine = ranked_ids(item)
        theirs = [h.id for h in accounts[item.conversation].search(item.question, K, kinds=list(KINDS))]
        if mine != theirs:
            raise AssertionError(f"the script's ranking drifted from AccountIndex.search for {item.question!r}:\n"
                                 f"  script: {mine}\n  search: {theirs}\n"
                                 f"update candidates() in benchmarks/locomo_fit.py to mirror search()")
        checked += 1
    return checked


def evaluate(items: Sequence[Prepared], values: Weights | None = None) -> dict[str, float]:
    """Recall@10, NDCG@10 (unrounded means, as ``locomo.Scores``) and the objective under ``values``
    (the current constants when None)."""
    s = locomo.Scores()
    with weights(values or {}):
        for item in items:
            s.add([item.dia.get(rid, rid) for rid in ranked_ids(item)], item.evidence)
    n = len(s.ndcg)
    recall = sum(s.recall[10]) / n if n else 0.0
    ndcg = sum(s.ndcg) / n if n else 0.0
    return {"questions": n, "recall@10": recall, "ndcg@10": ndcg, "objective": objective(recall, ndcg)}


def objective(recall: float, ndcg: float) -> float:
    return recall + ndcg / 2


def fit(items: Sequence[Prepared], start: Weights | None = None, rounds: int = ROUNDS,
        steps: Sequence[float] = STEPS, names: Sequence[str] = WEIGHTS, log: bool = False) -> dict[str, Any]:
    """Coordinate ascent on R@10 + NDCG@10/2 from ``start`` (the current constants when None)."""
    point = dict(start or current_weights())
    best = evaluate(items, point)
    start_objective = best["objective"]
    evaluations, accepted = 1, 0
    for r in range(rounds):
        moved = False
        for name in names:
            scale = max(abs(point[name]), 0.3)
            tried = []
            for step in steps:
                trial = {**point, name: point[name] + step * scale}
                tried.append((evaluate(items, trial), trial))
                evaluations += 1
            result, trial = max(tried, key=lambda t: t[0]["objective"])
            if result["objective"] > best["objective"] + MIN_GAIN:
                best, point, moved = result, trial, True
                accepted += 1
        if log:
            print(f"    round {r + 1}: objective {best['objective']:.4f} (R@10 {best['recall@10']:.4f}, "
                  f"NDCG@10 {best['ndcg@10']:.4f})", file=sys.stderr, flush=True)
        if not moved:
            break
    return {"weights": point, "train": best, "start_objective": start_objective, "evaluations": evaluations,
            "steps_accepted": accepted}


def _rounded(values: Weights) -> Weights:
    return {name: round(v, 3) for name, v in values.items()}


def _metrics(m: dict[str, float]) -> dict[str, float]:
    return {"questions": m["questions"], "recall@10": round(m["recall@10"], 4), "ndcg@10": round(m["ndcg@10"], 4),
            "objective": round(m["objective"], 4)}


def run(items: Sequence[Prepared], log: bool = False) -> dict[str, Any]:
    """Current weights on all / A / B, the two cross-validation folds, and a fit on all."""
    fold_a = [i for i in items if i.conversation % 2 == 0]
    fold_b = [i for i in items if i.conversation % 2 == 1]
    current = current_weights()
    out: dict[str, Any] = {"start": {"weights": dict(START), "all": _metrics(evaluate(items, START))},
                           "current": {"weights": current, "all": _metrics(evaluate(items)),
                                       "A": _metrics(evaluate(fold_a)), "B": _metrics(evaluate(fold_b))}}
    folds: dict[str, Any] = {}
    for train_name, train, test_name, test in (("A", fold_a, "B", fold_b), ("B", fold_b, "A", fold_a)):
        if log:
            print(f"  fitting on fold {train_name} ({len(train)} questions)", file=sys.stderr, flush=True)
        fitted = fit(train, START, log=log)
        folds[f"{train_name}->{test_name}"] = {
            "weights": _rounded(fitted["weights"]), "train": _metrics(fitted["train"]),
            "test": _metrics(evaluate(test, fitted["weights"])),
            "evaluations": fitted["evaluations"], "steps_accepted": fitted["steps_accepted"]}
    tests = [f["test"] for f in folds.values()]
    n = sum(t["questions"] for t in tests)
    cv_recall = sum(t["recall@10"] * t["questions"] for t in tests) / n
    cv_ndcg = sum(t["ndcg@10"] * t["questions"] for t in tests) / n
    out["folds"] = folds
    out["cross_validated"] = {"questions": n, "recall@10": round(cv_recall, 4), "ndcg@10": round(cv_ndcg, 4),
                              "objective": round(objective(cv_recall, cv_ndcg), 4)}
    if log:
        print(f"  fitting on all ({len(items)} questions)", file=sys.stderr, flush=True)
    fitted = fit(items, START, log=log)
    out["fit_all"] = {"weights": _rounded(fitted["weights"]), "train": _metrics(fitted["train"]),
                      "evaluations": fitted["evaluations"], "steps_accepted": fitted["steps_accepted"]}
    return out


def _print(result: dict[str, Any]) -> None:
    cur = result["current"]
    print(f"LoCoMo ranking weights: {result['conversations']} conversations, {result['questions']} questions "
          f"(fold A: even positions, {cur['A']['questions']}; fold B: odd, {cur['B']['questions']}); "
          f"objective R@10 + NDCG@10/2")
    print(f"{'':34} {'questions':>9} {'R@10':>7} {'NDCG@10':>8} {'objective':>9}")

    def line(label: str, m: dict[str, float]) -> None:
        print(f"{label:34} {m['questions']:>9} {m['recall@10']:>7.4f} {m['ndcg@10']:>8.4f} {m['objective']:>9.4f}")

    line("start (before the fit), all", result["start"]["all"])
    line("current weights, all", cur["all"])
    line("current weights, fold A", cur["A"])
    line("current weights, fold B", cur["B"])
    for name, f in result["folds"].items():
        train, test = name.split("->")
        line(f"fitted on {train}, on {train} (train)", f["train"])
        line(f"fitted on {train} -> tested on {test}", f["test"])
    line("cross-validated (A->B, B->A)", result["cross_validated"])
    line("fitted on all, on all (train)", result["fit_all"]["train"])
    print()
    print(f"{'weights':14}" + "".join(f"{n:>11}" for n in WEIGHTS))
    rows = [("start", result["start"]["weights"]), ("current", cur["weights"]),
            *((f"fit {n}", f["weights"]) for n, f in result["folds"].items()),
            ("fit all", result["fit_all"]["weights"])]
    for label, w in rows:
        print(f"{label:14}" + "".join(f"{w[n]:>11.3f}" for n in WEIGHTS))
    print(f"self-check: {result['self_check_questions']} questions ranked as Account.search ranks them; "
          f"{result['seconds']['candidates']} s candidates, {result['seconds']['fits']} s fits")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--home", type=Path, required=True, help="home where `soulpass bench locomo` ingested LoCoMo")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="result JSON (default: %(default)s)")
    args = parser.parse_args(argv)
    conversations = locomo.load(args.data)
    home = args.home.expanduser()
    sp, accounts = open_accounts(home, conversations)
    try:
        t0 = time.perf_counter()
        items = prepare(accounts, conversations, progress=True)
        checked = self_check(accounts, items)
        t1 = time.perf_counter()
        result = run(items, log=True)
        t2 = time.perf_counter()
        embedder = sp.embedder()
    finally:
        for account in accounts:
            account.close()
    report: dict[str, Any] = {
        "benchmark": "locomo-weight-fit",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": str(args.data), "home": str(home),
        "conversations": len(conversations), "questions": len(items),
        "embedder": embedder.model_id if embedder else None,
        "params": {"k": K, "kinds": list(KINDS), "rounds": ROUNDS, "steps": list(STEPS), "min_gain": MIN_GAIN,
                   "step_scale": "max(|w|, 0.3)", "objective": "recall@10 + ndcg@10 / 2",
                   "folds": "A: conversations at even positions of the data file, B: odd"},
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        **result,
        "self_check_questions": checked,
        "seconds": {"candidates": round(t1 - t0, 1), "fits": round(t2 - t1, 1)},
    }
    _print(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"result written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
