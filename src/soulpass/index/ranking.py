"""How a hybrid search ranks its candidates: both retrievers' scores standardised and fused, read in
context (the better neighbour, the best in the session), and the traits of turns.

A search ranks ~100-300 candidates: plain Python over dicts is as fast here as arrays would be (the
arrays cost as much to fill). What is skipped: the traits of turns are not read while their weights
are 0 (the default), and only the returned candidates get their parts as a dict.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from soulpass.index.catalog import Traits
from soulpass.index.recipe import TURN_KINDS
from soulpass.index.speakers import is_users, mean_by_speaker, names_speaker, speaker

__all__ = ["CONTEXT_IN_SESSION", "W_ASKS", "W_CONTEXT", "W_DENSE", "W_FTS", "W_LENGTH", "W_SESSION", "W_SPEAKER",
           "CandidateScores", "standardised"]

# Each retriever's scores are standardised over the candidates (z-scores) and added with weights; a
# turn is read in its conversation: its better neighbour's score and the best score in its session
# count too. Three traits of a turn can add to that: the query names its speaker ("I" and "my" name
# the user), it mostly asks, its length against the same speaker's other turns.
# The four fusion weights are fitted on LoCoMo and BEAM-500K together (benchmarks/retrieval_fit.py,
# coordinate ascent on R@10 + NDCG/2 from equal weights, rounded): in-sample there. Fitted on one
# set and tested on the other (leave-one-data-set-out) they find LoCoMo R@10 0.781 and BEAM 0.526,
# no better than equal weights (0.785 / 0.523). The traits stay off: fitted on one set they lose on
# the other (LoCoMo 0.785 -> 0.721, BEAM 0.523 -> 0.453: LoCoMo wants questions pushed down,
# BEAM's users ask and tell in one turn), so no value of theirs is known to carry over.
W_FTS = 0.553
W_DENSE = 1.69
W_CONTEXT = 0.402  # x (better neighbour's fused score - the lowest)
W_SESSION = 0.615  # x (best fused-in-context score in the session - the lowest)
CONTEXT_IN_SESSION = 0.5  # how much of its context a turn brings to its session's best
W_SPEAKER = 0.0  # the query names the turn's speaker ("I", "my" name the user: see ``speaks_first_person``)
W_ASKS = 0.0  # the turn mostly asks (``Traits.asks``)
W_LENGTH = 0.0  # x (log of its length - the mean over the same speaker's candidate turns)

_NO_LINKS: tuple[str | None, str | None] = (None, None)


class CandidateScores:
    """Both retrievers' exact scores for the candidates, and their fusion."""

    def __init__(self, fts: dict[str, float], dense: dict[str, float]) -> None:
        self.fts, self.dense = fts, dense
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

    def fused(self, dense: bool) -> dict[str, float]:
        """Both z-scores added, equally weighted: what neighbours and sessions are judged by."""
        zf, zd = self.standardised(dense)
        return {i: zf[i] + zd[i] for i in zf}

    def best(self, n: int, dense: bool) -> list[str]:
        fused = self.fused(dense)
        return sorted(fused, key=lambda i: (-fused[i], i))[:n]

    def rank(self, traits: dict[str, Traits], links: dict[str, tuple[str | None, str | None]],
             named: Collection[str], dense: bool, first_person: bool = False,
             limit: int | None = None) -> list[tuple[str, dict[str, float]]]:
        """Candidates (those in ``traits``) by their scores read in context; ``named``: the query's
        terms (a turn whose speaker they name gains ``W_SPEAKER``); ``first_person``: the query
        speaks as the user, which names the user as speaker (the user's own turns gain ``W_SPEAKER``).
        ``limit``: only the best so many (every candidate is scored; only those get their parts)."""
        zf, zd = self.standardised(dense)
        fused = {i: zf[i] + zd[i] for i in zf if i in traits}
        if not fused:
            return []
        low = min(fused.values())  # what a turn outside the candidates is taken to score
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
            session = traits[i].session_id
            if session is not None and s > best_in_session.get(session, floor):
                best_in_session[session] = s
        traits_on = W_SPEAKER != 0.0 or W_ASKS != 0.0 or W_LENGTH != 0.0  # off by default: nothing read
        log_length = ({i: math.log1p(traits[i].length) for i in fused if traits[i].kind in TURN_KINDS}
                      if traits_on else {})
        mean_length = mean_by_speaker(log_length, traits)
        speakers: dict[tuple[str, str | None], bool] = {}  # speaker -> named by the query
        scored: list[tuple[float, str, float, float, float, tuple[float, float, float] | None]] = []
        for i in fused:
            t = traits[i]
            session = t.session_id
            top = best_in_session.get(session, floor) if session is not None else in_context[i]
            fused_part, context_part = W_FTS * zf[i] + W_DENSE * zd[i], W_CONTEXT * context[i]
            session_part = W_SESSION * (top - floor)
            score = fused_part + context_part + session_part  # the parts' sum, in their order
            traits_parts = None
            if i in log_length:
                who = speaker(t)
                if who not in speakers:
                    speakers[who] = names_speaker(t.agent, named) or (first_person and is_users(t))
                traits_parts = (W_SPEAKER * speakers[who], W_ASKS * t.asks,
                                W_LENGTH * (log_length[i] - mean_length[who]))
                score = score + traits_parts[0] + traits_parts[1] + traits_parts[2]
            scored.append((-score, i, fused_part, context_part, session_part, traits_parts))
        scored.sort()  # best first, ties by id (ids are unique: nothing after them is compared)
        fts, dense_scores = self.fts, self.dense
        fts_rank = _ranks(fts, fused)
        dense_rank = _ranks(dense_scores, fused)
        out = []
        for negated, i, fused_part, context_part, session_part, traits_parts in scored[:limit]:
            parts = {"fused": fused_part, "context": context_part, "session": session_part}
            if traits_parts is not None:
                parts["speaker"], parts["asks"], parts["length"] = traits_parts
            elif not traits_on and traits[i].kind in TURN_KINDS:
                parts["speaker"] = parts["asks"] = parts["length"] = 0.0
            if i in fts:
                parts["fts"], parts["fts_rank"] = fts[i], fts_rank[i]
            if i in dense_scores:
                parts["dense"], parts["dense_rank"] = dense_scores[i], dense_rank[i]
            parts["score"] = -negated
            out.append((i, parts))
        return out


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
