"""Context assembly: order, situation guidance, the token budget and its truncation order; RAG and inboxes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent_helpers import START, Clock, account, memory, shared_redis
from soulpass.agent import AgentMemory, ClipboardView, RedisInbox
from soulpass.agent.context import Memory, assemble, count_tokens, situation_guidance
from soulpass.agent.types import LogEntry, Orientation
from soulpass.engine import Committed
from soulpass.errors import InvalidInput
from soulpass.records import SituationContext


def _entries(n: int) -> list[LogEntry]:
    return [LogEntry(id=f"tl_temp_{i:012x}", event_id=str(i), at=START, agent="pro", kind="intent",
                     speaker="pro", text=f"hot entry number {i} " + "word " * 20) for i in range(n)]


def _memories(n: int) -> list[Memory]:
    return [Memory(id=f"EP_20260101_{i:03d}", kind="episode", when=START, text=f"memory {i} " + "detail " * 30)
            for i in range(n)]


def _orientation() -> Orientation:
    return Orientation(agent="flash", slept_from=START, slept_to=START.replace(hour=17),
                       digest=tuple(f"pro (outcome, 1{i}:00): did thing {i}" for i in range(5)),
                       scribed_episode=None, sandbox_id="sb")


def test_sections_come_in_the_stated_order() -> None:
    block = assemble("flash", "sb", 100_000, orientation=_orientation(),
                     clipboard=ClipboardView("flash", ("pinned",)),
                     situation=SituationContext(location_context="mobile_ssh"), hot=_entries(3), memories=_memories(2))
    assert [s.name for s in block.sections] == ["orientation", "clipboard", "guidance", "hot_log", "memories"]
    text = block.text
    positions = [text.index(tag) for tag in ("[ORIENTATION]", "[ACTIVE_CLIPBOARD]", "[SITUATION]", "[HOT_LOG]",
                                             "[MEMORIES]")]
    assert positions == sorted(positions)
    assert "- [2026-01-05] (episode EP_20260101_000) memory 0" in text  # memories carry their dates
    assert block.tokens == count_tokens(text) and not block.over_budget


def test_the_budget_cuts_memories_then_hot_log_then_digest_then_guidance() -> None:
    def build(budget: int) -> dict[str, int]:
        block = assemble("flash", "sb", budget, orientation=_orientation(), clipboard=ClipboardView("flash", ("x",)),
                         situation=SituationContext(agent_role="Senior Dev"), hot=_entries(10), memories=_memories(5))
        assert block.tokens <= budget or block.over_budget
        return {s.name: s.dropped for s in block.sections} | {"_guidance": int(any(
            s.name == "guidance" and s.text for s in block.sections))}

    full = assemble("flash", "sb", 100_000, orientation=_orientation(), clipboard=ClipboardView("flash", ("x",)),
                    situation=SituationContext(agent_role="Senior Dev"), hot=_entries(10),
                    memories=_memories(5)).tokens
    seen = [build(b) for b in range(full, 0, -25)]
    stage = [(d.get("memories", 0), d.get("hot_log", 0), d.get("orientation", 0), d.get("guidance", 0))
             for d in seen]
    # each kind is only cut once everything earlier in the order is gone
    for mem_cut, hot_cut, digest_cut, guidance_cut in stage:
        if hot_cut:
            assert mem_cut == 5
        if digest_cut:
            assert hot_cut == 9  # the newest hot entry is kept
        if guidance_cut:
            assert digest_cut == 5
    assert stage[0] == (0, 0, 0, 0) and stage[-1] == (5, 9, 5, 2)
    tiny = assemble("flash", "sb", 10, orientation=_orientation(), clipboard=ClipboardView("flash", ("x" * 200,)),
                    situation=None, hot=_entries(2), memories=[])
    assert tiny.over_budget and "x" * 200 in tiny.text and "You slept for 8 hours" in tiny.text


def test_situation_guidance_follows_seed_001_section_5() -> None:
    lines = situation_guidance(SituationContext(location_context="mobile_ssh", agent_role="Senior Dev",
                                                interaction_mode="casual", mission_goal="Refactor MSP"))
    text = "\n".join(lines)
    assert "NEVER output more than 2-3 lines of code unless the user explicitly asks" in text
    assert "assert or caution" in text and "Refactor MSP" in text and "Never assume intent" in text
    assert "detailed code" in "\n".join(situation_guidance(SituationContext(location_context="local_dev")))
    assert "role of Friend" in "\n".join(situation_guidance(SituationContext(agent_role="Friend")))


def test_context_of_a_sandbox(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock)
    mem.clipboard_add("pro", "customer: ACME")
    for i in range(25):
        mem.log("pro", f"step {i} of the ACME migration")
        clock.advance(minutes=1)
    block = mem.context("pro", "ACME migration status", 100_000,
                        situation={"location_context": "mobile_ssh", "agent_role": "Senior Dev"})
    assert block.orientation is None and block.sandbox_id == mem.sandbox.id
    hot = next(s for s in block.sections if s.name == "hot_log").text
    assert hot.count("\n- ") == 20 and "step 5 of" in hot and "step 4 of" not in hot  # the 20 hot entries
    assert "2-3 lines of code" in block.text
    clip = "[ACTIVE_CLIPBOARD]\n1. customer: ACME\n[/ACTIVE_CLIPBOARD]"
    assert block.to_dict()["sections"][0] == {"name": "clipboard", "tokens": count_tokens(clip), "truncated": False,
                                              "dropped": 0}
    for bad in ({"budget_tokens": 0}, {"budget_tokens": "10"}, {"situation": {"agent_role": 5}}):
        with pytest.raises(InvalidInput):
            mem.context("pro", "x", **bad)  # type: ignore[arg-type]


def test_rag_search_delivers_full_episodes_to_the_inbox(tmp_path: Path) -> None:
    clock = Clock()
    acct = account(tmp_path)
    first = memory(acct, clock)
    first.log("pro", "Permission denied on /mnt/storage when writing backups")
    first.log("pro", "fixed it: the mount was read-only; remounted with rw and chowned to backup",
              kind="outcome")
    first.log("flash", "the user asked about lunch options", speaker="user")
    first.scribe(keep=1)
    assert isinstance(first.sandbox.archive(), Committed)
    mem = memory(acct, clock, sandbox_name="later")
    result = mem.rag_search("pro", "permission denied storage mount")
    assert len(result.episode_ids) == 1 and result.episode_ids[0].startswith("EP_")
    assert "remounted with rw" in result.markdown and "### Episode EP_" in result.markdown
    inbox = mem.inbox("pro")
    assert [m.id for m in inbox] == [result.message.id] and inbox[0].markdown == result.markdown
    assert mem.inbox("flash") == []
    # the next context shows it among the memories, until it is read
    assert "remounted with rw" in mem.context("pro", "backups", 100_000).text
    assert len(mem.inbox("pro", pop=True)) == 1 and mem.inbox("pro") == []
    with pytest.raises(InvalidInput):
        mem.rag_search("pro", "  ")


def test_rag_search_into_redis(tmp_path: Path) -> None:
    client = shared_redis()
    acct = account(tmp_path)
    inbox = RedisInbox(client, "ann", prefix=f"soulpass-test-{uuid.uuid4().hex[:8]}")
    mem = AgentMemory(acct.create_sandbox("s"), inbox=inbox)
    mem.log("pro", "the VPN certificate expired; renewed it with certbot", kind="outcome")
    mem.scribe(keep=0)
    try:
        result = mem.rag_search("pro", "VPN certificate")
        assert client.llen(inbox.key("pro")) == 1
        # another process reading the same Redis sees it
        other = RedisInbox(shared_redis(), "ann", prefix=inbox.prefix)
        got = other.read("pro", pop=True)
        assert [m.id for m in got] == [result.message.id] and "certbot" in got[0].markdown
        assert client.llen(inbox.key("pro")) == 0 and mem.inbox("pro") == []
        assert not any(e.type == "inbox" for e in mem.sandbox.info.buffer().events())
    finally:
        client.delete(inbox.key("pro"))


def test_memories_below_the_relevance_floor_stay_out_of_the_block(tmp_path: Path) -> None:
    """With the real model: a memory found only by meaning enters the block when it is at least
    ``memory_floor`` similar to the message; a chat line on another topic does not ride in on
    its neighbours (issue 40: "are the backups done?" listed "Congratulations! How is the new flat?")."""
    pytest.importorskip("onnxruntime", reason="needs the embed extra (the real model)")
    acct = account(tmp_path, embedder="auto")
    sb = acct.create_sandbox("past")
    sb.add_turn("user", "We finally moved into the new flat last weekend!")
    sb.add_turn("eva", "Congratulations! How is the new flat?")
    sb.add_journal("Storage runbook: the nightly backup job copies /srv to the NAS at 02:00; check backup.log "
                   "and the snapshot list each morning; restore with restic.", title="storage runbook")
    sb.add_turn("user", "We moved from Lisbon to Porto this week")
    sb.add_turn("eva", "Remember to water the ferns on Sunday")
    sb.archive()
    mem = memory(acct)
    mem.log("eva", "Congratulations again on the flat!")
    mem.log("eva", "the copy to the NAS finished at 02:14", speaker="eva")
    block = mem.context("eva", "are the backups done?", 100_000)
    memories = next(s for s in block.sections if s.name == "memories").text
    assert "Storage runbook" in memories.splitlines()[1], memories
    assert "Congratulations" not in memories and "ferns" not in memories and "Lisbon" not in memories, memories
    lisbon = next(s for s in mem.context("eva", "where do I live now?", 100_000).sections if s.name == "memories")
    assert "Lisbon to Porto" in lisbon.text  # found by meaning alone (no shared word), above the floor
    everything = memory(acct, memory_floor=0.0).context("eva", "are the backups done?", 100_000)
    assert "Congratulations" in everything.text  # the floor, not the search, kept it out


def test_a_standing_instruction_heads_the_memories_of_a_request_it_governs(tmp_path: Path) -> None:
    """Issue 42 item 4: "always use 24-hour time" given weeks earlier governs "what time is our next
    meeting?": it comes first among the memories and says what it is. It governs a question about the
    past on its topic too ("where did the meeting move?"); a question it names no topic of gets none."""
    acct = account(tmp_path)
    sb = acct.create_sandbox("earlier")
    sb.add_turn("user", "Always use 24-hour time format when I ask about meeting schedules.")
    sb.add_turn("eva", "Noted, 24-hour time from now on.")
    sb.add_turn("user", "The meeting with the design team moved to the big room")
    sb.archive()
    mem = memory(acct)
    block = mem.context("eva", "What time is our next meeting scheduled for?", 100_000)
    memories = next(s for s in block.sections if s.name == "memories").text.splitlines()
    assert "(standing instruction, turn_user" in memories[1] and "24-hour time format" in memories[1], memories
    past = next(s for s in mem.context("eva", "Where did the meeting move to?", 100_000).sections
                if s.name == "memories").text
    assert "(standing instruction, turn_user" in past and "big room" in past, past
    other = next(s for s in mem.context("eva", "Which room is the design team in?", 100_000).sections
                 if s.name == "memories").text
    assert "standing instruction" not in other, other
