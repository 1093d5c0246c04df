#!/usr/bin/env python3
"""A turn's vector read with its neighbours (a context window), as one more score part of the
engine's search: cross-validated.

    PYTHONPATH=src python benchmarks/context_windows.py \\
        --set locomo H1 ../shared/bench/locomo10.json --set beam H2 ../shared/bench/beam500k.json \\
        [--json benchmarks/results/context_windows.json]

A short turn means little alone ("They were stoked for the dinosaur exhibit!"); the turn before it
says who "they" are. Here every turn of each conversation is embedded once more by MiniLM together
with the turn before and after it in its session (each neighbour "speaker: text" cut at
``NEIGHBOUR_CHARS``, the turn as its own vector reads it, ``soulpass.index.recipe.embed_text``): what
an index storing a second vector per turn would hold. The engine's search (``soulpass bench
locomo``'s: ``Account.search``, the standing and ``when`` parts, each fold's ranking weights as
``benchmarks/search_cv.py`` sets them) then gives every candidate the cosine of the query to its
window as the optional score part the ranking already has for a second view of meaning (``late``:
standardised over the candidates, times ``W_LATE``, in the fused part; ``WindowScorer`` is a
``LateScorer``). It adds no candidate: it re-scores the search's own.

The weight is chosen per fold among ``WEIGHTS`` (fold A: the conversations at even positions of each
data file, B: the odd ones; the sets pooled, each set's R@10 + NDCG@10 / 2 averaged) and tested on
the other fold. The homes are ones ``soulpass bench locomo`` ingested; nothing is written there.
Printed and written: per set, in-sample figures per weight, the 2-fold CV figures per category, and
the paired better / worse (R@10) against weight 0 (the engine as it is).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from search_cv import fold_plan_values, fold_weights, plan_values, r10, ranking_weights

import soulpass
from soulpass.bench import locomo
from soulpass.embed.minilm import MiniLM
from soulpass.index.passages import EMBED_CHARS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "context_windows.json"
FIT = ROOT / "benchmarks" / "results" / "retrieval_fit_reply.json"
PLANS_FIT = ROOT / "benchmarks" / "results" / "time_named.json"
NEIGHBOUR_CHARS = 300  # of each neighbour in a window
WEIGHTS = (0.0, 0.3, 0.6, 1.0, 1.5, 2.0, 3.0)


class WindowScorer:
    """``soulpass.embed.colbert.LateScorer`` giving a text the cosine of the query to its turn's
    window (the largest where the same text is several turns): 0 for a text with none."""

    model_id = "all-MiniLM-L6-v2/context-window"

    def __init__(self, model: MiniLM) -> None:
        self.model = model
        self.windows: dict[str, list[np.ndarray]] = {}  # a turn's embedded text -> its windows' vectors
        self._queries: dict[str, np.ndarray] = {}

    def start(self, query: str) -> Callable[[Sequence[str]], list[float]]:
        vector = self._queries.get(query)
        if vector is None:
            vector = self._queries[query] = self.model.embed_query(query)
        return lambda texts: [max((float(w @ vector) for w in self.windows.get(t, ())), default=0.0) for t in texts]

    def read(self, conv: locomo.Conversation) -> None:
        """The windows of every turn of ``conv`` (the scorer forgets the conversation before)."""
        self.windows.clear()
        self._queries.clear()
        turns = [(n, t) for n, s in enumerate(conv.sessions) for t in s.turns]
        own = [f"{t.speaker}: {t.text[:EMBED_CHARS]}" for _, t in turns]

        def side(j: int, i: int) -> list[str]:
            if 0 <= j < len(turns) and turns[j][0] == turns[i][0]:
                return [f"{turns[j][1].speaker}: {turns[j][1].text[:NEIGHBOUR_CHARS]}"]
            return []
        texts = ["\n".join([*side(i - 1, i), own[i], *side(i + 1, i)]) for i in range(len(turns))]
        for text, vector in zip(own, self.model.embed_batch(texts), strict=True):
            self.windows.setdefault(text, []).append(vector)


def searched(home: Path, data: Path, scorer: WindowScorer, weights: dict[int, dict[str, float]],
             plan_folds: dict[int, dict[str, Any]]) -> dict[float, list[dict[str, Any]]]:
    """Every question's row (as ``soulpass bench locomo --rows``, with its fold) under each weight."""
    conversations = locomo.load(data)
    sp = soulpass.open(home, late=scorer)
    rows: dict[float, list[dict[str, Any]]] = {w: [] for w in WEIGHTS}
    for n, conv in enumerate(conversations):
        name = locomo.account_name(conv)
        if name not in sp.accounts():
            raise SystemExit(f"{home} lacks the account {name}; ingest it first with "
                             f"`soulpass --home {home} bench locomo --data {data} --out ...`")
        scorer.read(conv)
        account = sp.account(name)
        try:
            for w in WEIGHTS:
                with ranking_weights({**weights[n % 2], "W_LATE": w}), plan_values(plan_folds[n % 2]):
                    found, _ = locomo.evaluate(account, conv)
                rows[w] += [{**r, "fold": n % 2} for r in found]
        finally:
            account.close()
        print(f"  {data.name}: {conv.sample_id}", file=sys.stderr, flush=True)
    return rows


