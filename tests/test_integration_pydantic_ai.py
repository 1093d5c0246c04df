"""The Pydantic AI adapter against the real ``pydantic_ai`` (no network: its FunctionModel and TestModel)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import soulpass
from soulpass import Committed
from soulpass.integrations.pydantic_ai import SoulpassHistory, memory_search_tool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def close_the_event_loop() -> Iterator[None]:
    """``Agent.run_sync`` leaves a new event loop set on this thread; closed here so that no later test
    collects it open (its unclosed self-pipe socket is a ResourceWarning, an error in this suite)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loop = asyncio.get_event_loop()
    loop.close()
    asyncio.set_event_loop(None)


def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Says how many messages it was given, so a test sees the history reach the model."""
    return ModelResponse(parts=[TextPart(f"I was given {len(messages)} messages")])


def history_of(home: Path, conversation: str = "chat-1", **kw: Any) -> SoulpassHistory:
    return SoulpassHistory(soulpass.open(home, embedder="none").account("ann", create=True), conversation, **kw)


def as_json(messages: list[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def test_messages_round_trip_and_reach_the_model(tmp_path: Path) -> None:
    history = history_of(tmp_path)
    agent = Agent(FunctionModel(echo))
    first = agent.run_sync("my name is Ann", message_history=history.messages())
    history.add(first.new_messages())
    second = agent.run_sync("what is my name?", message_history=history.messages())
    history.add(second.new_messages())
    assert second.output == "I was given 3 messages"  # the first run's request and answer, then this one
    assert as_json(history.messages()) == as_json(second.all_messages())
    history.clear()
    assert history.messages() == []


def test_close_archives_prompts_and_answers_as_turns(tmp_path: Path) -> None:
    history = history_of(tmp_path, agent="eva")
    agent = Agent(TestModel(custom_output_text="Lisbon, noted."))
    history.add(agent.run_sync("I live in Lisbon").new_messages())
    assert isinstance(history.close(), Committed)
    account = history.account
    said = {(r.kind, r.agent, r.text) for kind in ("turn_user", "turn_llm") for r in account.records(kind)}
    assert said == {("turn_user", None, "I live in Lisbon"), ("turn_llm", "eva", "Lisbon, noted.")}
    assert len(history.messages()) == 2  # still the conversation's history after the archive


def test_tool_calls_stay_in_the_history_but_are_not_turns(tmp_path: Path) -> None:
    history = history_of(tmp_path)
    agent = Agent(TestModel(), tools=[memory_search_tool(history.account)])  # TestModel calls every tool once
    result = agent.run_sync("anything about Lisbon?")
    history.add(result.new_messages())
    kinds = [part.part_kind for message in history.messages() for part in message.parts]
    assert "tool-call" in kinds and "tool-return" in kinds
    history.close()
    assert [r.text for r in history.account.records("turn_user")] == ["anything about Lisbon?"]
    assert len(list(history.account.records("turn_llm"))) == 1  # the final answer only


READER = """
import json, sys
import soulpass
from pydantic_ai.messages import ModelMessagesTypeAdapter
from soulpass.integrations.pydantic_ai import SoulpassHistory
history = SoulpassHistory(soulpass.open(sys.argv[1], embedder="none").account("ann"), "chat-1")
print(json.dumps(ModelMessagesTypeAdapter.dump_python(history.messages(), mode="json")))
"""


@pytest.mark.parametrize("archived", [False, True], ids=["open", "archived"])
def test_a_new_process_reads_the_same_history(tmp_path: Path, archived: bool) -> None:
    history = history_of(tmp_path)
    result = Agent(TestModel(custom_output_text="hello Ann")).run_sync("hello")
    history.add(result.new_messages())
    if archived:
        history.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", READER, str(tmp_path)], capture_output=True, text=True, env=env,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == as_json(result.all_messages())


def test_the_example_recalls_across_conversations(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from pydantic_ai_memory import main
    finally:
        sys.path.remove(str(ROOT / "examples"))
    noted, recalled = main(str(tmp_path))
    assert noted == "Noted."
    assert recalled.startswith("From memory: [turn_user ") and recalled.endswith("user: I live in Lisbon")
