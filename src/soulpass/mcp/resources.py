"""What an MCP client reads without calling a tool: the account's identity (``soulpass://identity``)
and its recent version log (``soulpass://log``) as resources, and the prompt ``use_memory`` that
tells an agent how to use its memory. Registered by ``soulpass.mcp.server``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.resources import Resource
from mcp_types import InputRequiredResult
from pydantic import AnyUrl, Field

from soulpass.mcp.tools import MemoryTools

__all__ = ["GUIDE", "MemoryServer", "add_account_resources", "add_prompts"]

Call = Callable[..., Any]

# The request a resource is being read for. The SDK gives a static resource no Context, yet what
# it shows is the requesting account's (over HTTP, the key's): MemoryServer sets this around a read.
_reading: ContextVar[Context[Any, Any] | None] = ContextVar("soulpass_mcp_reading", default=None)


class MemoryServer(MCPServer[Any]):
    """The SDK's server; a resource read knows the request it answers (see ``AccountResource``)."""

    async def read_resource(self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
                            ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        token = _reading.set(context)
        try:
            return await super().read_resource(uri, context)
        finally:
            _reading.reset(token)


class AccountResource(Resource):
    """A listed resource whose content is the requesting account's: ``render(ctx)``, as JSON."""

    render: Callable[[Context[Any, Any]], Any] = Field(exclude=True)

    async def read(self) -> str:
        ctx = _reading.get()
        if ctx is None:
            raise ResourceError(f"{self.uri} is read for a request's account; there is no request")
        value = await anyio.to_thread.run_sync(self.render, ctx)
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def add_account_resources(server: MCPServer[Any], tools: MemoryTools, call: Call) -> None:
    """``soulpass://identity`` (core memory and the user's profile now) and ``soulpass://log`` (the
    newest 20 versions, newest first)."""
    server.add_resource(AccountResource(
        uri="soulpass://identity", name="identity", title="Who the agent is and who the user is",
        description="Core memory (identity, values, worldview) and the user's profile, at the newest version",
        mime_type="application/json", render=lambda ctx: call(tools.read_identity, ctx)))
    server.add_resource(AccountResource(
        uri="soulpass://log", name="log", title="Recent memory versions",
        description="The newest 20 memory versions, newest first: when, from which session, what each added "
                    "and refused",
        mime_type="application/json", render=lambda ctx: call(tools.memory_log, ctx, 20)))


GUIDE = """You have long-term memory (Soulpass) through your tools; your agent name is {agent}.

1. At the start, call `get_context` with the user's message (agent "{agent}"): your pinned notes,
   your recent log and the memories that matter now. The resource soulpass://identity says who you
   are and who the user is; soulpass://log lists the latest memory versions.
2. Before answering about the past (the user's life, earlier decisions, preferences), call
   `search_memory`, and name the ids you rely on. Say so when memory holds nothing.
3. Write as you go with `remember`: what the user tells you (what="turn"), stable facts (what="fact",
   with subject, predicate and object, and your confidence), your reflections (what="journal").
   What you write is found by search at once.
4. Pin what you must keep in sight with `manage_clipboard`.
5. When the conversation ends, call `archive_session`: the session becomes a new memory version
   (the server also archives it by itself, so nothing is lost).
6. Only when the user asks: `forget_memory` (erases for good) or `rollback_memory`. Fix a wrong
   memory with `edit_memory`; the old copy stays in history. These take an owner key: with an agent
   key they answer "Forbidden"; tell the user to do it with theirs."""


def add_prompts(server: MCPServer[Any]) -> None:
    """``use_memory``: how an agent uses these tools, to put in its system prompt."""

    @server.prompt(name="use_memory", title="How to use your long-term memory",
                   description="Instructions for an agent on reading, writing and archiving its memory")
    def use_memory(agent: str = "agent") -> str:
        return GUIDE.format(agent=agent)
