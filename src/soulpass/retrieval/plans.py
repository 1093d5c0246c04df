"""Retrieval plans by what a question asks (``soulpass.retrieval.analysis``): small functions over the
index's public search, never branches inside it.

A plan asks the search for more than it returns (``Plan.depth``) and re-scores those hits; each
adjustment is a score part of its own in ``Hit.parts``, so "why this hit" shows it:

- ``person``: the named person's own turns (the speaker is the record's agent) are lifted;
- ``hop``: for lists and comparisons, the names and content words of the first hits become a
  second query (a second hop: the answer is spread over turns the question only half names); a hit
  the second query also finds is lifted by how well it scores there;
- ``standing``: for a request, the standing instructions or preferences that share a topic with it
  (tagged where they were written, ``soulpass.retrieval.standing``) are brought in and placed
  above the plain hits, the more of its topics they name the higher;
- ``spread``: for lists, comparisons, orders and summaries, each hit loses a little for every
  better hit already taken from its session, so that no one session fills the top.

A plain question about one fact, naming nobody and asking nothing, is the search as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.search import Hit
from soulpass.retrieval.analysis import QueryAnalysis, Shape, analyse, named_participants
from soulpass.retrieval.instructions import shared_topics, standing_instructions
from soulpass.retrieval.standing import STANDING_TAGS
from soulpass.retrieval.words import topic_words

__all__ = ["Plan", "Searcher", "plan_for", "planned_search", "run_plan"]

# The adjustments, in units of the search's score (a sum of weighted z-scores). Chosen once from what
# they mean, then measured on both public sets together (docs/retrieval.md), not fitted per set.
W_PERSON = 0.5  # a turn by the person the question names
W_HOP = 1.0  # x the hit's score in the second query, scaled to 0..1 over that query's hits
W_STANDING = 1.0  # x the share of a request's topics a standing instruction names, above the best hit
SPREAD = {Shape.LIST: 0.5, Shape.COMPARISON: 0.5, Shape.ORDER: 1.0, Shape.SUMMARY: 1.0}  # per better hit, same session
DEPTH = 50  # hits a plan re-scores
HOP_FROM = 3  # the first hits a second query is read from
HOP_WORDS = 8  # new words at most in a second query
STANDING_DEPTH = 5  # tagged standing statements looked at per request
STANDING_MAX = 2  # standing statements placed above a request's hits

_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")


class Searcher(Protocol):
    """The index's public search (``AccountIndex.search``)."""

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               extra: Sequence[CatalogRow] = ()) -> list[Hit]: ...


@dataclass(frozen=True)
class Plan:
    """What a search does beyond the plain search for one question."""

    who: tuple[str, ...] = ()  # people whose own turns are lifted
    hop: bool = False  # a second query from the first hits
    standing: tuple[str, ...] = ()  # a request's topics, matched against standing instructions
    spread: float = 0.0  # what a hit loses per better hit already taken from its session

    @property
    def plain(self) -> bool:
        return not (self.who or self.hop or self.standing or self.spread)


def plan_for(analysis: QueryAnalysis) -> Plan:
    """The plan for a question as ``analyse`` read it."""
    return Plan(who=analysis.who, hop=analysis.shape in (Shape.LIST, Shape.COMPARISON),
                standing=analysis.topics if analysis.request else (), spread=SPREAD.get(analysis.shape, 0.0))


def planned_search(searcher: Searcher, query: str, k: int = 10, filters: Filters | None = None,
                   extra: Sequence[CatalogRow] = ()) -> list[Hit]:
    """The ``k`` best hits for ``query``, searched by the plan its reading asks for. The people it
    may name are the speakers of its first hits (the index keeps no list of them): a question with a
    capitalised word past its first is searched deeper once, to see whether it names one."""
    plan = plan_for(analyse(query))
    if plan.plain and not _NAME.search(query, 1):
        return searcher.search(query, k, filters, extra)
    hits = searcher.search(query, max(DEPTH, k), filters, extra)
    speakers = sorted({h.row.agent for h in hits if h.row is not None and h.row.agent and h.row.agent[:1].isupper()})
    if named_participants(query, speakers):
        plan = plan_for(analyse(query, speakers))
    return run_plan(plan, searcher, query, k, filters, extra, hits)