def objective(rows: Sequence[dict[str, Any]]) -> float:
    o = locomo.score(rows)["overall"]
    return float(o["recall@10"] + o["ndcg@10"] / 2)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--set", dest="sets", nargs=3, action="append", required=True, metavar=("NAME", "HOME", "DATA"))
    ap.add_argument("--fit", type=Path, default=FIT, help="ranking weights per fold (default: %(default)s)")
    ap.add_argument("--plans-fit", type=Path, default=PLANS_FIT, help="plan constants per fold (default: %(default)s)")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON, help="result JSON (default: %(default)s)")
    args = ap.parse_args(argv)
    scorer = WindowScorer(MiniLM())
    weights, plan_folds = fold_weights(args.fit), fold_plan_values(args.plans_fit)
    rows = {name: searched(Path(home), Path(data), scorer, weights, plan_folds) for name, home, data in args.sets}
    chosen = {fold: max(WEIGHTS, key=lambda w: sum(objective([r for r in rs[w] if r["fold"] == fold])
                                                   for rs in rows.values()) / len(rows))
              for fold in (0, 1)}
    out: dict[str, Any] = {"benchmark": "context-windows", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                           "machine": {"python": platform.python_version(), "platform": platform.platform()},
                           "neighbour_chars": NEIGHBOUR_CHARS, "embed_chars": EMBED_CHARS,
                           "weights_chosen": {"fitted on A": chosen[0], "fitted on B": chosen[1]}, "sets": {}}
    for name, by_weight in rows.items():
        # Each question under the weight chosen on the other fold (the lists are in the same order).
        cv = [a if a["fold"] == 0 else b for a, b in zip(by_weight[chosen[1]], by_weight[chosen[0]], strict=True)]
        paired = [(r10(r), r10(r0)) for r, r0 in zip(cv, by_weight[0.0], strict=True)]
        entry: dict[str, Any] = {
            "in_sample": {str(w): locomo.score(rs)["overall"] for w, rs in by_weight.items()},
            "before": locomo.score(by_weight[0.0]), "cv": locomo.score(cv),
            "better": sum(a > b for a, b in paired), "worse": sum(a < b for a, b in paired)}
        out["sets"][name] = entry
        b, c = entry["before"]["overall"], entry["cv"]["overall"]
        print(f"{name}: R@10 / NDCG@10 {b['recall@10']} / {b['ndcg@10']} -> {c['recall@10']} / {c['ndcg@10']} "
              f"(2-fold CV; {entry['better']} better, {entry['worse']} worse)")
        for w, o in entry["in_sample"].items():
            print(f"  in-sample weight {w}: R@10 {o['recall@10']} NDCG@10 {o['ndcg@10']}")
    print(f"weights chosen: {out['weights_chosen']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
