"""How a hybrid search ranks its candidates: both retrievers' scores standardised and fused, read in
context (the better neighbour, the best in the session).

A search ranks ~100-300 candidates: plain Python over dicts is as fast here as arrays would be (the
arrays cost as much to fill); only the returned candidates get their parts as a dict.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from soulpass.ids import PERMANENT_PREFIXES, TEMP_PREFIXES

__all__ = ["CONTEXT_IN_SESSION", "W_CONTEXT", "W_DENSE", "W_FTS", "W_LATE", "W_REPLY", "W_SESSION", "CandidateScores",
           "is_reply", "standardised"]

# Each retriever's scores are standardised over the candidates (z-scores) and added with weights; a
# turn is read in its conversation: its better neighbour's score and the best score in its session
# count too. The four weights are fitted on LoCoMo and BEAM-500K together (benchmarks/retrieval_fit.py,
# coordinate ascent on R@10 + NDCG/2 from equal weights, rounded): in-sample there. ``W_REPLY`` and
# ``W_LATE`` were each fitted alone afterwards, the others as they are (``retrieval_fit.py --only``);
# the headline, two-fold cross-validation by conversation, is in docs/performance.md. Other traits of
# a turn (its speaker named by the query, whether it asks, its length) were tried and left out: they
# moved neither set under cross-validation.
W_FTS = 0.553
W_DENSE = 1.69
W_CONTEXT = 0.402  # x (better neighbour's fused score - the lowest)
W_SESSION = 0.615  # x (best fused-in-context score in the session - the lowest)
CONTEXT_IN_SESSION = 0.5  # how much of its context a turn brings to its session's best
# The optional late-interaction score (soulpass.embed.colbert: MaxSim over token vectors), standardised
# like the others and added to the fused part; 0 where a search has no late scorer. Fitted alone, the
# other weights as below and above, on LoCoMo and BEAM-500K together (benchmarks/late_interaction.py;
# its two-fold cross-validation by conversation is in docs/performance.md).
W_LATE = 1.3
# An agent's reply (a ``turn_llm``) against what a person said: an assistant's reply elaborates what
# it answers, and what a memory is asked for is mostly what the user told. Added to a reply's score
# (negative: a reply ranks below a person's turn that scores up to ~3 z-scores less); 0 for every
# other kind, so it moves nothing where every turn is a person's.
W_REPLY = -2.937

_NO_LINKS: tuple[str | None, str | None] = (None, None)


class CandidateScores:
    """Both retrievers' exact scores for the candidates, and their fusion."""

    def __init__(self, fts: dict[str, float], dense: dict[str, float]) -> None:
        self.fts, self.dense = fts, dense
        self.late: dict[str, float] = {}  # MaxSim of every candidate, where the search has a late scorer
        self.fts_checked: set[str] = set(fts)
        self.known: set[str] = set()  # only ever added to
        self._sorted: list[str] = []

    @property
    def ids(self) -> list[str]:  # the candidates, sorted (again only when some were added)
        if len(self._sorted) != len(self.known):
            self._sorted = sorted(self.known)
        return self._sorted

    def standardised(self, dense: bool) -> tuple[dict[str, float], dict[str, float]]:
        """Each retriever's scores as z-scores over the candidates (BM25 0 where no term matched)."""
        ids = self.ids
        zf = dict(zip(ids, standardised([self.fts.get(i, 0.0) for i in ids]), strict=True))
        zd = dict.fromkeys(ids, 0.0)
        if dense:
            # An id the vector index lacks (still in the embedding backlog) is judged by its full
            # text alone: its dense z-score is taken to be its full-text one, so it is neither
            # buried by the heavier dense weight nor lifted.
            have = [i for i in ids if i in self.dense]
            zd.update(zf)
            zd.update(zip(have, standardised([self.dense[i] for i in have]), strict=True))
        return zf, zd

    def _late_standardised(self, among: Collection[str]) -> dict[str, float]:
        """The late scores as z-scores over the candidates ``among`` (0 where there are none)."""
        have = [i for i in among if i in self.late]
        z = dict.fromkeys(among, 0.0)
        z.update(zip(have, standardised([self.late[i] for i in have]), strict=True))
        return z

    def fused(self, dense: bool) -> dict[str, float]:
        """Both z-scores added, equally weighted: what neighbours and sessions are judged by."""
        zf, zd = self.standardised(dense)
        return {i: zf[i] + zd[i] for i in zf}

    def best(self, n: int, dense: bool) -> list[str]:
        fused = self.fused(dense)
        return sorted(fused, key=lambda i: (-fused[i], i))[:n]

    def rank(self, sessions: dict[str, str | None], links: dict[str, tuple[str | None, str | None]],
             dense: bool, limit: int | None = None) -> list[tuple[str, dict[str, float]]]:
        """Candidates (those in ``sessions``, each with its session or None) by their scores read in
        context. ``limit``: only the best so many (every candidate is scored; only those get their parts)."""
        zf, zd = self.standardised(dense)
        fused = {i: zf[i] + zd[i] for i in zf if i in sessions}
        if not fused:
            return []
        low = min(fused.values())  # what a turn outside the candidates is taken to score
        zl = self._late_standardised(fused)
        context: dict[str, float] = {}
        for i in fused:
            near = low
            for n in links.get(i, _NO_LINKS):
                if n and (s := fused.get(n, low)) > near:
                    near = s
            context[i] = near - low
        in_context = {i: s + CONTEXT_IN_SESSION * context[i] for i, s in fused.items()}
        floor = min(in_context.values())
        best_in_session: dict[str, float] = {}
        for i, s in in_context.items():
            session = sessions[i]
            if session is not None and s > best_in_session.get(session, floor):
                best_in_session[session] = s
        scored: list[tuple[float, str, float, float, float, float]] = []
        for i in fused:
            session = sessions[i]
            top = best_in_session.get(session, floor) if session is not None else in_context[i]
            fused_part, context_part = W_FTS * zf[i] + W_DENSE * zd[i] + W_LATE * zl[i], W_CONTEXT * context[i]
            session_part = W_SESSION * (top - floor)
            reply_part = W_REPLY if is_reply(i) else 0.0
            score = fused_part + context_part + session_part + reply_part  # the parts' sum, in their order
            scored.append((-score, i, fused_part, context_part, session_part, reply_part))
        scored.sort()  # best first, ties by id (ids are unique: nothing after them is compared)
        fts, dense_scores = self.fts, self.dense
        fts_rank = _ranks(fts, fused)
        dense_rank = _ranks(dense_scores, fused)
        out = []
        for negated, i, fused_part, context_part, session_part, reply_part in scored[:limit]:
            parts = {"fused": fused_part, "context": context_part, "session": session_part}
            if reply_part:
                parts["reply"] = reply_part
            if i in fts:
                parts["fts"], parts["fts_rank"] = fts[i], fts_rank[i]
            if i in dense_scores:
                parts["dense"], parts["dense_rank"] = dense_scores[i], dense_rank[i]
            if i in self.late:
                parts["late"] = self.late[i]
            parts["score"] = -negated
            out.append((i, parts))
        return out


_REPLY_PREFIXES = (PERMANENT_PREFIXES["turn_llm"] + "_", TEMP_PREFIXES["turn_llm"])


def is_reply(record_id: str) -> bool:
    """Whether the record is an agent's turn (``turn_llm``): its id says so (``TL_…``, ``tl_temp_…``)."""
    return record_id.startswith(_REPLY_PREFIXES)


def _ranks(scores: dict[str, float], among: Collection[str]) -> dict[str, int]:
    """1-based rank of each candidate by one retriever's score (ties by id)."""
    ordered = sorted((-s, i) for i, s in scores.items() if i in among)
    return {i: n for n, (_, i) in enumerate(ordered, 1)}


def standardised(values: list[float]) -> list[float]:
    """z-scores (0 for all when they are all equal)."""
    if not values:
        return []
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / sd if sd > 1e-12 else 0.0 for v in values]
