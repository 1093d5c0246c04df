"""Passages: a record of several sentences also gets a vector per sentence, and its dense score is
the best of its own cosine and its passages'."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import soulpass
from soulpass import Committed
from soulpass.embed import embed_query
from soulpass.index import passages
from soulpass.index.catalog import CatalogRow
from soulpass.index.recipe import embed_passages, embed_text
from soulpass.vectors import open_vector_index

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def test_sentences_split_group_and_skip_single() -> None:
    assert passages.sentences("Just one sentence here.") == []
    assert passages.sentences("  ") == []
    assert passages.sentences("Hi! I crashed my car. Anyone hurt? No.") == ["Hi!", "I crashed my car.", "Anyone hurt?",
                                                                             "No."]
    many = " ".join(f"Sentence {n}." for n in range(20))
    groups = passages.sentences(many)
    assert len(groups) == passages.MAX_PASSAGES
    assert " ".join(groups) == many  # nothing lost, order kept
    assert groups[0] == "Sentence 0. Sentence 1. Sentence 2."


def test_long_texts_get_their_opening_or_windows_not_a_vector_per_sentence() -> None:
    short = "I fell. It hurt."
    assert passages.of(short) == ["I fell.", "It hurt."]
    reply = " ".join(f"Step {n} is to check the fuse box." for n in range(60))  # ~2,000 characters
    assert passages.SHORT_TEXT < len(reply) <= passages.LONG_TEXT
    assert passages.of(reply) == []  # the record's own vector (its opening) and full text cover it
    words = [f"w{n}" for n in range(70_000)]  # a pasted document of ~350k characters
    pasted = " ".join(words)
    found = passages.of(pasted)
    assert len(found) == passages.MAX_PASSAGES
    assert all(len(w) <= passages.WINDOW_CHARS for w in found)
    assert found[0].startswith("w0 ") and found[-1].endswith(words[-1])  # from the start to the end
    assert all(w.split()[0] in words and w in pasted for w in found)  # each starts at a word, verbatim
    starts = [pasted.index(w) for w in found]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_what_is_embedded_of_a_huge_turn_is_bounded() -> None:
    row = CatalogRow(id="tu_temp_abcdef", kind="turn_user", version=0, valid_to=None, replaced_at=None, path="p",
                     text=" ".join(f"w{n}" for n in range(70_000)), event_time=T0, agent="ann", session_id=None,
                     persona_id=None, event_id=None, tags=(), superseded_by=None, semantic_hash="", content_hash="")
    assert len(embed_text(row)) == len("ann: ") + passages.EMBED_CHARS
    assert len(embed_passages(row)) == passages.MAX_PASSAGES


def test_vector_ids_map_back_to_their_record() -> None:
    assert passages.record_of(passages.passage_id("TU_20250301_001", 3)) == "TU_20250301_001"
    assert passages.record_of("TU_20250301_001") == "TU_20250301_001"
    best = passages.best_per_record([("a#1", 0.9), ("a", 0.4), ("b", 0.7), ("a#0", 0.95), ("b#0", 0.1)])
    assert best == {"a": 0.95, "b": 0.7}


def test_turn_passages_carry_the_speaker() -> None:
    row = CatalogRow(id="tu_temp_abcdef", kind="turn_user", version=0, valid_to=None, replaced_at=None, path="p",
                     text="I fell. It hurt.", event_time=T0, agent="ann", session_id=None, persona_id=None,
                     event_id=None, tags=(), superseded_by=None, semantic_hash="", content_hash="")
    assert embed_text(row) == "ann: I fell. It hurt."
    assert embed_passages(row) == ["ann: I fell.", "ann: It hurt."]


class _Sentences:
    """A deterministic embedder for the drain test: one dimension per known sentence."""

    model_id = "test-sentences"
    dim = 8

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        out = np.full((len(texts), self.dim), 0.01, dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, hash(t) % self.dim] = 1.0
        return out


def test_replacing_passages_drops_those_a_record_no_longer_has(tmp_path: Path) -> None:
    vectors = open_vector_index(tmp_path / "v", model_id="m", dim=8, backend="exact")
    state = sqlite3.connect(tmp_path / "state.sqlite")
    passages.create_table(state)
    embed = _Sentences().embed_batch

    def write(texts: list[str]) -> None:
        before = passages.passage_counts(state, ["r"])
        passages.replace(vectors, {"r": texts}, embed(texts), before)
        with state:
            passages.record_passages(state, {"r": len(texts)})

    write(["a.", "b.", "c."])
    assert vectors.count() == 3 and passages.passage_counts(state, ["r"]) == {"r": 3}
    write(["a.", "b."])  # one passage fewer (another split): the third vector goes
    assert vectors.count() == 2 and passages.total(state) == 2
    assert {i for i, _ in vectors.search(embed(["c."])[0], 5)} == {"r#0", "r#1"}
    write([])
    assert vectors.count() == 0 and passages.passage_counts(state, ["r"]) == {}
    vectors.close()
    state.close()


@pytest.mark.skipif(pytest.importorskip("onnxruntime") is None, reason="needs the embed extra")
def test_a_turn_is_found_by_one_of_its_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    acct = soulpass.open(tmp_path).account("ann", create=True)
    sb = acct.create_sandbox("chat")
    long_turn = ("Hey Dave, good to hear from you! Work has been hectic and the band rehearses twice a week. "
                 "I had a little car accident last Friday, but nobody was hurt. The garden is blooming too.")
    for i, (who, text) in enumerate([("calvin", long_turn), ("dave", "Glad you are fine. My cat is sick."),
                                     ("calvin", "Sorry to hear about your cat."), ("dave", "Thanks, she eats again.")]):
        sb.write_turn({"kind": "turn_user", "text_excerpt": text, "agent": who,
                       "created_at": T0 + timedelta(minutes=i)})
    assert isinstance(sb.archive(), Committed)
    idx = acct.index()
    status = idx.status()
    assert status.vectors == 4 and status.pending_embeddings == 0  # records only, passages not counted
    assert idx.vectors is not None and idx.vectors.count() == 4 + 4 + 2  # 4 sentences, 2 sentences
    hits = acct.search("when did calvin have a car crash", k=4)
    turn = next(h for h in hits if h.text == long_turn)
    assert hits[0].id == turn.id
    embedder = acct.sp.embedder()
    assert embedder is not None
    q = embed_query(embedder, "when did calvin have a car crash")  # as a search embeds it (maybe int8)
    texts = [embed_text(turn.row), *embed_passages(turn.row)] if turn.row else []
    vecs = embedder.embed_batch(texts)
    cosines = [float(np.dot(v, q) / np.linalg.norm(v) / np.linalg.norm(q)) for v in vecs]
    assert turn.parts["dense"] == pytest.approx(max(cosines), abs=1e-3)
    assert max(cosines) > cosines[0] + 0.05  # the accident sentence says it better than the whole turn
    # A sandbox scores its own buffer the same way.
    sb2 = acct.create_sandbox("again")
    sb2.write_turn({"kind": "turn_user", "text_excerpt": long_turn, "agent": "calvin", "created_at": T0})
    mine = next(h for h in sb2.search("when did calvin have a car crash", k=10) if h.version == 0)
    assert mine.parts["dense"] == pytest.approx(turn.parts["dense"], abs=1e-3)
    acct.close()
