"""Hybrid search reads a turn in its conversation: the catalog's neighbour and exact-score lookups,
the score fusion, and the effect end to end with the real embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.index import ranking
from soulpass.index.catalog import Catalog, Filters
from soulpass.index.ranking import CandidateScores

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def chat(acct: soulpass.Account, name: str, turns: list[tuple[str, str]], start: datetime) -> None:
    sb = acct.create_sandbox(name)
    for i, (speaker, text) in enumerate(turns):
        sb.write_turn({"kind": "turn_user", "text_excerpt": text, "agent": speaker,
                       "created_at": start + timedelta(minutes=i)})
    assert isinstance(sb.archive(), Committed)


@pytest.fixture
def two_chats(tmp_path: Path, engine: str) -> Iterator[tuple[soulpass.Account, Catalog]]:
    acct = soulpass.open(tmp_path, embedder="none").account("ann", create=True)
    chat(acct, "one", [("ann", "the garden needs water"), ("bob", "tomatoes ripen in August"),
                       ("ann", "the roses are red")], T0)
    chat(acct, "two", [("ann", "my bike has a flat tyre"), ("bob", "patch the garden hose too")],
         T0 + timedelta(days=1))
    cat = Catalog.open(acct.store)
    cat.catch_up(acct.store)
    yield acct, cat
    cat.close()
    acct.close()


def by_text(cat: Catalog) -> dict[str, str]:
    return {r.text: r.id for r in cat.rows()}


def test_neighbours_are_the_turns_around_in_the_same_session(two_chats: tuple[soulpass.Account, Catalog]) -> None:
    _, cat = two_chats
    ids = by_text(cat)
    water, tomatoes, roses = ids["the garden needs water"], ids["tomatoes ripen in August"], ids["the roses are red"]
    bike, hose = ids["my bike has a flat tyre"], ids["patch the garden hose too"]
    links = cat.neighbours([water, tomatoes, roses, bike, hose], ["turn_user"])
    assert links == {water: (None, tomatoes), tomatoes: (water, roses), roses: (tomatoes, None),
                     bike: (None, hose), hose: (bike, None)}
    # Only rows of the asked kinds and passing the filters are neighbours.
    assert cat.neighbours([tomatoes], ["turn_llm"]) == {}
    assert cat.neighbours([tomatoes], ["turn_user"], Filters(agent="bob")) == {tomatoes: (None, None)}
    assert cat.neighbours([tomatoes], ["turn_user"], Filters(agent="ann")) == {}  # tomatoes itself is bob's
    assert cat.neighbours([water], ["turn_user"], Filters(agent="ann")) == {water: (None, roses)}
    # As of version 1 the second chat did not exist.
    assert cat.neighbours([bike], ["turn_user"], Filters(as_of_version=1)) == {}
    assert cat.neighbours([roses], ["turn_user"], Filters(as_of_version=1)) == {roses: (tomatoes, None)}


def test_fts_scores_match_the_ranking_scores(two_chats: tuple[soulpass.Account, Catalog]) -> None:
    _, cat = two_chats
    ranked = dict(cat.fts_search("garden water", 10))
    ids = by_text(cat)
    assert set(ranked) == {ids["the garden needs water"], ids["patch the garden hose too"]}
    exact = cat.fts_scores("garden water", list(ids.values()))
    assert exact.keys() == ranked.keys()  # rows that match no term are left out
    for rid, score in ranked.items():
        assert exact[rid] == pytest.approx(score)
    assert cat.fts_scores("garden water", [ids["the garden needs water"]], Filters(agent="bob")) == {}
    assert cat.passing(list(ids.values()), Filters(agent="bob")) == {ids["tomatoes ripen in August"],
                                                                    ids["patch the garden hose too"]}


def test_fusion_standardises_and_reads_context() -> None:
    # a matches by text, b (a's neighbour) only a little by meaning, c and d elsewhere.
    scores = CandidateScores({"a": 4.0, "c": 3.0}, {"a": 0.5, "b": 0.3, "c": 0.25, "d": 0.1})
    scores.known.update("abcd")
    fused = scores.fused(dense=True)
    assert max(fused, key=fused.__getitem__) == "a"
    assert sum(fused.values()) == pytest.approx(0.0, abs=1e-9)  # two z-scores: mean 0
    sessions = {i: "s1" if i in "ab" else None for i in "abcd"}
    links = {"b": ("a", None), "a": (None, "b")}
    ranked = dict(scores.rank(sessions, links, dense=True))
    low = min(fused.values())
    assert ranked["b"]["context"] == pytest.approx(ranking.W_CONTEXT * (fused["a"] - low))
    assert ranked["c"]["context"] == 0.0  # no neighbour among the candidates
    # b shares a's session: it gains from the best (fused + context) score there; c is alone.
    in_context = {i: fused[i] + ranking.CONTEXT_IN_SESSION * ranked[i]["context"] / ranking.W_CONTEXT
                  for i in "abcd"}
    floor = min(in_context.values())
    best_s1 = max(in_context["a"], in_context["b"])
    assert ranked["b"]["session"] == pytest.approx(ranking.W_SESSION * (best_s1 - floor))
    assert ranked["c"]["session"] == pytest.approx(ranking.W_SESSION * (in_context["c"] - floor))
    for parts in ranked.values():
        assert parts["score"] == pytest.approx(parts["fused"] + parts["context"] + parts["session"])
    order = [i for i, _ in scores.rank(sessions, links, dense=True)]
    assert order.index("b") < order.index("c")  # without context c (3.0 BM25) beats b
    assert fused["c"] > fused["b"]
    assert ranked["a"]["fts_rank"] == 1 and ranked["c"]["fts_rank"] == 2 and "fts_rank" not in ranked["b"]


def test_a_record_without_a_vector_is_judged_by_its_full_text() -> None:
    """Still in the embedding backlog: its full-text score decides (for both halves), it is not buried."""
    scores = CandidateScores({"a": 2.0, "b": 2.0}, {"a": 0.9, "c": 0.1, "d": 0.5})
    scores.known.update("abcd")
    zf, zd = scores.standardised(dense=True)
    assert zd["b"] == zf["b"] and zd["a"] > 0 > zd["c"]
    assert zf["a"] == zf["b"] > 0
    order = [i for i, _ in scores.rank(dict.fromkeys("abcd"), {}, dense=True)]
    assert order == ["a", "b", "d", "c"]


def test_an_agents_reply_ranks_below_what_a_person_said() -> None:
    """A reply (``TL_…``, ``tl_temp_…``) scoring as a person's turn ranks W_REPLY below it and says so."""
    user, reply, temp = "TU_20250101_001", "TL_20250101_002", "tl_temp_0a1b2c"
    assert ranking.is_reply(reply) and ranking.is_reply(temp) and not ranking.is_reply(user)
    assert not ranking.is_reply("SF_20250101_001") and not ranking.is_reply("tu_temp_0a1b2c")
    # The reply matches better by both retrievers, by less than the reply weight.
    scores = CandidateScores({reply: 2.0, user: 1.9, "x": 0.1}, {reply: 0.52, user: 0.5, "x": 0.1})
    scores.known.update([reply, user, "x"])
    ranked = scores.rank(dict.fromkeys([reply, user, "x"]), {}, dense=True)
    parts = dict(ranked)
    assert ranking.W_REPLY < 0 and [i for i, _ in ranked][:2] == [user, reply]
    assert parts[reply]["reply"] == ranking.W_REPLY and "reply" not in parts[user]
    assert parts[reply]["score"] == pytest.approx(parts[reply]["fused"] + parts[reply]["context"]
                                                  + parts[reply]["session"] + ranking.W_REPLY)
    # Far enough ahead, it still comes first: a lift of its own, not a filter.
    far = CandidateScores({reply: 9.0, user: 0.2, "x": 0.1, "y": 0.1, "z": 0.1, "w": 0.0},
                          {reply: 0.9, user: 0.1, "x": 0.1, "y": 0.1, "z": 0.1, "w": 0.0})
    far.known.update([reply, user, "x", "y", "z", "w"])
    assert far.rank(dict.fromkeys(far.known), {}, dense=True)[0][0] == reply


