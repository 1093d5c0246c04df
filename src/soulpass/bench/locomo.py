"""The LoCoMo turn-retrieval benchmark, run through the normal write and search paths.

Each conversation goes into its own account through the LoCoMo-layout importer
(:mod:`soulpass.importers.locomo`: every session a sandbox archived in order, turns with the
session's date as event time). Every QA item with evidence is a query over the turns (``turn_user``
and ``turn_llm``); a hit counts when it is one of the item's evidence turns. The mapping from
record back to dialog id travels in a tag of the record (``dia:D1:3``) that only the importer writes
and this module reads: the retrieval itself knows nothing of the data set. The same command runs
BEAM (user-assistant chats converted to the LoCoMo layout).

Metrics (fractional recall, as the LoCoMo paper): Recall@k = |evidence ∩ top-k| / |evidence|,
NDCG@10 with binary relevance, both averaged over questions, overall and per category. Also per
question: the tokens of the context block that would carry its top ``k_context`` hits to a model
(:mod:`soulpass.bench.context`). Items the importer could not take are counted and listed.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from soulpass.bench.context import ContextMeter
from soulpass.engine import Account, Soulpass
from soulpass.errors import InvalidInput
from soulpass.importers.base import Failure
from soulpass.importers.locomo import TAG_PREFIX, Conversation, Question, Session, Turn, ingest, load, parse_when, read
from soulpass.index.catalog import Filters
from soulpass.index.search import Hit
from soulpass.retrieval.plans import planned_search

__all__ = ["BASE_PARTS", "CATEGORIES", "KS", "TURN_KINDS", "Conversation", "Question", "Session", "Turn", "load",
           "parse_when", "planned_searcher", "read", "run"]

KS = (1, 5, 10, 20)
# LoCoMo's categories (1-5), then BEAM's abilities (11-19).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial",
              11: "extraction", 12: "multi-session", 13: "event-ordering", 14: "temporal-reasoning",
              15: "knowledge-update", 16: "contradiction", 17: "preference", 18: "instruction", 19: "summarization"}
TURN_KINDS = ("turn_user", "turn_llm")


def account_name(conv: Conversation) -> str:
    return "locomo-" + re.sub(r"[^A-Za-z0-9_-]", "-", conv.sample_id)


def dia_of(account: Account) -> dict[str, str]:
    """Record id → dialog id, from the tags of both turn kinds."""
    out = {}
    for rec in (r for kind in TURN_KINDS for r in account.records(kind)):
        for tag in rec.tags:
            if tag.startswith(TAG_PREFIX):
                out[rec.id] = tag[len(TAG_PREFIX):]
    return out


@dataclass
class Scores:
    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    ndcg: list[float] = field(default_factory=list)

    def add(self, ranked: Sequence[str], evidence: Sequence[str]) -> None:
        gold = set(evidence)
        for k in KS:
            self.recall[k].append(len(gold & set(ranked[:k])) / len(gold))
        dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
        self.ndcg.append(dcg / ideal)

    def summary(self) -> dict[str, Any]:
        n = len(self.ndcg)
        out: dict[str, Any] = {"questions": n}
        for k in KS:
            out[f"recall@{k}"] = round(sum(self.recall[k]) / n, 4) if n else None
        out["ndcg@10"] = round(sum(self.ndcg) / n, 4) if n else None
        return out


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


Searcher = Callable[[Account, str, int], Sequence[str] | Sequence[Hit]]  # ids, or hits with their parts


def default_searcher(account: Account, query: str, k: int) -> list[Hit]:
    """The engine's search (``Account.search``: the ranking and the standing part)."""
    return list(account.search(query, k, kinds=TURN_KINDS))


def planned_searcher(account: Account, query: str, k: int) -> list[Hit]:
    """Every retrieval plan by question shape (``soulpass.retrieval.plans.planned_search``: the
    person, hop, topic, unit and standing parts), over the account's index."""
    return planned_search(account.index(), query, k, Filters(kinds=TURN_KINDS))


# Score parts every hybrid hit has; any other part in a top 10 is named in the result (``parts``).
BASE_PARTS = frozenset({"fused", "context", "session", "fts", "fts_rank", "dense", "dense_rank", "score"})


def evaluate(account: Account, conv: Conversation, searcher: Searcher = default_searcher,
             k: int = max(KS), meter: ContextMeter | None = None) -> tuple[list[dict[str, Any]], list[float]]:
    """One row per question (its ranked dialog ids; with ``meter``, the tokens of the context block
    carrying its top ``meter.k`` hits) and the search latencies in ms."""
    dia = dia_of(account)
    depth = max(k, meter.k if meter else 0)
    rows, latencies = [], []
    for q in conv.questions:
        t0 = time.perf_counter()
        found = searcher(account, q.text, depth)
        latencies.append((time.perf_counter() - t0) * 1000)
        ids = [h if isinstance(h, str) else h.id for h in found]
        parts = sorted({p for h in found[:10] if not isinstance(h, str) for p in h.parts} - BASE_PARTS)
        row: dict[str, Any] = {"conversation": conv.sample_id, "question": q.text, "category": q.category,
                               "evidence": list(q.evidence), "ranked": [dia.get(i, i) for i in ids],
                               "parts": parts}
        if meter is not None:
            row["context_tokens"] = meter.tokens(account, ids)
        rows.append(row)
    return rows, latencies


