"""The OpenAI Agents SDK adapter against the real SDK (no network: a scripted model stands in)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from agents.memory import Session
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import soulpass
from soulpass import Committed
from soulpass.integrations.openai_agents import SoulpassSession, memory_search_tool
from soulpass.integrations.transcript import Transcript

ROOT = Path(__file__).resolve().parents[1]
set_tracing_disabled(True)  # the SDK would export traces to OpenAI


class EchoModel(Model):
    """Answers "heard: <the last user message>" and keeps what it was given."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        said = next(str(i["content"]) for i in reversed(items) if i.get("role") == "user")
        text = ResponseOutputText(type="output_text", text=f"heard: {said}", annotations=[])
        message = ResponseOutputMessage(id=f"msg_{len(self.inputs)}", type="message", role="assistant",
                                        status="completed", content=[text])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run without streaming")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def session_of(home: Path, sid: str = "chat-1", **kw: Any) -> SoulpassSession:
    return SoulpassSession(soulpass.open(home, embedder="none").account("ann", create=True), sid, **kw)


ITEMS: list[Any] = [
    {"role": "user", "content": "I live in Lisbon"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Lisbon it is.", "annotations": []}]},
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"q\": \"x\"}"},
]


def test_it_is_a_session_of_the_sdk(home: Path) -> None:
    assert isinstance(session_of(home), Session)


def test_items_round_trip_pop_and_clear(home: Path) -> None:
    async def run() -> None:
        session = session_of(home)
        assert await session.get_items() == []
        await session.add_items(ITEMS[:2])
        await session.add_items(ITEMS[2:])
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=2) == ITEMS[1:]
        assert await session.pop_item() == ITEMS[2]
        assert await session.get_items() == ITEMS[:2]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items(ITEMS[:1])
        assert await session.get_items() == ITEMS[:1]

    asyncio.run(run())


def test_close_archives_the_messages_as_turns_and_the_items_stay(home: Path) -> None:
    async def run() -> None:
        session = session_of(home)
        await session.add_items(ITEMS)
        result = await session.close()
        assert isinstance(result, Committed)
        assert await session.get_items() == ITEMS  # now read from the committed transcript
        assert await session.close() is None  # nothing new to archive
        await session.add_items([{"role": "user", "content": "and I have a cat"}])
        assert [i["content"] for i in (await session.get_items())[-1:]] == ["and I have a cat"]

    asyncio.run(run())
    acct = soulpass.open(home, embedder="none").account("ann")
    turns = {(t.kind, t.text) for kind in ("turn_user", "turn_llm") for t in acct.records(kind)}
    assert turns == {("turn_user", "I live in Lisbon"), ("turn_llm", "Lisbon it is.")}  # no tool call
    hits = acct.search("Lisbon", tags=("conversation:chat-1",))
    assert sorted(h.text for h in hits) == ["I live in Lisbon", "Lisbon it is."]
    assert acct.search("Lisbon", tags=("conversation:chat-2",)) == []


def test_archive_every_archives_by_policy(home: Path) -> None:
    async def run() -> None:
        session = session_of(home, archive_every=2)
        await session.add_items(ITEMS[:1])
        assert session.account.head() == 0
        await session.add_items(ITEMS[1:2])
        assert session.account.head() == 1
        assert await session.get_items() == ITEMS[:2]

    asyncio.run(run())


READER = """
import asyncio, json, sys
import soulpass
from soulpass.integrations.openai_agents import SoulpassSession
acct = soulpass.open(sys.argv[1], embedder="none").account("ann")
session = SoulpassSession(acct, "chat-1")
print(json.dumps(asyncio.run(session.get_items())))
"""


@pytest.mark.parametrize("archived", [False, True], ids=["open", "archived"])
def test_a_new_process_reads_the_same_session(home: Path, archived: bool) -> None:
    async def write() -> None:
        session = session_of(home)
        await session.add_items(ITEMS)  # open: the sandbox's buffer holds them; archived: the master
        if archived:
            await session.close()

    asyncio.run(write())
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", READER, str(home)], capture_output=True, text=True, env=env,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == ITEMS


