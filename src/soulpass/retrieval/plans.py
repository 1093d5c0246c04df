"""Retrieval plans by what a question asks (``soulpass.retrieval.analysis``): small functions over the
index's public search, never branches inside it.

A plan asks the search for more than it returns (``Plan.depth``) and re-scores those hits; each
adjustment is a score part of its own in ``Hit.parts``, so "why this hit" shows it:

- ``person``: the named person's own turns (the speaker is the record's agent) are searched on
  their own, and each is lifted by how well it scores among them (person-scoped candidates: a
  turn of theirs the plain search missed comes in);
- ``hop``: for lists and comparisons, the names and content words of the first hits become a
  second query (a second hop: the answer is spread over turns the question only half names); a hit
  the second query also finds is lifted by how well it scores there;
- ``topic`` and ``unit``: for an order or a summary, the topic's turns across sessions
  (``soulpass.retrieval.units``): the question's topic words alone are a second query (``topic``:
  the user's own turns for a question in the first person about an order: what "I brought up"),
  and the sessions that query finds best are units that point to their turns: each one's best turn
  is lifted by how well its session scores (``unit``), so that one session does not fill the top;
- ``when``: for a question that names a time ("in July 2023", "on 8 May 2023"), what was said then
  is searched on its own (``Filters(since=..., until=...)``: from ``WHEN_BEFORE`` before the time
  named to ``WHEN_AFTER`` after it: an event is spoken of after it happened, and planned before),
  and each hit there is lifted by how well it scores among them; a turn of then that the plain
  search missed comes in;
- ``standing``: for a request, or a question that a tagged instruction names a topic of, the
  standing instructions or preferences that share a topic with it (tagged where they were written,
  ``soulpass.retrieval.standing``) govern it: the best two are brought in and lifted, for a
  request by the whole ``W_STANDING`` (a long request names many topics: its share of them was too
  little a lift; docs/retrieval.md), for any other question by the share of its topics they name
  (what answers a question about the past comes before the rule on how to answer it).

Spreading a list's hits over sessions, and taking part of the search's session term off for
questions that gather, were tried and removed: measured on both public sets they lost
(docs/retrieval.md).

A plain question about one fact, naming nobody and asking nothing, is the search as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.catalog.query import as_utc
from soulpass.index.search import Hit, check_search
from soulpass.retrieval.analysis import QueryAnalysis, Shape, analyse, named_participants
from soulpass.retrieval.instructions import shared_topics, standing_instructions
from soulpass.retrieval.standing import STANDING_TAGS
from soulpass.retrieval.units import session_units, topic_query
from soulpass.retrieval.when import DateRange
from soulpass.retrieval.words import topic_words

__all__ = ["Plan", "Searcher", "governed_search", "plan_for", "planned_search", "run_plan", "topic_to_ask", "within"]

# The adjustments, in units of the search's score (a sum of weighted z-scores). Chosen once from what
# they mean, then measured on both public sets together (docs/retrieval.md), not fitted per set; the
# units' four (W_TOPIC to UNIT_TURNS) are the best point of a grid on both sets together, in-sample
# (benchmarks/session_units.py: its two-fold cross-validation by conversation is the headline), and
# so are the ``when`` part's three (W_WHEN to WHEN_AFTER: benchmarks/time_named.py).
W_PERSON = 1.0  # x a turn's score among the named person's own turns, scaled to 0..1
PEOPLE = 2  # named people whose own turns are searched
W_HOP = 2.0  # x the hit's score in the second query, scaled to 0..1 over that query's hits
W_WHEN = 8.0  # x a hit's score among what was said at the time a question names, scaled to 0..1
WHEN_BEFORE = timedelta(days=7)  # the time a question names, widened before: what was planned
WHEN_AFTER = timedelta(days=7)  # and after: what was told of it later
W_STANDING = 3.0  # a governing standing statement's lift: whole for a request, x the topics' share else
DEPTH = 50  # hits a plan re-scores
HOP_FROM = 3  # the first hits a second query is read from
HOP_WORDS = 8  # new words at most in a second query
STANDING_DEPTH = 5  # tagged standing statements looked at per request
STANDING_MAX = 2  # standing statements lifted per request
W_TOPIC = 4.0  # x the hit's score in the topic query, scaled to 0..1 over that query's hits
W_UNIT = 4.0  # x a session unit's score (1: the best session) for the session's best turn
UNIT_SESSIONS = 3  # session units whose best turns are lifted
UNIT_TURNS = 1  # turns a session unit points to (its best among the topic query's hits)
UNIT_SHAPES = (Shape.ORDER, Shape.SUMMARY)  # the shapes whose answer is the topic across sessions
OWN_TURNS_SHAPES = (Shape.ORDER,)  # in the first person, the topic query reads the user's own turns
OWN_KIND = "turn_user"  # the kind of the user's own turns
TOPIC_WORDS = 2  # the fewest words of a topic that the engine's search asks instead of the question

_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
_STANDING = frozenset(STANDING_TAGS)


class Searcher(Protocol):
    """The index's public search (``AccountIndex.search``)."""

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               extra: Sequence[CatalogRow] = ()) -> list[Hit]: ...