def score(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    overall, per_cat = Scores(), {c: Scores() for c in CATEGORIES}
    for row in rows:
        overall.add(row["ranked"], row["evidence"])
        per_cat.setdefault(row["category"], Scores()).add(row["ranked"], row["evidence"])
    return {"overall": overall.summary(),
            "per_category": {f"{c} {CATEGORIES.get(c, '?')}": s.summary() for c, s in per_cat.items() if s.ndcg}}


Progress = Callable[[str, int, int], None]


@dataclass
class _Tally:
    rows: list[dict[str, Any]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    ingest_s: float = 0.0
    index_s: float = 0.0
    turns_ingested: int = 0
    rebuild_mismatches: int = 0


def run(sp: Soulpass, conversations: Sequence[Conversation], *, reuse: bool = False,
        check_rebuild: bool = False, searcher: Searcher = default_searcher,
        progress: Progress | None = None, meter: ContextMeter | None = None,
        failures: Sequence[Failure] = ()) -> dict[str, Any]:
    """Ingest (unless ``reuse`` finds the account already there), query, score; optionally delete the
    index, rebuild it from the files and check that every query's top 10 is unchanged.

    ``failures``: items already lost reading the data (:func:`read`); with those of each
    conversation's reading and ingest they are counted and listed under ``failures``.
    ``meter``: also measure the context block of every question's top hits (default k=10)."""
    meter = meter or ContextMeter()
    tally = _Tally(failures=list(failures))
    for n, conv in enumerate(conversations):
        _run_one(sp, conv, tally, reuse=reuse, check_rebuild=check_rebuild, searcher=searcher, meter=meter)
        if progress:
            progress(conv.sample_id, n + 1, len(conversations))
    embedder = sp.embedder()
    tokens = [float(r["context_tokens"]) for r in tally.rows]
    result: dict[str, Any] = {
        "benchmark": "locomo-turn-retrieval",
        "conversations": len(conversations),
        "turns": sum(c.turns for c in conversations),
        "dropped_evidence_ids": sum(c.dropped_evidence for c in conversations),
        "embedder": embedder.model_id if embedder else None,
        "int8_queries": bool(getattr(embedder, "int8_queries", False)),  # the query's arithmetic (MiniLM)
        "late": late.model_id if (late := sp.late()) is not None else None,  # the late-interaction scorer
        **score(tally.rows),
        "parts": _part_counts(tally.rows),
        "ingest": {"turns": tally.turns_ingested, "seconds": round(tally.ingest_s, 2),
                   "turns_per_s": round(tally.turns_ingested / tally.ingest_s, 1) if tally.ingest_s else None,
                   "index_seconds": round(tally.index_s, 2)},
        "failures": {"count": len(tally.failures), "items": [f.to_json() for f in tally.failures]},
        "latency_ms": {"p50": round(_percentile(tally.latencies, 0.5), 2),
                       "p95": round(_percentile(tally.latencies, 0.95), 2), "queries": len(tally.latencies)},
        "context_tokens": {"k": meter.k, "tokenizer": meter.tokenizer,
                           "mean": round(sum(tokens) / len(tokens), 1) if tokens else None,
                           "p50": _percentile(tokens, 0.5), "p95": _percentile(tokens, 0.95)},
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if check_rebuild:
        result["rebuild"] = {"queries_with_other_top10": tally.rebuild_mismatches}
    result["_rows"] = tally.rows
    return result


def _part_counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many questions have each score part beyond the hybrid ones (``BASE_PARTS``) in their top 10."""
    counts: dict[str, int] = {}
    for row in rows:
        for part in row.get("parts", ()):
            counts[part] = counts.get(part, 0) + 1
    return dict(sorted(counts.items()))


def _run_one(sp: Soulpass, conv: Conversation, tally: _Tally, *, reuse: bool, check_rebuild: bool,
             searcher: Searcher, meter: ContextMeter) -> None:
    name = account_name(conv)
    existing = name in sp.accounts()
    account = sp.account(name, create=True)
    tally.failures += conv.failures
    try:
        if not (reuse and existing and account.head() > 0):
            if existing:
                raise InvalidInput(f"account {name} already exists; use a fresh home or --reuse", field="home")
            t0 = time.perf_counter()
            ingested = ingest(account, conv)
            tally.ingest_s += time.perf_counter() - t0
            tally.turns_ingested += ingested.turns
            tally.failures += ingested.failures
        t0 = time.perf_counter()
        account.index()  # catch up and embed before timing queries
        tally.index_s += time.perf_counter() - t0
        conv_rows, lat = evaluate(account, conv, searcher, meter=meter)
        tally.rows += conv_rows
        tally.latencies += lat
        if check_rebuild:
            account.drop_index()
            account.index()  # opens an empty index and catches up from version 0: a full rebuild
            again, _ = evaluate(account, conv, searcher)
            tally.rebuild_mismatches += sum(a["ranked"][:10] != b["ranked"][:10]
                                            for a, b in zip(conv_rows, again, strict=True))
    finally:
        account.close()