def run_plan(plan: Plan, searcher: Searcher, query: str, k: int, filters: Filters | None = None,
             extra: Sequence[CatalogRow] = (), hits: list[Hit] | None = None) -> list[Hit]:
    """The ``k`` best hits for ``query`` under ``plan``; ``hits``: the plain search's best ``DEPTH``
    (or more) where the caller has them already."""
    if plan.plain:
        return hits[:k] if hits is not None else searcher.search(query, k, filters, extra)
    if hits is None:
        hits = searcher.search(query, max(DEPTH, k), filters, extra)
    score = {h.id: h.score for h in hits}
    parts: dict[str, dict[str, float]] = {h.id: {} for h in hits}
    by_id = {h.id: h for h in hits}
    if plan.who:
        for h in hits:
            if h.row is not None and h.row.agent in plan.who:
                parts[h.id]["person"] = W_PERSON
    if plan.hop and hits:
        for h, lift in _second_hop(searcher, query, hits, filters, extra):
            if h.id not in by_id:
                by_id[h.id], score[h.id], parts[h.id] = h, min(score.values()), {}
            parts[h.id]["hop"] = W_HOP * lift
    if plan.standing:
        top = max(score.values(), default=0.0)
        for h, share in _standing(searcher, plan.standing, query, hits, filters, extra):
            if h.id not in by_id:
                by_id[h.id], score[h.id], parts[h.id] = h, h.score, {}
            parts[h.id]["standing"] = top - score[h.id] + W_STANDING * share  # above every plain hit
    total = {i: score[i] + sum(parts[i].values()) for i in by_id}
    chosen = _spread(total, by_id, plan.spread, k)
    return [replace(h, score=s, parts={**h.parts, **parts[h.id], **({"spread": s - total[h.id]} if plan.spread
                                                                        else {}), "score": s})
            for h, s in ((by_id[i], s) for i, s in chosen)]


def _second_hop(searcher: Searcher, query: str, hits: list[Hit], filters: Filters | None,
                extra: Sequence[CatalogRow]) -> list[tuple[Hit, float]]:
    """The hits of a second query (the question and the names and content words of its first hits
    that it lacks), each with its score there scaled to 0..1."""
    asked = set(topic_words(query))
    new: list[str] = []
    for h in hits[:HOP_FROM]:
        for word in [*_NAME.findall(h.text), *topic_words(h.text)]:
            if word.lower() not in asked and word.lower() not in (w.lower() for w in new):
                new.append(word)
    if not new:
        return []
    second = searcher.search(f"{query} {' '.join(new[:HOP_WORDS])}", DEPTH, filters, extra)
    if not second:
        return []
    low, high = min(h.score for h in second), max(h.score for h in second)
    return [(h, (h.score - low) / (high - low) if high > low else 1.0) for h in second]


def _standing(searcher: Searcher, topics: tuple[str, ...], query: str, hits: list[Hit],
              filters: Filters | None, extra: Sequence[CatalogRow]) -> list[tuple[Hit, float]]:
    """The ``STANDING_MAX`` standing instructions and preferences that govern a request best (those
    tagged where they were written, and those among the hits), each with the share of the request's
    topics it names; one that shares none governs nothing."""
    tagged = searcher.search(query, STANDING_DEPTH, replace(filters or Filters(), tags=STANDING_TAGS), extra)
    found = []
    for h in {h.id: h for h in [*tagged, *hits]}.values():
        shared = {t for s in standing_instructions(h.text) for t in shared_topics(s, topics)}
        if shared:
            found.append((h, len(shared) / len(topics)))
    found.sort(key=lambda f: (-f[1], -f[0].score, f[0].id))
    return found[:STANDING_MAX]


def _spread(total: dict[str, float], hits: dict[str, Hit], spread: float, k: int) -> list[tuple[str, float]]:
    """The ``k`` best by ``total``, each losing ``spread`` for every better one taken from its session."""
    order = sorted(total, key=lambda i: (-total[i], i))
    if not spread:
        return [(i, total[i]) for i in order[:k]]
    position = {i: n for n, i in enumerate(order)}
    taken: dict[str | None, int] = {}
    left = order
    chosen: list[tuple[str, float]] = []
    while left and len(chosen) < k:
        best = max(left, key=lambda i: (total[i] - spread * taken.get(_session(hits[i]), 0), -position[i]))
        chosen.append((best, total[best] - spread * taken.get(_session(hits[best]), 0)))
        session = _session(hits[best])
        if session is not None:
            taken[session] = taken.get(session, 0) + 1
        left = [i for i in left if i != best]
    return chosen


def _session(hit: Hit) -> str | None:
    return hit.row.session_id if hit.row is not None else None