DISTRACTORS = [
    "I cooked pasta with garlic for dinner", "The train to Porto was delayed again",
    "We watched a documentary about whales",
    "My laptop battery barely lasts two hours", "The neighbours painted their fence blue", "I need new running shoes",
    "Grandma sent a postcard from Vienna", "The printer at the office jammed twice", "I planted basil on the balcony",
    "Our team lost the football match on Sunday", "I'm reading a novel about a lighthouse keeper",
    "The cat knocked a glass off the table",
]


@pytest.mark.skipif(pytest.importorskip("onnxruntime") is None, reason="needs the embed extra")
def test_an_answer_is_found_through_the_question_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reply names nothing the query asks for; the turn before it does."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    acct = soulpass.open(tmp_path).account("ann", create=True)
    for n in range(4):
        chat(acct, f"other-{n}", [("ann", t) for t in DISTRACTORS[3 * n:3 * n + 3]], T0 + timedelta(days=n))
    chat(acct, "music", [("bob", "Which instrument did you pick at the community music school?"),
                         ("ann", "The cello! Lessons are on Tuesdays."), ("bob", "Nice, enjoy it")],
         T0 + timedelta(days=9))
    query = "what did Ann choose at the community music school"
    answer = next(r.id for r in acct.records("turn_user") if r.text.startswith("The cello"))
    hits = acct.search(query, k=5)
    assert [h.id for h in hits].index(answer) <= 1
    hit = next(h for h in hits if h.id == answer)
    assert hit.parts["context"] > 0 and hit.parts["session"] > 0
    assert {h.row.session_id for h in hits[:3] if h.row} == {hit.row.session_id if hit.row else None}
    acct.close()


