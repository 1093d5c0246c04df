"""An OpenAI Agents SDK agent that remembers across sessions, offline.

    python examples/openai_agents_memory.py /tmp/agents-home

Two sessions of one account: in the first the user says where they live, and the session is
archived on close (its messages become turns of a new version); in the second, a new session, the
agent calls ``search_memory`` and answers from what it finds. A scripted model stands in for an
LLM (it calls the tool when asked a question, then quotes its best hit), so no key or network
is needed: give the agent ``OpenAIChatCompletionsModel`` or a model name for the real thing.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import soulpass
from soulpass.integrations.openai_agents import SoulpassSession, memory_search_tool


class ScriptedModel(Model):
    """A question -> a ``search_memory`` call; the tool's answer -> its first line; else "Noted."."""

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = items[-1]
        if last.get("type") == "function_call_output":
            return reply(f"From memory: {str(last['output']).splitlines()[0]}")
        if str(last.get("content", "")).endswith("?"):
            call = ResponseFunctionToolCall(type="function_call", call_id="call_1", name="search_memory",
                                            arguments=json.dumps({"query": last["content"]}))
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        return reply("Noted.")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example does not stream")


def reply(text: str) -> ModelResponse:
    message = ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])])
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


async def main(home: str) -> None:
    set_tracing_disabled(True)  # no trace export: nothing leaves this machine
    account = soulpass.open(home, embedder="none").account("ann", create=True)
    agent = Agent(name="eva", model=ScriptedModel(), tools=[memory_search_tool(account)])

    monday = SoulpassSession(account, "monday", agent="eva")
    print((await Runner.run(agent, "I live in Lisbon", session=monday)).final_output)
    await monday.close()  # archived: version 1 holds the turns

    tuesday = SoulpassSession(account, "tuesday", agent="eva")
    print((await Runner.run(agent, "Where do I live?", session=tuesday)).final_output)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