@dataclass(frozen=True)
class Plan:
    """What a search does beyond the plain search for one question."""

    who: tuple[str, ...] = ()  # people whose own turns are lifted
    hop: bool = False  # a second query from the first hits
    standing: tuple[str, ...] = ()  # a question's topics, matched against standing instructions
    request: bool = False  # the question is a request: a statement that governs it is lifted whole
    topic: str = ""  # the topic query of an order or a summary, whose sessions are units
    own_turns: bool = False  # the topic query reads the user's own turns only
    when: tuple[DateRange, ...] = ()  # the times the question names: what was said then is lifted

    @property
    def plain(self) -> bool:
        return not (self.who or self.hop or self.standing or self.topic or self.when)


def plan_for(analysis: QueryAnalysis) -> Plan:
    """The plan for a question as ``analyse`` read it."""
    units = analysis.shape in UNIT_SHAPES
    return Plan(who=analysis.who, hop=analysis.shape in (Shape.LIST, Shape.COMPARISON),
                standing=analysis.topics if analysis.request else (), request=analysis.request,
                topic=topic_query(analysis.text) if units else "",
                own_turns=units and analysis.user and analysis.shape in OWN_TURNS_SHAPES, when=analysis.when)


def governed_search(searcher: Searcher, query: str, k: int = 10, filters: Filters | None = None,
                    extra: Sequence[CatalogRow] = ()) -> list[Hit]:
    """The search the engine runs (``Account.search``, ``Sandbox.search``): the plain search, with
    the standing instructions that govern the question lifted (the ``standing`` part). A request is
    governed by those it shares a topic with; any other question by the tagged ones that name one of
    its topics ("Always include the logs when I ask about matcher failures" governs "What happened
    when the matcher failed?"), so a question no tagged instruction speaks to costs one small
    filtered search more. A question that names a time ("What did she paint in July 2023?") also
    has what was said then lifted (the ``when`` part): one search within that time more. The other
    parts (``person``, ``hop``, ``units``: :func:`planned_search`) are not in it: measured end to
    end they cost more time than they gained (docs/retrieval.md).

    A question whose answer spans a topic across the conversation (``QueryAnalysis.across``: a
    summary, an order asked outright) is searched by its topic (``topic_query``: "Can you walk me
    through the order in which I brought up the aspects of the chat app's message storage?" by
    "chat app's message storage"), read again as such: the words that ask for the summary or the
    order name nothing to find, and drown the topic in both the full text and the query's vector.
    A topic of fewer than ``TOPIC_WORDS`` words is too little to stand for the question, which is
    then searched as asked."""
    check_search(query, k)
    analysis = analyse(query)
    when = analysis.when  # the times the question names, whatever it is then asked by
    if analysis.across and (topic := topic_to_ask(query)):
        query, analysis = topic, analyse(topic)
    plan = Plan(standing=analysis.topics, request=analysis.request, when=when)
    if not analysis.topics:
        return run_plan(replace(plan, standing=()), searcher, query, k, filters, extra)
    if analysis.request:
        return run_plan(plan, searcher, query, k, filters, extra)
    tagged = _tagged(searcher, query, analysis.topics, filters, extra)
    if not any(share for _, share in tagged):
        return run_plan(replace(plan, standing=()), searcher, query, k, filters, extra)
    return run_plan(plan, searcher, query, k, filters, extra, tagged=tagged)