def test_an_agent_run_keeps_its_history_in_the_session(home: Path) -> None:
    model = EchoModel()
    session = session_of(home)
    agent = Agent(name="eva", model=model, tools=[memory_search_tool(session.account)])

    async def run() -> tuple[str, str]:
        first = await Runner.run(agent, "my name is Ann", session=session)
        second = await Runner.run(agent, "what is my name?", session=session)
        return str(first.final_output), str(second.final_output)

    first, second = asyncio.run(run())
    assert (first, second) == ("heard: my name is Ann", "heard: what is my name?")
    seen = [i.get("content") for i in model.inputs[1] if i.get("role") == "user"]
    assert seen == ["my name is Ann", "what is my name?"]  # the second run was given the first from the session
    assert len(asyncio.run(session.get_items())) == 4


def test_the_example_recalls_across_sessions_with_the_memory_tool(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from openai_agents_memory import main
    finally:
        sys.path.remove(str(ROOT / "examples"))
    asyncio.run(main(str(tmp_path)))
    noted, recalled = capsys.readouterr().out.splitlines()
    assert noted == "Noted."
    assert recalled.startswith("From memory: [turn_user ") and recalled.endswith("user: I live in Lisbon")


def test_an_archive_that_failed_writes_its_turns_once_when_tried_again(home: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    session = session_of(home)
    asyncio.run(session.add_items(ITEMS))
    real_archive = soulpass.Sandbox.archive

    def failing(self: soulpass.Sandbox, **kw: Any) -> Any:
        raise soulpass.BackendUnavailable("the disk went away")

    monkeypatch.setattr(soulpass.Sandbox, "archive", failing)
    with pytest.raises(soulpass.BackendUnavailable):
        asyncio.run(session.close())
    monkeypatch.setattr(soulpass.Sandbox, "archive", real_archive)
    assert isinstance(asyncio.run(session.close()), Committed)
    texts = sorted(r.text for kind in ("turn_user", "turn_llm") for r in session.account.records(kind))
    assert texts == ["I live in Lisbon", "Lisbon it is."]


def test_names_are_checked_when_the_session_is_made(home: Path) -> None:
    with pytest.raises(soulpass.InvalidInput, match="agent"):
        session_of(home, agent="Eva Bot")
    with pytest.raises(soulpass.InvalidInput, match="conversation id"):
        session_of(home, "chat/1")


def test_two_writers_on_one_session_lose_nothing(home: Path) -> None:
    one, two = session_of(home), session_of(home)  # two handles, as two processes would hold
    said = {w: [{"role": "user", "content": f"{w} says {n}"} for n in range(12)] for w in ("one", "two")}

    def write(session: SoulpassSession, items: list[Any]) -> None:
        for item in items:
            asyncio.run(session.add_items([item]))

    threads = [threading.Thread(target=write, args=(s, said[w])) for s, w in ((one, "one"), (two, "two"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items = asyncio.run(one.get_items())
    assert sorted(i["content"] for i in items) == sorted(i["content"] for w in said for i in said[w])
    for w in said:  # each writer's items in the order it wrote them
        assert [i for i in items if i["content"].startswith(w)] == said[w]
    one.account.create_sandbox("transcript chat-1")  # a sandbox another process opened and left empty
    asyncio.run(one.close())
    assert one.account.sandboxes() == []
    assert len(list(one.account.records("turn_user"))) == 24


def test_a_write_to_a_sandbox_archived_meanwhile_goes_to_the_next(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = session_of(home)
    asyncio.run(session.add_items(ITEMS[:1]))
    transcript = session.transcript
    [stale] = transcript._open_sandboxes()
    real = Transcript._open_sandboxes
    calls = iter([[stale]])  # the first lookup sees the sandbox another process archives at once

    def lookup(self: Transcript) -> list[Any]:
        return next(calls, None) or real(self)

    session_of(home).transcript.archive()  # "another process"
    monkeypatch.setattr(Transcript, "_open_sandboxes", lookup)
    asyncio.run(session.add_items(ITEMS[1:2]))
    monkeypatch.setattr(Transcript, "_open_sandboxes", real)
    assert asyncio.run(session.get_items()) == ITEMS[:2]
    assert [s.sandbox_id for s in session.account.sandboxes()] != [stale.id]
