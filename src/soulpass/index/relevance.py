"""A relevance people can read: how well one hit matches the query on its own, from 0 to 1.

A hit's ``score`` ranks it against the other candidates (standardised scores added: a lone hit
scores 0.0, a weak one below zero) and says nothing read alone. Its relevance is the larger of
the share of the query's words the hit contains and its cosine similarity to the query (when it
has a vector): 1.0 holds every word or means the same, 0.0 shares nothing with it. It orders
nothing; ``min_score`` drops the hits below a relevance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from soulpass.errors import InvalidInput
from soulpass.index.catalog.query import query_terms
from soulpass.index.results import SearchResults
from soulpass.index.search import Hit

__all__ = ["above", "relevance"]

_WORD = re.compile(r"\w+")
_TEXT_READ = 200_000  # characters of a hit's text looked at for the query's words


def relevance(query: str, hit: Hit) -> float:
    """How well ``hit`` matches ``query`` by itself, in [0, 1] (rounded to 3 places)."""
    terms = query_terms(query)
    words = {w.lower() for w in _WORD.findall(hit.text[:_TEXT_READ])}
    matched = sum(1 for t in terms if t in words or any(_same_stem(t, w) for w in words))
    coverage = matched / len(terms) if terms else 0.0
    cosine = max(0.0, min(1.0, float(hit.parts.get("dense", 0.0))))
    return round(max(coverage, cosine), 3)


def above(hits: Iterable[Hit], query: str, min_score: float | None) -> SearchResults:
    """The hits whose relevance is at least ``min_score`` (all of them when None), order kept."""
    found = hits if isinstance(hits, SearchResults) else SearchResults(hits)
    if min_score is None:
        return found
    if isinstance(min_score, bool) or not isinstance(min_score, int | float) or not 0.0 <= min_score <= 1.0:
        raise InvalidInput(f"min_score must be a number from 0 to 1, not {min_score!r}", field="min_score")
    return SearchResults([h for h in found if relevance(query, h) >= min_score], found.pending_embeddings,
                         found.dense_error)


def _same_stem(term: str, word: str) -> bool:
    """``live`` and ``lives``, ``planted`` and ``plant``: the full-text index stems (Porter); this
    is its rough equal: a shared start of at least four letters, all but two of the shorter word."""
    n = 0
    for a, b in zip(term, word, strict=False):
        if a != b:
            break
        n += 1
    return n >= max(4, min(len(term), len(word)) - 2)
