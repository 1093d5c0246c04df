"""Messages of any length: a pasted 350k-character turn is stored verbatim, found, returned whole;
only a body over ``Limits.max_body_chars`` (8 Mi characters) is refused, naming the field."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed, InvalidInput, Limits
from soulpass.index import ranking
from soulpass.records import TurnLLM

LONG = 350_000


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def pasted(n: int, needle: str) -> str:
    """``n`` characters of word salad with ``needle`` in the middle (a pasted document)."""
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    text = " ".join(rng.choice(words) for _ in range(n // 5))
    half = n // 2
    return (text[:half] + f" {needle} " + text[half:])[:n]


def test_a_350k_turn_is_stored_found_and_returned_whole(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").account("u", create=True)
    sb = acct.create_sandbox("paste")
    body = pasted(LONG, "zebrafinch marmalade")
    assert len(body) == LONG
    asked = sb.add_turn("user", "Here is the spec, keep it for later")
    answer = sb.add_turn("assistant", body)
    res = sb.archive()
    assert isinstance(res, Committed)
    rid = res.plan.id_map[answer]
    record = acct.record(rid)
    assert isinstance(record, TurnLLM) and record.text_excerpt == body
    assert acct.show(rid).text_excerpt == body
    hits = acct.search("zebrafinch marmalade", 5)
    found = next(h for h in hits if h.id == rid)
    assert found.text == body and found.parts["fts_rank"] == 1
    # Of two turns, the reply (the only match) and the user's turn it answers (no match, but its
    # neighbour is the match) are within a reply's weight: what the user said comes first.
    assert [h.id for h in hits] == [res.plan.id_map[asked], rid] and found.parts["reply"] == ranking.W_REPLY
    assert res.plan.id_map[asked] != rid


@pytest.mark.parametrize("write", ["sensory", "journal"])
def test_other_message_bodies_take_long_text_too(tmp_path: Path, write: str) -> None:
    acct = soulpass.open(tmp_path, embedder="none").account("u", create=True)
    sb = acct.create_sandbox("paste")
    body = pasted(LONG, "quokka lighthouse")
    temp = sb.add_sensory(body, source="file:spec.txt") if write == "sensory" else sb.add_journal(body, title="spec")
    res = sb.archive()
    assert isinstance(res, Committed)
    shown = acct.show(res.plan.id_map[temp]).model_dump(mode="json")
    assert shown["content" if write == "sensory" else "text"] == body


def test_a_body_over_its_limit_is_refused_naming_the_field(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none", limits=Limits(max_body_chars=5000)).account("u", create=True)
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "x" * 5000)
    with pytest.raises(InvalidInput, match=r"data\.text_excerpt is 5001 characters long \(limit 5000\)") as err:
        sb.add_turn("assistant", "x" * 5001)
    assert err.value.details.get("field") == "data.text_excerpt"
    with pytest.raises(InvalidInput, match=r"data\.content is 5001"):
        sb.add_sensory("y" * 5001)
    assert len(sb.buffer().new_turns) == 1


def test_names_and_labels_keep_the_short_limit(tmp_path: Path) -> None:
    sb = soulpass.open(tmp_path, embedder="none").account("u", create=True).create_sandbox("s")
    sb.add_turn("user", "z" * 200_000)  # a body: fine
    with pytest.raises(InvalidInput, match=r"data\.intent is 100001 characters long \(limit 100000\)"):
        sb.add_turn("user", "short", intent="i" * 100_001)
    with pytest.raises(InvalidInput, match=r"object is 100001 characters long"):
        sb.add_fact("User", "likes", "o" * 100_001, confidence=0.9)


def test_the_event_limit_holds_any_body_within_the_character_limits() -> None:
    limits = Limits()
    # A turn's body is written twice (text_excerpt and the envelope's text), at most 6 bytes a
    # character as JSON ("\u0000"); the rest of an event is small beside it.
    assert 2 * 6 * limits.max_body_chars + 4 * 1024 * 1024 <= limits.max_event_bytes
    assert limits.max_body_chars >= 8 * 1024 * 1024 > limits.max_text_chars
