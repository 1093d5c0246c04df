"""Hybrid search end to end: real store, real catalog, real offline MiniLM, real vector index."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import soulpass
from soulpass.engine import Account, Committed

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")

TURNS = [
    ("user", "I adopted a golden retriever puppy named Biscuit last weekend"),
    ("eva", "Congratulations on Biscuit! Puppies need lots of sleep."),
    ("user", "My sister Maria is getting married in Lisbon in June"),
    ("eva", "A Lisbon wedding in June sounds lovely."),
    ("user", "I started learning to play the cello at the community school"),
    ("eva", "The cello is a beautiful instrument to start with."),
    ("user", "Work has been stressful because of the quarterly tax filing"),
]


@pytest.fixture
def acct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Account:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    account = soulpass.open(tmp_path).account("ann", create=True)
    sb = account.create_sandbox("chat")
    for speaker, text in TURNS:
        sb.add_turn(speaker, text)
    assert isinstance(sb.archive(), Committed)
    return account


def test_full_text_and_dense_both_find(acct: Account) -> None:
    hits = acct.search("Biscuit", k=3)
    assert hits and "Biscuit" in hits[0].text and "fts" in hits[0].parts and "dense" in hits[0].parts
    # What the user said comes before the agent's reply about it, whichever retriever ranked which
    # first: the reply carries the (negative) reply part.
    assert hits[0].kind == "turn_user" and "reply" not in hits[0].parts
    reply = next(h for h in hits if h.kind == "turn_llm")
    assert "Biscuit" in reply.text and reply.parts["reply"] < 0
    # no shared word with the turn: only the dense retriever can find it
    hits = acct.search("canine pet dog", k=3)
    assert "golden retriever" in hits[0].text
    assert "dense" in hits[0].parts
    hit = hits[0]
    assert hit.path.endswith(f"{hit.id}.json") and hit.version == 1 and hit.kind == "turn_user"


def test_filters_and_as_of_version(acct: Account) -> None:
    assert all(h.kind == "turn_llm" for h in acct.search("cello", k=5, kinds=["turn_llm"]))
    sb = acct.create_sandbox("later")
    sb.add_turn("user", "We moved the wedding from Lisbon to Porto")
    sb.archive()
    now = [h.text for h in acct.search("wedding Porto", k=10)]
    then = [h.text for h in acct.search("wedding Porto", k=10, at=1)]
    assert any("Porto" in t for t in now)
    assert not any("Porto" in t for t in then)


def test_superseded_fact_found_only_as_of_its_version(acct: Account) -> None:
    sb = acct.create_sandbox("facts")
    sb.add_fact("Ann", "lives in", "Lisbon", confidence=0.9)
    sb.archive()
    sb = acct.create_sandbox("moved")
    sb.add_fact("Ann", "lives in", "Berlin", confidence=0.9)
    sb.archive()
    current = [h.text for h in acct.search("where does Ann live", k=5, kinds=["fact"])]
    before = [h.text for h in acct.search("where does Ann live", k=5, kinds=["fact"], at=2)]
    assert any("Berlin" in t for t in current) and not any("Lisbon" in t for t in current)
    assert any("Lisbon" in t for t in before) and not any("Berlin" in t for t in before)


def test_rebuild_from_files_gives_the_same_top10(acct: Account, tmp_path: Path) -> None:
    queries = ["puppy", "sister wedding", "music lessons", "taxes at work", "Lisbon"]
    before = {q: [(h.id, round(h.score, 9)) for h in acct.search(q, k=10)] for q in queries}
    acct.close()
    shutil.rmtree(acct.store.path / "index")
    again = soulpass.open(tmp_path).account("ann")
    after = {q: [(h.id, round(h.score, 9)) for h in again.search(q, k=10)] for q in queries}
    assert after == before


def test_drop_index_deletes_only_the_index_and_the_next_search_rebuilds_it(acct: Account) -> None:
    from treehash import digest

    queries = ["puppy", "sister wedding", "Lisbon"]
    before = {q: [h.id for h in acct.search(q, k=10)] for q in queries}
    stored = digest(acct.store.path)
    folder = acct.store.index_location().folder
    assert folder.is_dir()
    acct.drop_index()
    assert not folder.exists()
    assert digest(acct.store.path) == stored  # the memory itself is untouched
    assert {q: [h.id for h in acct.search(q, k=10)] for q in queries} == before


def test_hostile_queries_do_not_raise(acct: Account) -> None:
    for q in ['"', "NEAR(", "a* OR -b", "))((", "", "   ", "\x00"]:
        acct.search(q, k=5)
    with pytest.raises(soulpass.InvalidInput):
        acct.search("x", k=0)
