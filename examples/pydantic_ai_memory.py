"""A Pydantic AI agent that remembers across conversations, offline.

    python examples/pydantic_ai_memory.py /tmp/pydantic-ai-home

Two conversations of one account, each a ``SoulpassHistory``: in the first the user says where
they live and the history is archived on close (its prompts and answers become turns of a new
version); in the second the agent calls ``search_memory`` and answers from what it finds. Pydantic
AI's ``FunctionModel`` stands in for an LLM (it calls the tool when asked a question, then quotes
the tool's first line), so no key or network is needed: give ``Agent`` a model name for the real thing.
"""

from __future__ import annotations

import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import soulpass
from soulpass.integrations.pydantic_ai import SoulpassHistory, memory_search_tool


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A question -> a ``search_memory`` call; the tool's answer -> its first line; else "Noted."."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart(f"From memory: {str(last.content).splitlines()[0]}")])
    if isinstance(last, UserPromptPart) and str(last.content).endswith("?"):
        return ModelResponse(parts=[ToolCallPart("search_memory", {"query": str(last.content)})])
    return ModelResponse(parts=[TextPart("Noted.")])


def main(home: str) -> list[str]:
    account = soulpass.open(home, embedder="none").account("ann", create=True)
    agent = Agent(FunctionModel(scripted), tools=[memory_search_tool(account)])
    answers = []
    for conversation, prompt in (("monday", "I live in Lisbon"), ("tuesday", "Where do I live?")):
        history = SoulpassHistory(account, conversation, agent="eva")
        result = agent.run_sync(prompt, message_history=history.messages())
        history.add(result.new_messages())
        history.close()  # archived: the turns are in a version of their own
        answers.append(result.output)
    return answers


if __name__ == "__main__":
    for answer in main(sys.argv[1]):
        print(answer)