def topic_to_ask(query: str) -> str:
    """``query``'s topic words (``topic_query``) where there are at least ``TOPIC_WORDS`` of them, else ""."""
    topic = topic_query(query)
    return topic if len(topic.split()) >= TOPIC_WORDS else ""


def planned_search(searcher: Searcher, query: str, k: int = 10, filters: Filters | None = None,
                   extra: Sequence[CatalogRow] = ()) -> list[Hit]:
    """The ``k`` best hits for ``query``, searched by the plan its reading asks for. The people it
    may name are the speakers of its first hits (the index keeps no list of them): a question with a
    capitalised word past its first is searched deeper once, to see whether it names one."""
    check_search(query, k)  # before the question is read: bad input is the search's error
    plan = plan_for(analyse(query))
    if plan.plain and not _NAME.search(query, 1):
        return searcher.search(query, k, filters, extra)
    hits = searcher.search(query, max(DEPTH, k), filters, extra)
    speakers = sorted({h.row.agent for h in hits if h.row is not None and h.row.agent and h.row.agent[:1].isupper()})
    if named_participants(query, speakers):
        plan = plan_for(analyse(query, speakers))
    return run_plan(plan, searcher, query, k, filters, extra, hits)


def run_plan(plan: Plan, searcher: Searcher, query: str, k: int, filters: Filters | None = None,
             extra: Sequence[CatalogRow] = (), hits: list[Hit] | None = None,
             tagged: list[tuple[Hit, float]] | None = None) -> list[Hit]:
    """The ``k`` best hits for ``query`` under ``plan``; ``hits``: the plain search's best ``DEPTH``
    (or more), ``tagged``: the tagged standing statements with their shares (``_tagged``), where the
    caller has them already."""
    if plan.plain:
        return hits[:k] if hits is not None else searcher.search(query, k, filters, extra)
    if hits is None:
        hits = searcher.search(query, max(DEPTH, k), filters, extra)
    score = {h.id: h.score for h in hits}
    parts: dict[str, dict[str, float]] = {h.id: {} for h in hits}
    by_id = {h.id: h for h in hits}
    floor = min(score.values(), default=0.0)  # what a hit new to the plain search is taken to score
    lifts: list[tuple[str, float, list[tuple[Hit, float]]]] = []
    for person in plan.who[:PEOPLE]:  # the person's own turns, ranked among themselves
        lifts.append(("person", W_PERSON, _scaled(searcher.search(query, DEPTH, replace(filters or Filters(),
                                                                                          agent=person), extra))))
    if plan.hop and hits:
        lifts.append(("hop", W_HOP, _second_hop(searcher, query, hits, filters, extra)))
    if plan.topic:
        lifts.extend(_units(searcher, plan, filters, extra))
    if plan.when and (then := within(plan.when, filters)) is not None:
        lifts.append(("when", W_WHEN, _scaled(searcher.search(query, DEPTH, then, extra))))
    for name, weight, found in lifts:
        for h, lift in found:
            if h.id not in by_id:
                by_id[h.id], score[h.id], parts[h.id] = h, floor, {}
            parts[h.id][name] = max(parts[h.id].get(name, 0.0), weight * lift)
    if plan.standing:
        for h, share in _standing(searcher, plan, query, hits, filters, extra, tagged):
            if h.id not in by_id:
                by_id[h.id], score[h.id], parts[h.id] = h, h.score, {}
            parts[h.id]["standing"] = W_STANDING * share
    total = {i: score[i] + sum(parts[i].values()) for i in by_id}
    best = sorted(total, key=lambda i: (-total[i], i))[:k]
    return [replace(by_id[i], score=total[i], parts={**by_id[i].parts, **parts[i], "score": total[i]}) for i in best]


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
    return _scaled(searcher.search(f"{query} {' '.join(new[:HOP_WORDS])}", DEPTH, filters, extra))


