"""Pydantic AI on Soulpass (extra ``pydantic-ai``).

Pydantic AI keeps a conversation as the ``message_history`` a run is given and the
``new_messages()`` it returns. ``SoulpassHistory`` keeps them in a ``Transcript`` (a sandbox,
archived on ``close`` or every ``archive_every`` messages: the user prompts and text answers become
turns of one version); ``memory_search_tool`` lets the model search the account's memory::

    history = SoulpassHistory(sp.account("ann", create=True), "chat-1")
    agent = Agent(model, tools=[memory_search_tool(history.account)])
    result = agent.run_sync("Where do I live?", message_history=history.messages())
    history.add(result.new_messages())
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from soulpass import Account, ArchiveResult, BackendUnavailable
from soulpass.ids import check_name
from soulpass.integrations.recall import recall
from soulpass.integrations.transcript import Transcript

try:
    from pydantic_ai import Tool
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
except ImportError as exc:
    raise BackendUnavailable("soulpass.integrations.pydantic_ai needs Pydantic AI: "
                             "pip install 'soulpass[pydantic-ai]'", extra="pydantic-ai") from exc

__all__ = ["SoulpassHistory", "memory_search_tool", "message_turn"]


def message_turn(message: dict[str, Any], agent: str) -> tuple[str, str] | None:
    """A message's user prompts or text answer as (speaker, text); None when it holds neither
    (tool calls and returns, system prompts)."""
    kind, part_kind = message.get("kind"), ("user-prompt" if message.get("kind") == "request" else "text")
    texts = [part["content"] for part in message.get("parts", ())
             if part.get("part_kind") == part_kind and isinstance(part.get("content"), str)]
    text = "\n".join(texts)
    if not text.strip():
        return None
    return ("user" if kind == "request" else agent), text


class SoulpassHistory:
    """The message history of one conversation (``conversation``: ``[A-Za-z0-9._-]``) in ``account``;
    opened again with the same name, in this process or another, it reads the same messages.
    ``agent`` is the speaker of the model's turns."""

    def __init__(self, account: Account, conversation: str, *, agent: str = "assistant",
                 archive_every: int | None = None) -> None:
        check_name(agent, "agent")  # refused now rather than at the archive that makes its turns
        self.account = account
        self.transcript = Transcript(account, conversation, lambda message: message_turn(message, agent),
                                     archive_every=archive_every)

    def messages(self) -> list[ModelMessage]:
        """Every message so far, for ``message_history=``."""
        return ModelMessagesTypeAdapter.validate_python(self.transcript.items())

    def add(self, messages: Sequence[ModelMessage]) -> None:
        """Append a run's ``new_messages()``."""
        self.transcript.add(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"))

    def clear(self) -> None:
        self.transcript.clear()

    def close(self) -> ArchiveResult | None:
        """Archive what was added since the last archive (None: nothing to archive)."""
        return self.transcript.archive()


def memory_search_tool(account: Account, k: int = 5) -> Tool[Any]:
    """A tool ``search_memory(query)``: the best ``k`` memories of ``account`` as text."""

    def search_memory(query: str) -> str:
        """Search your long-term memory (past conversations, facts, notes) for what matches the query."""
        return recall(account, query, k)

    return Tool(search_memory, takes_ctx=False)
