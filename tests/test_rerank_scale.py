"""How a cross-encoder's scores join the search's: the order of the two standardised and added, in
the hybrid score's units (so that a plan's lifts on top weigh what they were fitted to weigh).
Fake cross-encoders, to pin the arithmetic; tests/test_rerank.py runs the real one."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.engine import Account
from soulpass.index import search
from soulpass.index.ranking import standardised

TURNS = [
    ("ann", "The support group meets on Tuesdays at the library"),
    ("ann", "I went to the support group yesterday, it helped a lot"),
    ("bob", "Group projects at work are a pain"),
    ("ann", "My group of friends went hiking in the hills"),
    ("bob", "The library closes early on Sundays"),
    ("ann", "Support from my friends keeps me going"),
]
QUERY = "support group library friends"


class Constant:
    """Cannot tell any passage from another."""

    model_id = "constant"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [0.5] * len(passages)


class Favours:
    """Scores a passage 10 where it holds ``word``, else 0."""

    model_id = "favours"

    def __init__(self, word: str) -> None:
        self.word = word

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [10.0 if self.word in p else 0.0 for p in passages]


def _account(home: Path, reranker: object) -> Account:
    return soulpass.open(home, embedder="none", reranker=reranker).account("ann")  # type: ignore[arg-type]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    account = soulpass.open(tmp_path, embedder="none").account("ann", create=True)
    sb = account.create_sandbox("chat")
    for speaker, text in TURNS:
        sb.add_turn(speaker, text)
    assert isinstance(sb.archive(), Committed)
    account.close()
    return tmp_path


def test_a_reranker_that_tells_nothing_apart_changes_no_score(home: Path) -> None:
    plain = _account(home, "none")
    before = [(h.id, h.score) for h in plain.search(QUERY, k=6)]
    plain.close()
    reranked = _account(home, Constant())
    after = reranked.search(QUERY, k=6)
    reranked.close()
    assert len(before) >= 4
    assert [h.id for h in after] == [i for i, _ in before]
    assert [h.score for h in after] == pytest.approx([s for _, s in before])
    assert all(h.parts["hybrid"] == pytest.approx(h.score) and h.parts["rerank"] == 0.5 for h in after)


def test_the_order_is_the_sum_of_both_standardised(home: Path) -> None:
    plain = _account(home, "none")
    hybrid = {h.id: h.score for h in plain.search(QUERY, k=6)}
    plain.close()
    reranked = _account(home, Favours("hiking"))
    hits = reranked.search(QUERY, k=6)
    reranked.close()
    assert "hiking" in hits[0].text and hits[0].id != next(iter(hybrid))  # the reranker moved it up
    ids = list(hybrid)
    z_hybrid = dict(zip(ids, standardised([hybrid[i] for i in ids]), strict=True))
    z_logit = dict(zip(ids, standardised([h.parts["rerank"] for h in sorted(hits, key=lambda h: ids.index(h.id))]),
                       strict=True))
    expected = sorted(ids, key=lambda i: (-(z_hybrid[i] + search.RERANK_WEIGHT * z_logit[i]), i))
    assert [h.id for h in hits] == expected
    # In the hybrid score's units: its mean over the hits kept, its spread scaling the logits' z-scores.
    spread = statistics.pstdev(hybrid.values())
    for h in hits:
        assert h.score == pytest.approx(hybrid[h.id] + search.RERANK_WEIGHT * spread * z_logit[h.id])
