"""The OpenAI Agents SDK on Soulpass (extra ``openai-agents``).

``SoulpassSession`` follows the SDK's ``Session`` protocol: its items are a ``Transcript`` kept in a
sandbox, archived (the user and assistant messages become turns of one version) on ``close`` or
every ``archive_every`` items. ``memory_search_tool`` lets the model search the account's memory::

    session = SoulpassSession(sp.account("ann", create=True), "chat-1")
    agent = Agent(name="eva", tools=[memory_search_tool(session.account)])
    await Runner.run(agent, "Where do I live?", session=session)
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from soulpass import Account, ArchiveResult, BackendUnavailable
from soulpass.ids import check_name
from soulpass.integrations.recall import recall
from soulpass.integrations.transcript import Transcript

try:
    from agents import FunctionTool, function_tool
except ImportError as exc:
    raise BackendUnavailable("soulpass.integrations.openai_agents needs the OpenAI Agents SDK: "
                             "pip install 'soulpass[openai-agents]'", extra="openai-agents") from exc

if TYPE_CHECKING:
    from agents import TResponseInputItem
    from agents.memory import SessionSettings

__all__ = ["SoulpassSession", "memory_search_tool", "message_turn"]


def message_turn(item: dict[str, Any], agent: str) -> tuple[str, str] | None:
    """A user or assistant message's (speaker, text); None for tool calls, reasoning, system text."""
    if item.get("type", "message") != "message" or item.get("role") not in ("user", "assistant"):
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(part["text"]) for part in content if isinstance(part, dict) and "text" in part)
    else:
        return None
    if not text.strip():
        return None
    return ("user" if item["role"] == "user" else agent), text


class SoulpassSession:
    """An Agents SDK session whose items live in a Soulpass sandbox of ``account``.

    ``session_id`` names the conversation (``[A-Za-z0-9._-]``): a session opened again with it, in
    this process or another, reads the same items. ``agent`` is the speaker of assistant turns.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, account: Account, session_id: str, *, agent: str = "assistant",
                 archive_every: int | None = None) -> None:
        check_name(agent, "agent")  # refused now rather than at the archive that makes its turns
        self.account = account
        self.session_id = session_id
        self.transcript = Transcript(account, session_id, lambda item: message_turn(item, agent),
                                     archive_every=archive_every)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items: list[Any] = await asyncio.to_thread(self.transcript.items, limit)
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await asyncio.to_thread(self.transcript.add, [dict(item) for item in items])

    async def pop_item(self) -> TResponseInputItem | None:
        item: Any = await asyncio.to_thread(self.transcript.pop)
        return item  # type: ignore[no-any-return]

    async def clear_session(self) -> None:
        await asyncio.to_thread(self.transcript.clear)

    async def close(self) -> ArchiveResult | None:
        """Archive what the session added since its last archive (None: nothing to archive)."""
        return await asyncio.to_thread(self.transcript.archive)


def memory_search_tool(account: Account, k: int = 5) -> FunctionTool:
    """A function tool ``search_memory(query)``: the best ``k`` memories of ``account`` as text."""

    async def search_memory(query: str) -> str:
        """Search your long-term memory (past conversations, facts, notes) for what matches the query."""
        return await asyncio.to_thread(recall, account, query, k)

    return function_tool(search_memory)