def within(when: Sequence[DateRange], filters: Filters | None) -> Filters | None:
    """``filters`` narrowed to the times ``when`` names, from ``WHEN_BEFORE`` before the first to
    ``WHEN_AFTER`` after the last (None where the filters' own time bounds leave nothing of it)."""
    scope = filters or Filters()
    since = _midnight(min(r.start for r in when)) - WHEN_BEFORE
    until = _midnight(max(r.end for r in when)) + timedelta(days=1) + WHEN_AFTER
    if scope.since is not None:
        since = max(since, as_utc(scope.since))
    if scope.until is not None:
        until = min(until, as_utc(scope.until))
    return replace(scope, since=since, until=until) if since < until else None


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _units(searcher: Searcher, plan: Plan, filters: Filters | None, extra: Sequence[CatalogRow],
           ) -> list[tuple[str, float, list[tuple[Hit, float]]]]:
    """The ``topic`` lift (the topic query's hits, scaled) and the ``unit`` lift (the ``UNIT_TURNS``
    best turns of each of the ``UNIT_SESSIONS`` sessions that query finds best, by its session's score)."""
    scope = filters or Filters()
    if plan.own_turns and (not scope.kinds or OWN_KIND in scope.kinds):
        scope = replace(scope, kinds=(OWN_KIND,))
    found = searcher.search(plan.topic, DEPTH, scope, extra)
    units = session_units(found, UNIT_SESSIONS)
    pointed = [(turn, u.score) for u in units for turn in u.turns[:UNIT_TURNS]]
    return [("topic", W_TOPIC, _scaled(found)), ("unit", W_UNIT, pointed)]


def _scaled(hits: list[Hit]) -> list[tuple[Hit, float]]:
    """Each hit with its score scaled to 0..1 over ``hits`` (1: the best)."""
    if not hits:
        return []
    low, high = min(h.score for h in hits), max(h.score for h in hits)
    return [(h, (h.score - low) / (high - low) if high > low else 1.0) for h in hits]


def _standing(searcher: Searcher, plan: Plan, query: str, hits: list[Hit], filters: Filters | None,
              extra: Sequence[CatalogRow], tagged: list[tuple[Hit, float]] | None = None,
              ) -> list[tuple[Hit, float]]:
    """The ``STANDING_MAX`` standing instructions and preferences that govern a question best (those
    tagged where they were written: ``tagged`` where the caller searched them already; and those
    among the hits), each with its share of the lift: 1 for a request, else the share of the
    question's topics it names; one that names none governs nothing."""
    if tagged is None:
        tagged = _tagged(searcher, query, plan.standing, filters, extra)
    shares = {h.id: share for h, share in tagged}  # each statement read once
    unconsolidated = {r.id for r in extra}
    found = []
    for h in {h.id: h for h in [*(h for h, _ in tagged), *hits]}.values():
        if not _may_stand(h, unconsolidated):
            continue
        if share := (shares[h.id] if h.id in shares else _shares(h, plan.standing)):
            found.append((h, 1.0 if plan.request else share))
    found.sort(key=lambda f: (-f[1], -f[0].score, f[0].id))
    return found[:STANDING_MAX]


def _tagged(searcher: Searcher, query: str, topics: tuple[str, ...], filters: Filters | None,
            extra: Sequence[CatalogRow]) -> list[tuple[Hit, float]]:
    """The best ``STANDING_DEPTH`` statements tagged standing where they were written, each with the
    share of ``topics`` (the question's) it names."""
    found = searcher.search(query, STANDING_DEPTH, replace(filters or Filters(), tags=STANDING_TAGS), extra)
    return [(h, _shares(h, topics)) for h in found]


def _may_stand(hit: Hit, unconsolidated: set[str]) -> bool:
    """Whether ``hit`` may give a standing statement: it was tagged as one when it was consolidated,
    or it is not consolidated yet (a sandbox's buffer), so it is read as written. Any other hit (an
    untagged turn, an assistant's reply) gives none, and is not read again at each search."""
    return hit.id in unconsolidated or (hit.row is not None and not _STANDING.isdisjoint(hit.row.tags))


def _shares(hit: Hit, topics: tuple[str, ...]) -> float:
    """The share of ``topics`` the standing statements of ``hit`` name (0: it gives none, or names none)."""
    shared = {t for s in standing_instructions(hit.text) for t in shared_topics(s, topics)}
    return len(shared) / len(topics) if shared else 0.0
