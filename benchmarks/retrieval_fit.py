#!/usr/bin/env python3
"""How the ranking weights of ``soulpass.index.search`` are fitted, and how well they carry over.

    .venv/bin/python benchmarks/retrieval_fit.py --set locomo H1 ../shared/bench/locomo10.json \\
        --set beam H2 ../shared/bench/beam500k.json [--json benchmarks/results/retrieval_fit.json]

Each ``--set NAME HOME DATA`` names a data set in the LoCoMo layout and a home where ``soulpass --home
HOME bench locomo --data DATA --out X`` has already ingested it (one account per conversation); this
script only opens the accounts and searches, it writes nothing there.

The weights are the module constants ``WEIGHTS`` of ``soulpass.index.ranking``. The candidates of a
query (the best 50 by BM25 and by cosine, and the neighbours of the best 20 by the *unweighted*
fused score) do not depend on them: only ``CandidateScores.rank`` does. So every question's candidate step
runs once, through the same ``AccountIndex.candidates`` that ``search`` calls, and a weight vector
is evaluated without searching again. The score ``rank`` gives is linear in the weights (each
weight multiplies one part: the z-scores, the context and session terms), so the parts
are read once per question from the production ``rank`` (with one weight at 1 and the others at 0)
and a weight vector's ranking is a matrix product. Two self-checks fail loudly when this drifts from
the search: the matrix ranking with the current constants equals ``rank``'s for every question, and
equals the plain ``AccountIndex.search``'s (what ``Account.search``'s retrieval plans re-score) for
the first questions of every conversation.

Metric as ``soulpass bench locomo``: fractional Recall@10 and binary NDCG@10 of the evidence turns,
averaged over questions. Objective: R@10 + NDCG@10 / 2, averaged over the data sets fitted on (each
set counts the same, whatever its number of questions). Fit: coordinate ascent from ``START`` (the
ranking before any fit), at most ``ROUNDS`` rounds; for each weight in turn the six relative steps
``STEPS`` x max(|w|, 0.3) are tried and the best is kept when it improves the objective by more
than ``MIN_GAIN``.

``W_LATE`` weighs the late-interaction score (``--late``: the accounts are searched with
``soulpass.open(late="auto")``); without it that score is 0 and the weight moves nothing.

The four fusion weights are fitted (the three trait weights of a turn were removed in issue 37:
fitted on one data set they lost on the other; docs/performance.md).

What is reported (the headline first):
- ``cv_pooled``: **the headline**: two-fold cross-validation by conversation over every set together.
  Fold A holds the conversations at even positions of each data file, fold B the odd ones; the
  weights are fitted on fold A of all sets at once (the objective averaged over the sets), tested
  on fold B of each set, then the other way round; each set's figure is the question-weighted
  average of its two tests. No question reported had a say in the weights that ranked it;
- ``fit_all``: fitted on every set together (what the constants in ``ranking.py`` are rounded
  from), in-sample: reported beside the headline;
- per data set, ``current``: the weights in ``ranking.py`` now; ``cv``: two folds by conversation
  within that set alone; ``lodo``: leave one data set out (fitted on all the *other* sets): a
  diagnostic only, since a feature that exists in one genre (names of people) cannot be weighed
  by a set that has none.
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

import numpy as np
import numpy.typing as npt

import soulpass
import soulpass.index.ranking as ranking
from soulpass.bench import locomo
from soulpass.engine import Account, LateChoice, Soulpass
from soulpass.index.account import AccountIndex
from soulpass.index.catalog import Filters
from soulpass.index.ranking import CandidateScores
from soulpass.index.recipe import TURN_KINDS
from soulpass.index.search import Candidates

__all__ = ["DataSet", "Prepared", "candidates", "check_decomposition", "cross_validate_pooled", "current_weights",
           "decompose", "evaluate", "fit", "main", "matrix_ranked", "objective", "per_category", "prepare",
           "ranked_ids", "self_check", "weights"]

WEIGHTS = ("W_FTS", "W_DENSE", "W_CONTEXT", "W_SESSION", "W_REPLY", "W_LATE")
FUSION = WEIGHTS  # what the default is fitted on
K = max(locomo.KS)  # as ``soulpass bench locomo``: the top 20 are asked for (candidate depth 50)
KINDS = TURN_KINDS
ROUNDS = 12  # a fit stops earlier when a whole round moves nothing
STEPS = (-0.3, -0.15, -0.07, 0.07, 0.15, 0.3)
# The ranking before any fit: the two z-scores added, half the better neighbour's and half the
# session's best. Fits start here, so no test question has a say in where a fit begins.
START = {"W_FTS": 1.0, "W_DENSE": 1.0, "W_CONTEXT": 0.5, "W_SESSION": 0.5, "W_REPLY": 0.0, "W_LATE": 1.0}
MIN_GAIN = 1e-5
CHECK_PER_CONVERSATION = 3  # questions per conversation compared with the plain search
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "retrieval_fit.json"

Weights = dict[str, float]


@dataclass
class Prepared:
    """One question's candidates, scored by both retrievers: all that ``rank`` needs."""

    conversation: int  # position in the data file (fold A: even, fold B: odd)
    question: str
    evidence: tuple[str, ...]
    scores: CandidateScores
    sessions: dict[str, str | None]
    links: dict[str, tuple[str | None, str | None]]
    dense: bool
    dia: dict[str, str]  # record id -> dialog id (shared by the conversation's questions)
    category: int = 0  # the question's category in the data set
    ids: list[str] | None = None  # the candidates, in id order (ties go to the smaller id, as in ``rank``)
    parts: npt.NDArray[np.float64] | None = None  # candidates x WEIGHTS: what each weight multiplies


