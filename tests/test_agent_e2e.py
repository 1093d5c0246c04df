"""The agent tiers end to end with the real embedder (MiniLM): a day, a night, the next morning."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_helpers import Clock, account, memory
from soulpass.agent import AgentMemory
from soulpass.engine import Unchanged
from soulpass.records import Episode

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")

DOC = """# Tidal locking

A tidally locked moon turns once on its axis for every orbit around its planet, so the same
hemisphere always faces the planet. Earth's Moon is tidally locked: we only ever see its near side.

Locking happens because tides raise a bulge on the moon; the planet's gravity pulls on the bulge
and slows the moon's spin until rotation and orbit match. Mercury is different: it is in a 3:2
spin-orbit resonance with the Sun rather than fully locked.
"""


def test_a_day_a_night_and_the_next_morning(tmp_path: Path) -> None:
    from soulpass.embed.minilm import MiniLM

    clock = Clock()
    acct = account(tmp_path, embedder=MiniLM())
    day = memory(acct, clock, archive_on_sleep=True, chunk_chars=300, chunk_overlap=50)
    day.log("flash", "Can you find out why we always see the same side of the Moon?", speaker="user")
    clock.advance(minutes=2)
    ingested = day.ingest(DOC, agent="pro", title="Tidal locking notes")
    assert len(ingested.chunk_ids) >= 2
    clock.advance(minutes=2)
    day.log("pro", "Answered: the Moon is tidally locked to the Earth", kind="outcome")
    day.clipboard_add("flash", "the user is writing an astronomy course")
    for i in range(6):
        clock.advance(minutes=1)
        day.log("flash", f"small talk about the weather, part {i}", speaker="user")
    clock.advance(minutes=1)
    pro_last = day.log("pro", "drafted lesson 3 on orbital resonance", kind="outcome")

    clock.advance(hours=8)
    morning = day.context("flash", "why does the moon always show us one face?", 3000)
    o = morning.orientation
    assert o is not None and "pro (outcome" in o.text() and "drafted lesson 3" in o.text()
    assert o.duration.total_seconds() == 8 * 3600 + 60  # flash's last entry was a minute before pro's
    assert acct.head() == 1 and morning.sandbox_id == day.sandbox.id  # archived, continued in a fresh sandbox
    assert [e.text for e in day.hot()][-1] == pro_last.text and len(day.hot()) == 3
    assert "[ACTIVE_CLIPBOARD]\n1. the user is writing an astronomy course" in morning.text
    memories = next(s for s in morning.sections if s.name == "memories").text
    assert "tidally locked" in memories.lower()

    # the committed index has vectors, and the retrieval used them
    hits = acct.search("why does the moon always show us one face?", k=5)
    assert acct.index().status().vectors > 0 and any(h.parts.get("dense", 0) > 0 for h in hits)

    # RAG: the ingest episode, in full, into the asking agent's inbox
    rag = day.rag_search("pro", "tidal locking of moons")
    assert rag.episode_ids and all(i.startswith("EP_") for i in rag.episode_ids)
    episode = acct.record(rag.episode_ids[0])
    assert isinstance(episode, Episode)
    assert f"### Episode {episode.id}" in rag.markdown and "Tidal locking" in rag.markdown
    assert [m.id for m in day.inbox("pro")] == [rag.message.id]

    # a restart sees the same memory
    # (the fresh sandbox holds only bookkeeping, wake and inbox events: no version, issue 16)
    assert isinstance(day.sandbox.archive(), Unchanged)
    again = AgentMemory(acct.create_sandbox("day 2"), clock=clock)
    assert again.clipboard_show("flash").items == ("the user is writing an astronomy course",)
    assert acct.search("spin-orbit resonance Mercury", k=3, kinds=["sensory"])[0].text.count("Mercury") >= 1
