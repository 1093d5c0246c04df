"""Sleep: the gap since an agent's last entry, the scribe at deep sleep, the orientation block."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agent_helpers import START, Clock, account, memory
from soulpass.agent import AgentMemory
from soulpass.engine import Committed
from soulpass.records import Episode, TurnLLM, TurnUser


def _day(mem: AgentMemory, clock: Clock, n: int = 10) -> list[str]:
    ids = []
    for i in range(n):
        ids.append(mem.log("flash", f"user asks about invoice {i}", speaker="user").id)
        clock.advance(minutes=1)
        ids.append(mem.log("pro", f"invoice {i} booked", kind="outcome").id)
        clock.advance(minutes=1)
    return ids


def test_an_eight_hour_gap_orients_the_agent_and_scribes_all_but_three(tmp_path: Path) -> None:
    clock = Clock()
    acct = account(tmp_path)
    mem = memory(acct, clock)
    ids = _day(mem, clock)  # flash's last entry: 09:18, pro's: 09:19
    flash_last = mem.hot(agent="flash")[-1].at
    # another agent works while flash sleeps: in this log, and in a sandbox of its own that it archives
    clock.advance(hours=3)
    mem.log("pro", "deployed the billing service to staging", kind="outcome")
    other = memory(acct, clock, sandbox_name="pro's own work")
    other.log("pro", "migrated the ledger tables", kind="outcome")
    other.scribe(keep=0)
    assert isinstance(other.sandbox.archive(), Committed)
    clock.now = flash_last + timedelta(hours=8)

    block = mem.context("flash", "what happened while I was away?", 4000)
    o = block.orientation
    assert o is not None and o.duration.total_seconds() == 8 * 3600
    text = block.text
    assert text.startswith("[ORIENTATION]\nYou slept for 8 hours (from 2026-01-05 09:18 to 2026-01-05 17:18 UTC)")
    assert "pro (outcome, 12:20): deployed the billing service to staging" in text
    assert "pro: committed episode EP_20260105_" in text and "migrated the ledger tables" in text
    assert "flash" not in "\n".join(o.digest)  # the digest is about the *other* agents

    # the log keeps exactly the last 3 entries hot; the rest became one episode
    hot = mem.hot()
    all_ids = [*ids, hot[-1].id]
    assert [e.id for e in hot] == all_ids[-3:]
    episode = next(e for e in mem.sandbox.buffer().new_episodes if e["id"] == o.scribed_episode)
    assert list(episode["turn_refs"]) == all_ids[:-3]
    assert episode["annotations"]["scribe"]["reason"] == "deep_sleep"

    # after archive the episode's turn refs resolve to the committed turns, which point back at it
    result = mem.sandbox.archive()
    assert isinstance(result, Committed)
    committed = acct.record(result.plan.id_map[o.scribed_episode])
    assert isinstance(committed, Episode) and len(committed.turn_refs) == len(all_ids) - 3
    for ref in committed.turn_refs:
        turn = acct.record(ref)
        assert isinstance(turn, TurnUser | TurnLLM) and turn.episode_ref == committed.id
    assert [acct.record(r).text for r in committed.turn_refs[:2]] == ["user asks about invoice 0", "invoice 0 booked"]


def test_orientation_is_due_until_the_agent_writes_again(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock)
    _day(mem, clock, 2)
    clock.advance(minutes=30)
    assert mem.wake("flash") is None  # 30 minutes: awake
    clock.advance(hours=2)
    first = mem.wake("flash")
    assert first is not None
    clock.advance(minutes=5)
    again = mem.wake("flash")
    assert again is not None and again.slept_to == first.slept_to  # shown again, not a second sleep
    assert f"It is now {clock.now:%Y-%m-%d %H:%M} UTC" in again.text() != first.text()
    assert sum(1 for e in mem.sandbox.info.buffer().events() if e.type == "wake") == 1
    mem.log("flash", "good morning", speaker="user")
    assert mem.wake("flash") is None
    assert "[ORIENTATION]" not in mem.context("flash", "hi", 2000).text


def test_the_sleep_threshold_is_configurable(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock, sleep_after=timedelta(minutes=10), keep_after_sleep=2)
    _day(mem, clock, 3)
    clock.advance(minutes=11)
    o = mem.wake("pro")
    assert o is not None and o.slept_from == START.replace(minute=5)
    assert "12 minutes" in o.text()  # pro's last entry 09:05, now 09:17 (not counting the next minute)
    assert len(mem.hot()) == 2


def test_deep_sleep_can_archive_and_continue_in_a_fresh_sandbox(tmp_path: Path) -> None:
    clock = Clock()
    acct = account(tmp_path)
    mem = memory(acct, clock, archive_on_sleep=True)
    old_id = mem.sandbox.id
    ids = _day(mem, clock, 4)
    mem.clipboard_add("flash", "invoices go to ledger 7")
    bystander = AgentMemory(acct.sandbox(old_id), clock=clock)  # pro, in another process, same sandbox
    clock.advance(hours=9)
    o = mem.wake("flash")
    assert o is not None and o.sandbox_id == mem.sandbox.id != old_id
    assert acct.head() == 1 and not (acct.store.path / "sandboxes" / old_id).exists()
    assert o.scribed_episode is not None and o.scribed_episode.startswith("EP_")
    hot = mem.hot()  # the three entries that stayed hot, carried over by their permanent ids
    assert [e.text for e in hot] == [acct.record(i).text for i in (e.id for e in hot)]
    assert [e.text for e in hot] == ["invoice 2 booked", "user asks about invoice 3", "invoice 3 booked"]
    assert len(ids) == 8
    assert mem.clipboard_show("flash").items == ("invoices go to ledger 7",)
    assert mem.wake("flash") is not None  # still due in the fresh sandbox
    # the other agent's next read or write follows the log into the fresh sandbox
    assert [e.text for e in bystander.hot()] == [e.text for e in hot]
    entry = bystander.log("pro", "invoice 4 booked", kind="outcome")
    assert bystander.sandbox.id == mem.sandbox.id
    assert mem.hot()[-1].id == entry.id