@dataclass
class DataSet:
    name: str
    items: list[Prepared]

    def fold(self, parity: int) -> list[Prepared]:
        return [i for i in self.items if i.conversation % 2 == parity]


def current_weights() -> Weights:
    return {name: float(getattr(ranking, name)) for name in WEIGHTS}


@contextmanager
def weights(values: Weights) -> Iterator[None]:
    """The module's ranking constants set to ``values`` for a while, restored afterwards."""
    saved = current_weights()
    try:
        for name, value in values.items():
            if name not in WEIGHTS:
                raise KeyError(name)
            setattr(ranking, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(ranking, name, value)


def candidates(index: AccountIndex, query: str, k: int = K) -> Candidates:
    """The candidate step of ``AccountIndex.search`` for both turn kinds, as ``soulpass bench locomo``
    searches; ``self_check`` compares the result."""
    return index.candidates(query, k, Filters(kinds=KINDS))


def ranked_ids(item: Prepared, k: int = K) -> list[str]:
    """The production ranking (``CandidateScores.rank``) with the module constants as they are now."""
    ranked = item.scores.rank(item.sessions, item.links, dense=item.dense)
    return [rid for rid, _ in ranked[:k]]


# The part of ``rank``'s output that each weight multiplies (W_FTS and W_DENSE share "fused").
_PART = {"W_FTS": "fused", "W_DENSE": "fused", "W_CONTEXT": "context", "W_SESSION": "session", "W_REPLY": "reply",
         "W_LATE": "fused"}


def decompose(item: Prepared) -> None:
    """Fill ``item.ids`` and ``item.parts`` from the production ``rank``, one weight at 1 at a time."""
    columns: list[dict[str, float]] = []
    for name in WEIGHTS:
        with weights({w: float(w == name) for w in WEIGHTS}):
            ranked = item.scores.rank(item.sessions, item.links, dense=item.dense)
        columns.append({rid: parts.get(_PART[name], 0.0) for rid, parts in ranked})
    item.ids = sorted(columns[0])
    item.parts = np.array([[col[rid] for col in columns] for rid in item.ids], dtype=np.float64)


def matrix_ranked(item: Prepared, values: Weights, k: int = K) -> list[str]:
    """The ranking ``rank`` gives under ``values``, as a matrix product (see the module's doc)."""
    if item.parts is None or item.ids is None:
        decompose(item)
    assert item.parts is not None and item.ids is not None
    if not item.ids:
        return []
    score = item.parts @ np.array([values[name] for name in WEIGHTS])
    order = np.argsort(-score, kind="stable")[:k]  # stable: equal scores keep id order, as ``rank``
    return [item.ids[i] for i in order]


def open_accounts(home: Path, conversations: Sequence[locomo.Conversation], late: LateChoice = "none",
                  ) -> tuple[Soulpass, list[Account]]:
    """The ingested accounts, in data-file order; SystemExit with a clear message if one is missing.
    ``late``: the late-interaction scorer their searches use (``soulpass.open``'s ``late``)."""
    if not (home / "accounts").is_dir():
        raise SystemExit(f"{home} is not a Soulpass home with accounts; ingest first with "
                         f"`soulpass --home {home} bench locomo --data ... --out ...`")
    sp = soulpass.open(home, late=late)  # the default embedder and no reranker, as ``soulpass bench locomo``
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
            f = candidates(index, q.text)
            out.append(Prepared(n, q.text, q.evidence, f.scores, f.sessions, f.links, f.dense, dia, q.category))
        if progress:
            print(f"  candidates: {conv.sample_id} ({len(conv.questions)} questions)", file=sys.stderr, flush=True)
    return out


def self_check(accounts: Sequence[Account], items: Sequence[Prepared], per_conversation: int = CHECK_PER_CONVERSATION,
               ) -> int:
    """Assert that, with the current constants, the script's top ``K`` equals the plain search's
    (``AccountIndex.search``, under the retrieval plans of ``Account.search``) for the first
    ``per_conversation`` questions of each conversation; the number checked."""
    seen: dict[int, int] = {}
    checked = 0
    for item in items:
        if seen.get(item.conversation, 0) >= per_conversation:
            continue
        seen[item.conversation] = seen.get(item.conversation, 0) + 1
        mine = ranked_ids(item)
        # The plain search (the retrieval plans of soulpass.retrieval.plans re-score its hits on top).
        theirs = [h.id for h in accounts[item.conversation].index().search(item.question, K, Filters(kinds=KINDS))]
        if mine != theirs:
            raise AssertionError(f"the script's ranking drifted from AccountIndex.search for {item.question!r}:\n"
                                 f"  script: {mine}\n  search: {theirs}\n"
                                 f"update candidates() in benchmarks/retrieval_fit.py to mirror search()")
        checked += 1
    return checked


def check_decomposition(items: Sequence[Prepared]) -> None:
    """Assert that the matrix ranking with the current constants is ``rank``'s, for every question."""
    current = current_weights()
    for item in items:
        if matrix_ranked(item, current) != ranked_ids(item):
            raise AssertionError(f"the parts of rank() no longer add up to its score for {item.question!r}: "
                                 f"update decompose() in benchmarks/retrieval_fit.py")


def evaluate(items: Sequence[Prepared], values: Weights | None = None) -> dict[str, float]:
    """Recall@10, NDCG@10 (unrounded means, as ``locomo.Scores``) and the objective under ``values``
    (the current constants when None)."""
    s = locomo.Scores()
    point = {**current_weights(), **(values or {})}
    for item in items:
        s.add([item.dia.get(rid, rid) for rid in matrix_ranked(item, point)], item.evidence)
    n = len(s.ndcg)
    recall = sum(s.recall[10]) / n if n else 0.0
    ndcg = sum(s.ndcg) / n if n else 0.0
    return {"questions": n, "recall@10": recall, "ndcg@10": ndcg, "objective": objective(recall, ndcg)}


def objective(recall: float, ndcg: float) -> float:
    return recall + ndcg / 2


def per_category(items: Sequence[Prepared], values: Weights) -> dict[str, dict[str, float]]:
    """``evaluate`` per question category (named as ``soulpass bench locomo`` names them)."""
    cats = sorted({i.category for i in items})
    return {f"{c} {locomo.CATEGORIES.get(c, '?')}": _metrics(evaluate([i for i in items if i.category == c], values))
            for c in cats}


def _mean_objective(groups: Sequence[Sequence[Prepared]], values: Weights) -> float:
    return sum(evaluate(g, values)["objective"] for g in groups) / len(groups)


def fit(groups: Sequence[Sequence[Prepared]], start: Weights | None = None, rounds: int = ROUNDS,
        steps: Sequence[float] = STEPS, names: Sequence[str] = WEIGHTS, log: bool = False) -> dict[str, Any]:
    """Coordinate ascent on the mean over ``groups`` (data sets) of R@10 + NDCG@10/2, from ``start``
    (the current constants when None)."""
    point = dict(start or current_weights())
    best = _mean_objective(groups, point)
    start_objective = best
    evaluations, accepted = 1, 0
    for r in range(rounds):
        moved = False
        for name in names:
            scale = max(abs(point[name]), 0.3)
            tried = []
            for step in steps:
                trial = {**point, name: point[name] + step * scale}
                tried.append((_mean_objective(groups, trial), trial))
                evaluations += 1
            value, trial = max(tried, key=lambda t: t[0])
            if value > best + MIN_GAIN:
                best, point, moved = value, trial, True
                accepted += 1
        if log:
            print(f"    round {r + 1}: objective {best:.4f}", file=sys.stderr, flush=True)
        if not moved:
            break
    return {"weights": point, "objective": best, "start_objective": start_objective, "evaluations": evaluations,
            "steps_accepted": accepted}


def _rounded(values: Weights) -> Weights:
    return {name: round(v, 3) for name, v in values.items()}


def _metrics(m: dict[str, float]) -> dict[str, float]:
    return {"questions": m["questions"], "recall@10": round(m["recall@10"], 4), "ndcg@10": round(m["ndcg@10"], 4),
            "objective": round(m["objective"], 4)}


def _pooled(tests: Sequence[dict[str, float]]) -> dict[str, float]:
    n = sum(t["questions"] for t in tests)
    recall = sum(t["recall@10"] * t["questions"] for t in tests) / n
    ndcg = sum(t["ndcg@10"] * t["questions"] for t in tests) / n
    return {"questions": n, "recall@10": recall, "ndcg@10": ndcg, "objective": objective(recall, ndcg)}


def cross_validate(ds: DataSet, names: Sequence[str] = FUSION, log: bool = False, start: Weights = START,
                   ) -> dict[str, Any]:
    """Two folds by conversation within one data set."""
    folds: dict[str, Any] = {}
    tests = []
    for train_name, train, test_name, test in (("A", ds.fold(0), "B", ds.fold(1)), ("B", ds.fold(1), "A", ds.fold(0))):
        if not train or not test:
            continue
        if log:
            print(f"  {ds.name}: fitting on fold {train_name} ({len(train)} questions)", file=sys.stderr, flush=True)
        fitted = _rounded(fit([train], start, names=names, log=log)["weights"])  # rounded: the JSON reproduces it
        tested = evaluate(test, fitted)
        tests.append(tested)
        folds[f"{train_name}->{test_name}"] = {"weights": fitted, "test": _metrics(tested)}
    return {"folds": folds, "test": _metrics(_pooled(tests)) if tests else None}


def cross_validate_pooled(sets: Sequence[DataSet], names: Sequence[str] = FUSION, log: bool = False,
                          start: Weights = START) -> dict[str, Any]:
    """Two folds by conversation over every set together (the headline): fit on fold A of all sets,
    test on fold B of each, and the other way round."""
    folds: dict[str, Any] = {}
    tests: dict[str, list[dict[str, float]]] = {ds.name: [] for ds in sets}
    tested_items: dict[str, list[tuple[Prepared, Weights]]] = {ds.name: [] for ds in sets}
    for train_parity, label in ((0, "A->B"), (1, "B->A")):
        train = [ds.fold(train_parity) for ds in sets if ds.fold(train_parity)]
        if not train:
            continue
        if log:
            print(f"  pooled cv: fitting on fold {label[0]} of every set ({sum(map(len, train))} questions)",
                  file=sys.stderr, flush=True)
        fitted = _rounded(fit(train, start, names=names, log=log)["weights"])
        folds[label] = {"weights": fitted, "test": {}}
        for ds in sets:
            test = ds.fold(1 - train_parity)
            if test:
                m = evaluate(test, fitted)
                tests[ds.name].append(m)
                tested_items[ds.name].extend((i, fitted) for i in test)
                folds[label]["test"][ds.name] = _metrics(m)
    out: dict[str, Any] = {"folds": folds, "sets": {}}
    for ds in sets:
        if not tests[ds.name]:
            continue
        by_cat: dict[int, list[tuple[Prepared, Weights]]] = {}
        for item, w in tested_items[ds.name]:
            by_cat.setdefault(item.category, []).append((item, w))
        per_cat = {f"{c} {locomo.CATEGORIES.get(c, '?')}": _metrics(_pooled([evaluate([i], w) for i, w in pairs]))
                   for c, pairs in sorted(by_cat.items())}
        out["sets"][ds.name] = {"test": _metrics(_pooled(tests[ds.name])), "per_category": per_cat}
    return out


def run(sets: Sequence[DataSet], names: Sequence[str] = FUSION, log: bool = False, start: Weights = START,
        ) -> dict[str, Any]:
    """Per data set: the current weights, cross-validation, leave-one-data-set-out; then a fit on all.
    Only the weights in ``names`` are fitted, from ``start``; the others stay as ``start`` has them."""
    out: dict[str, Any] = {"fitted": list(names), "start": {"weights": dict(start)},
                           "current": {"weights": current_weights()}, "sets": {}}
    for ds in sets:
        entry: dict[str, Any] = {"questions": len(ds.items), "start": _metrics(evaluate(ds.items, start)),
                                 "current": _metrics(evaluate(ds.items)),
                                 "cv": cross_validate(ds, names, log, start)}
        others = [o.items for o in sets if o is not ds]
        if others:
            if log:
                print(f"  fitting without {ds.name}", file=sys.stderr, flush=True)
            lodo = _rounded(fit(others, start, names=names, log=log)["weights"])
            entry["lodo"] = {"weights": lodo, "test": _metrics(evaluate(ds.items, lodo)),
                             "per_category": per_category(ds.items, lodo)}
        out["sets"][ds.name] = entry
    if log:
        print("  fitting on all sets", file=sys.stderr, flush=True)
    fitted = _rounded(fit([ds.items for ds in sets], start, names=names, log=log)["weights"])
    out["fit_all"] = {"weights": fitted, "sets": {ds.name: _metrics(evaluate(ds.items, fitted)) for ds in sets},
                      "per_category": {ds.name: per_category(ds.items, fitted) for ds in sets}}
    out["cv_pooled"] = cross_validate_pooled(sets, names, log, start)
    return out


def _print(result: dict[str, Any]) -> None:
    print(f"Ranking weights fitted: {', '.join(n[2:] for n in result['fitted'])}; objective R@10 + NDCG@10/2; "
          "cv = two folds by conversation (the headline: every set together); lodo = fitted on the other "
          "data set(s) only (a diagnostic)")
    print(f"{'':38} {'questions':>9} {'R@10':>7} {'NDCG@10':>8}")

    def line(label: str, m: dict[str, float] | None) -> None:
        if m is not None:
            print(f"{label:38} {m['questions']:>9} {m['recall@10']:>7.4f} {m['ndcg@10']:>8.4f}")

    for name in result["sets"]:
        line(f"{name}: 2-fold cv, all sets (headline)", result["cv_pooled"]["sets"].get(name, {}).get("test"))
        line(f"{name}: fitted on all sets (in-sample)", result["fit_all"]["sets"][name])
    for name, s in result["sets"].items():
        line(f"{name}: start (no fit)", s["start"])
        line(f"{name}: current weights", s["current"])
        line(f"{name}: cross-validated", s["cv"]["test"])
        line(f"{name}: leave-one-data-set-out", s.get("lodo", {}).get("test"))
    print()
    print(f"{'weights':22}" + "".join(f"{n[2:]:>9}" for n in WEIGHTS))
    rows = [("start", result["start"]["weights"]), ("current", result["current"]["weights"]),
            *((f"cv fit on {f[0]}", v["weights"]) for f, v in result["cv_pooled"]["folds"].items()),
            *((f"fit without {n}", s["lodo"]["weights"]) for n, s in result["sets"].items() if "lodo" in s),
            ("fit on all", result["fit_all"]["weights"])]
    for label, w in rows:
        print(f"{label:22}" + "".join(f"{w[n]:>9.3f}" for n in WEIGHTS))
    print(f"self-check: {result['self_check_questions']} questions ranked as the plain search ranks them; "
          f"{result['seconds']['candidates']} s candidates, {result['seconds']['fits']} s fits")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=3, action="append", required=True,
                        metavar=("NAME", "HOME", "DATA"),
                        help="a data set: its name, the home `soulpass bench locomo` ingested it into, its file")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations of each set")
    parser.add_argument("--set-limit", dest="set_limits", nargs=2, action="append", default=[], metavar=("NAME", "N"),
                        help="only the first N conversations of the set NAME (over --limit)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="result JSON (default: %(default)s)")
    parser.add_argument("--late", action="store_true", help="searches score candidates by late interaction too")
    parser.add_argument("--only", nargs="+", choices=WEIGHTS, default=None, metavar="WEIGHT",
                        help="fit only these weights (from START), the others kept as ranking.py has them")
    args = parser.parse_args(argv)
    limits = {name: int(n) for name, n in args.set_limits}
    sets: list[DataSet] = []
    checked = 0
    t0 = time.perf_counter()
    embedder = None
    for name, home, data in args.sets:
        conversations = locomo.load(Path(data))[:limits.get(name, args.limit)]
        sp, accounts = open_accounts(Path(home).expanduser(), conversations, "auto" if args.late else "none")
        try:
            items = prepare(accounts, conversations, progress=True)
            checked += self_check(accounts, items)
            check_decomposition(items)
            embedder = sp.embedder()
        finally:
            for account in accounts:
                account.close()
        sets.append(DataSet(name, items))
    t1 = time.perf_counter()
    names, start = FUSION, START
    if args.only:
        names, start = tuple(args.only), {**current_weights(), **{n: START[n] for n in args.only}}
    result = run(sets, names, log=True, start=start)
    t2 = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "retrieval-weight-fit",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": {name: data for name, _home, data in args.sets},
        "embedder": embedder.model_id if embedder else None,
        "int8_queries": bool(getattr(embedder, "int8_queries", False)),  # the query's arithmetic (MiniLM)
        "params": {"k": K, "kinds": list(KINDS), "rounds": ROUNDS, "steps": list(STEPS), "min_gain": MIN_GAIN,
                   "step_scale": "max(|w|, 0.3)", "objective": "mean over sets of recall@10 + ndcg@10 / 2",
                   "folds": "A: conversations at even positions of the data file, B: odd", "limit": args.limit,
                   "set_limits": limits},
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
