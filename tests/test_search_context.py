"""Hybrid search reads a turn in its conversation: the catalog's neighbour and exact-score lookups,
the score fusion, and the effect end to end with the real embedder."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.index import ranking
from soulpass.index import search as search_mod
from soulpass.index.catalog import Catalog, Filters, Traits
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
    traits = {i: Traits("turn_user", "s1" if i in "ab" else None, "ann", 20, False) for i in "abcd"}
    links = {"b": ("a", None), "a": (None, "b")}
    ranked = dict(scores.rank(traits, links, named=(), dense=True))
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
        assert parts["score"] == pytest.approx(parts["fused"] + parts["context"] + parts["session"] + parts["speaker"]
                                               + parts["asks"] + parts["length"])
    order = [i for i, _ in scores.rank(traits, links, named=(), dense=True)]
    assert order.index("b") < order.index("c")  # without context c (3.0 BM25) beats b
    assert fused["c"] > fused["b"]
    assert ranked["a"]["fts_rank"] == 1 and ranked["c"]["fts_rank"] == 2 and "fts_rank" not in ranked["b"]


def test_turn_traits_speaker_question_and_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal scores; what differs is who spoke, whether it mostly asks, and how long it is. The traits
    are off by default (their weights do not carry from one data set to another): switched on here."""
    monkeypatch.setattr(ranking, "W_SPEAKER", 0.5)
    monkeypatch.setattr(ranking, "W_ASKS", -0.6)
    monkeypatch.setattr(ranking, "W_LENGTH", 0.65)
    scores = CandidateScores({}, {"a": 0.4, "b": 0.4, "c": 0.4, "d": 0.4, "e": 0.4})
    scores.known.update("abcde")
    traits = {"a": Traits("turn_user", None, "bob", 40, False),
              "b": Traits("turn_user", None, "ann_lee", 40, False),
              "c": Traits("turn_user", None, "bob", 40, True),
              "d": Traits("turn_user", None, "bob", 400, False),
              "e": Traits("fact", None, "ann_lee", 40, True)}  # traits of turns only
    ranked = dict(scores.rank(traits, {}, named={"ann", "lee", "eat"}, dense=True))
    assert ranked["b"]["speaker"] == 0.5 and ranked["a"]["speaker"] == 0.0
    assert ranked["c"]["asks"] == -0.6
    assert ranked["d"]["length"] > 0 > ranked["a"]["length"]
    assert ranked["d"]["length"] - ranked["a"]["length"] == pytest.approx(0.65 * (math.log1p(400) - math.log1p(40)))
    assert ranked["b"]["length"] == 0.0  # ann_lee's only turn: compared with her own, not with bob's
    assert "speaker" not in ranked["e"] and "asks" not in ranked["e"]
    order = [i for i, _ in scores.rank(traits, {}, named={"ann", "lee"}, dense=True)]
    assert order.index("b") < order.index("a") and order.index("d") < order.index("a") < order.index("c")
    # "ann" alone does not name ann_lee
    assert dict(scores.rank(traits, {}, named={"ann"}, dense=True))["b"]["speaker"] == 0.0


def test_first_person_names_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a user-assistant chat "I" and "my" name the user: their turns gain W_SPEAKER, the assistant's do not."""
    monkeypatch.setattr(ranking, "W_SPEAKER", 0.5)
    assert search_mod.speaks_first_person("What deadline did I set?")
    assert search_mod.speaks_first_person("my flat in Paris") and search_mod.speaks_first_person("I'm moving")
    assert not search_mod.speaks_first_person("What did Caroline paint?")
    assert not search_mod.speaks_first_person("Is it in the index?")  # "in", "it" are not "I"
    scores = CandidateScores({}, {"u": 0.4, "a": 0.4, "n": 0.4})
    scores.known.update("uan")
    traits = {"u": Traits("turn_user", None, None, 40, False),
              "a": Traits("turn_llm", None, "assistant", 40, False),
              "n": Traits("turn_user", None, "caroline", 40, False)}  # a named person, not "the user"
    asked = dict(scores.rank(traits, {}, named={"deadline"}, dense=True, first_person=True))
    assert asked["u"]["speaker"] == 0.5 and asked["a"]["speaker"] == 0.0 and asked["n"]["speaker"] == 0.0
    plain = dict(scores.rank(traits, {}, named={"deadline"}, dense=True, first_person=False))
    assert plain["u"]["speaker"] == 0.0


def test_mostly_asks_in_python_and_in_sql() -> None:
    import sqlite3

    from soulpass.index.catalog.rows import ASKS_SQL, mostly_asks

    conn = sqlite3.connect(":memory:")
    cases = {"Lovely! What breed is it?": True, "How?": True, "Why? Why not!": True,
             "I moved on May 3. I have to unpack by Friday. Any tips?": False, "No.": False, "": False}
    for text, expected in cases.items():
        assert mostly_asks(text) is expected, text
        assert bool(conn.execute(f"SELECT {ASKS_SQL} FROM (SELECT ? AS text) AS c", (text,)).fetchone()[0]) is expected


def test_a_record_without_a_vector_is_judged_by_its_full_text() -> None:
    """Still in the embedding backlog: its full-text score decides (for both halves), it is not buried."""
    scores = CandidateScores({"a": 2.0, "b": 2.0}, {"a": 0.9, "c": 0.1, "d": 0.5})
    scores.known.update("abcd")
    zf, zd = scores.standardised(dense=True)
    assert zd["b"] == zf["b"] and zd["a"] > 0 > zd["c"]
    assert zf["a"] == zf["b"] > 0
    traits = {i: Traits("turn_user", None, "ann", 20, False) for i in "abcd"}
    order = [i for i, _ in scores.rank(traits, {}, named=(), dense=True)]
    assert order == ["a", "b", "d", "c"]


def test_traits_are_not_read_while_their_weights_are_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default: speaker, asks and length weigh 0, so a turn's parts for them are 0.0 and nothing
    about its speaker is looked at; switched on, they are."""
    scores = CandidateScores({"a": 1.0}, {"a": 0.5, "b": 0.4})
    scores.known.update("ab")
    traits = {"a": Traits("turn_user", None, "ann", 400, True), "b": Traits("fact", None, None, 20, False)}

    def unread(t: Traits) -> tuple[str, str | None]:
        raise AssertionError("a trait was read")
    monkeypatch.setattr(ranking, "speaker", unread)
    ranked = dict(scores.rank(traits, {}, named={"ann"}, dense=True))
    assert (ranked["a"]["speaker"], ranked["a"]["asks"], ranked["a"]["length"]) == (0.0, 0.0, 0.0)
    assert "speaker" not in ranked["b"]  # not a turn
    assert ranked["a"]["score"] == ranked["a"]["fused"] + ranked["a"]["context"] + ranked["a"]["session"]
    monkeypatch.setattr(ranking, "W_ASKS", -0.5)
    with pytest.raises(AssertionError, match="a trait was read"):
        scores.rank(traits, {}, named={"ann"}, dense=True)


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
