"""The working log (tier 1): entries, attribution, the hot window, several writer processes."""

from __future__ import annotations

import itertools
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

import soulpass
from agent_helpers import Clock, account, memory
from files_helpers import buffer_file
from soulpass.agent import AgentMemory
from soulpass.errors import InvalidInput
from soulpass.records import TurnLLM, TurnUser


def test_entries_say_who_wrote_them_and_whether_intent_or_outcome(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock)
    a = mem.log("flash", "please copy the backups", speaker="user")
    clock.advance(minutes=1)
    b = mem.log("pro", "rsync finished: 12 GB copied", kind="outcome")
    clock.advance(minutes=1)
    c = mem.log("flash", "I asked pro to copy them")
    assert [(e.agent, e.kind, e.speaker) for e in (a, b, c)] == [
        ("flash", "intent", "user"), ("pro", "outcome", "pro"), ("flash", "intent", "flash")]
    assert [e.at for e in mem.entries()] == [a.at, b.at, c.at]
    # stored as turns in the buffer: the user's words a TurnUser, the rest TurnLLM (outcomes tagged)
    turns = {t["id"]: t for t in mem.sandbox.buffer().new_turns}
    assert turns[a.id]["kind"] == "turn_user" and turns[a.id]["agent"] == "flash"
    assert turns[b.id]["kind"] == "turn_llm" and "outcome" in turns[b.id]["tags"]
    assert "outcome" not in turns[c.id]["tags"]
    assert TurnUser.model_validate(turns[a.id]).text_excerpt == "please copy the backups"
    assert TurnLLM.model_validate(turns[b.id]).created_at == b.at


def test_hot_returns_the_last_n_oldest_first(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock)
    for i in range(30):
        mem.log("pro" if i % 2 else "flash", f"entry {i}")
        clock.advance(minutes=1)
    assert [e.text for e in mem.hot()] == [f"entry {i}" for i in range(10, 30)]
    assert [e.text for e in mem.hot(3)] == ["entry 27", "entry 28", "entry 29"]
    assert [e.text for e in mem.hot(2, agent="flash")] == ["entry 26", "entry 28"]
    with pytest.raises(InvalidInput):
        mem.hot(0)


@pytest.mark.parametrize(("args", "kwargs", "field"), [
    (("flash", ""), {}, "text"),
    (("../x", "hi"), {}, "agent"),
    (("flash", "hi"), {"kind": "result"}, "kind"),
    (("flash", "done"), {"kind": "outcome", "speaker": "user"}, "speaker"),
    (("flash", "hi"), {"speaker": "pro"}, "speaker"),
    (("flash", "hi"), {"emotion_signal": 3}, "emotion_signal"),
    (("flash", "hi"), {"session_id": "sb_x"}, "session_id"),
    (("flash", "hi"), {"created_at": "2020-01-01T00:00:00Z"}, "created_at"),
])
def test_bad_entries_are_refused_by_name(tmp_path: Path, args: tuple[str, str], kwargs: dict[str, object],
                                         field: str) -> None:
    mem = memory(account(tmp_path))
    with pytest.raises(InvalidInput) as err:
        mem.log(*args, speaker=kwargs.pop("speaker", "user" if "emotion_signal" in kwargs else None),
                **kwargs)  # type: ignore[arg-type]
    assert field in str(err.value) or field in str(err.value.details)
    assert mem.entries() == []


def test_a_log_past_its_limit_is_scribed_down_to_the_hot_window(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock, log_limit=10, hot_window=4)
    ids = [mem.log("pro", f"step {i} of the migration").id for i in range(11)]
    assert mem.scribe_if_full() is not None
    hot = mem.hot()
    assert [e.id for e in hot] == ids[-4:]
    episode = next(e for e in mem.sandbox.buffer().new_episodes if "scribe" in e["tags"])
    assert episode["turn_refs"] == ids[:-4]
    assert episode["annotations"]["scribe"]["reason"] == "limit"
    assert mem.scribe_if_full() is None  # 4 unscribed entries: under the limit
    assert len(mem.entries()) == 11  # nothing leaves the log itself


def _writer(home: str, sandbox_id: str, agent: str, n: int) -> None:
    sb = soulpass.open(home, embedder="none").account("ann").sandbox(sandbox_id)
    mem = AgentMemory(sb)
    for i in range(n):
        mem.log(agent, f"{agent} entry {i:04d} " + "x" * (i % 50), kind="outcome" if i % 3 == 0 else "intent")


@pytest.mark.slow
def test_two_agents_in_two_processes_write_one_log(tmp_path: Path) -> None:
    acct = account(tmp_path)
    sb = acct.create_sandbox("shared log")
    n = 1000
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), sb.id, agent, n)) for agent in ("flash", "pro")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    raw_lines = buffer_file(sb).read_bytes().split(b"\n")
    assert raw_lines[-1] == b""  # ends with a newline: no torn last line
    for line in raw_lines[:-1]:
        json.loads(line)  # every line whole: none interleaved mid-line
    assert sb.info.buffer().torn_lines() == 0
    entries = AgentMemory(sb).entries()
    assert len(entries) == 2 * n
    for agent in ("flash", "pro"):
        mine = [e for e in entries if e.agent == agent]
        assert [e.text.split()[2] for e in mine] == [f"{i:04d}" for i in range(n)]  # none lost, in order
        assert all(e.text.startswith(agent) for e in mine)  # each attributed to its writer
        assert sum(e.kind == "outcome" for e in mine) == len(range(0, n, 3))
    # both wrote at the same time: the log interleaves their entries (line by line)
    switches = sum(1 for a, b in itertools.pairwise(entries) if a.agent != b.agent)
    assert switches > 1


def _scribe(home: str, sandbox_id: str, barrier: Any) -> None:
    mem = AgentMemory(soulpass.open(home, embedder="none").account("ann").sandbox(sandbox_id))
    barrier.wait()
    for _ in range(5):
        mem.scribe(keep=0)
        mem.log("pro", "one more")


@pytest.mark.slow
def test_two_processes_never_scribe_the_same_entries(tmp_path: Path) -> None:
    acct = account(tmp_path)
    mem = memory(acct)
    for i in range(40):
        mem.log("pro", f"entry {i}")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_scribe, args=(str(tmp_path), mem.sandbox.id, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    covered = [ref for ep in mem.sandbox.buffer().new_episodes for ref in ep["turn_refs"]]
    assert len(covered) == len(set(covered))  # no entry in two episodes
    entries = mem.entries()
    assert len(entries) == 50
    assert set(covered) | {e.id for e in mem.hot()} == {e.id for e in entries}