@pytest.mark.skipif(pytest.importorskip("onnxruntime") is None, reason="needs the embed extra")
def test_a_sandbox_sees_master_at_its_parent_plus_its_own_buffer(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    acct = soulpass.open(tmp_path).account("ann", create=True)
    chat(acct, "first", [("ann", "I adopted a golden retriever called Biscuit"), ("bob", "What a lovely dog")], T0)
    mine = acct.create_sandbox("mine")  # parent: version 1
    chat(acct, "later", [("ann", "My sister is getting married in Lisbon")], T0 + timedelta(days=1))  # version 2
    own = mine.write_turn({"kind": "turn_user", "text_excerpt": "I started cello lessons in Lisbon", "agent": "ann",
                           "created_at": T0 + timedelta(days=2)})
    mine.add_fact(content="Ann plays the cello", confidence=0.9)
    lisbon = mine.search("Lisbon", k=5)
    assert lisbon[0].id == own
    # Version 2's Lisbon turn is not in this sandbox's world.
    assert "My sister is getting married in Lisbon" not in {h.text for h in lisbon}
    assert lisbon[0].version == 0 and lisbon[0].path.endswith("session_buffer.jsonl")
    assert lisbon[0].parts["fts"] > 0 and "dense" in lisbon[0].parts
    assert acct.search("Lisbon", k=5)[0].text == "My sister is getting married in Lisbon"
    dog = mine.search("golden retriever dog", k=3)
    assert "Biscuit" in dog[0].text and dog[0].version == 1  # the master as of the parent is there
    assert [h.kind for h in mine.search("cello", k=5, kinds=["fact"])] == ["fact"]
    # Filters apply to the buffer's rows too: bob said nothing in this sandbox.
    assert {h.row.agent for h in mine.search("cello", k=5, agent="bob") if h.row} == {"bob"}
    assert all(h.version == 1 for h in mine.search("cello", k=5, agent="bob"))
    assert isinstance(mine.archive(), Committed)
    after = acct.search("cello lessons", k=1)
    assert after[0].text == "I started cello lessons in Lisbon" and after[0].id.startswith("TU_")
    acct.close()
