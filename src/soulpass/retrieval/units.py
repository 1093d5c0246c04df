"""Units bigger than a turn: a conversation's sessions, as a question about a whole topic needs them.

A question that asks for an order of events or a summary ("in which order did I bring up the
aspects of X", "summarise what we did on X") is answered by the topic's turns across sessions, not
by the one session whose turns are nearest. Two readings serve it, both pure:

- :func:`topic_query`: the question without the words that speak of the conversation itself
  ("summary", "order", "mention", "discussed", "throughout our conversations") or of how the answer
  should look ("detailed", "items"), and without function words: what the topic is;
- :func:`session_units`: the sessions a search's hits fall in, each scored by the sum of its best
  hits' scores (scaled 0..1 over the hits) and pointing to its turns among them, best first.

A session's unit is computed from the hits at query time: nothing is stored, so nothing has to be
rebuilt with the index or kept consistent across backends. An extractive summary per session (its
most central turns by TF-IDF) as a unit of its own ranked the sessions no better than this sum on
the questions measured (docs/retrieval.md), and would have been derived data to keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from soulpass.index.search import Hit
from soulpass.retrieval.words import FUNCTION_WORDS, tokens, word_set

__all__ = ["META_WORDS", "SessionUnit", "session_units", "topic_query"]

SESSION_FROM = 3  # a session scores the sum of its best so many hits

# Words about the conversation and the answer, not about what was talked of: asking for a summary or
# an order ("summarise", "in order", "timeline"), for its form ("detailed", "items", "list"), or
# naming the talk itself ("discussed", "brought up", "conversations", "throughout").
META_WORDS = word_set("""
summary summaries summarise summarize summarised summarized summarising summarizing overview recap rundown
gist order ordered chronological chronologically sequence timeline mention mentioned mentions mentioning
item items list bring brought discuss discussed discussing discussion discussions conversation conversations
talk talked talking aspect aspects detail detailed details comprehensive thorough full entire whole scope
throughout different various overall main key point points cover covered covering covers walk went capture
captures come came progress progressed across
""")


@dataclass(frozen=True)
class SessionUnit:
    """One session as a unit: its score among the sessions (1: the best) and its turns among the
    hits it was read from, best first."""

    session_id: str
    score: float
    turns: tuple[Hit, ...]


def topic_query(question: str) -> str:
    """The words of ``question`` that name its topic, in order: no function words, no words about
    the conversation or the answer's form (``META_WORDS``), no bare numbers. Empty when none is left."""
    return " ".join(w for w in tokens(question)
                    if w not in FUNCTION_WORDS and w not in META_WORDS and not w.isdigit())


def session_units(hits: Sequence[Hit], n: int) -> list[SessionUnit]:
    """The ``n`` sessions whose hits score best (each the sum of its ``SESSION_FROM`` best hits'
    scores, scaled 0..1 over ``hits``), best first, ties by session id; a unit's score is its sum over the
    best session's (1: the best). Hits without a session are no unit."""
    if not hits or n < 1:
        return []
    low, high = min(h.score for h in hits), max(h.score for h in hits)
    by_session: dict[str, list[Hit]] = {}
    for h in sorted(hits, key=lambda h: (-h.score, h.id)):
        if h.row is not None and h.row.session_id is not None:
            by_session.setdefault(h.row.session_id, []).append(h)
    total = {s: sum((h.score - low) / (high - low) if high > low else 1.0 for h in turns[:SESSION_FROM])
             for s, turns in by_session.items()}
    best = sorted(total, key=lambda s: (-total[s], s))[:n]
    if not best:
        return []
    top = total[best[0]]
    return [SessionUnit(s, total[s] / top if top > 0 else 1.0, tuple(by_session[s])) for s in best]
