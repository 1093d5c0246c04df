"""What an HTTP request's key may do with the MCP tools (issue 41): the key the request came with,
and a middleware that lists to it only the tools its role may call (``roles.TOOLS``), so an agent's
client is never offered ``rollback_memory``. Listing is a courtesy; each call is still checked
(``server.SoulpassMCPServer.call_tool``)."""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import ListToolsResult
from starlette.requests import HTTPConnection

from soulpass.server.keys import ApiKey
from soulpass.server.roles import TOOLS, grants

__all__ = ["KEY_SCOPE_KEY", "ToolsForTheRole", "key_of"]

KEY_SCOPE_KEY = "soulpass.key"  # the request's ApiKey, set by the HTTP key check (server.KeyAuth)


def key_of(request: object) -> ApiKey | None:
    """The key an HTTP request came with; None over stdio (or for a call from within this process)."""
    scope = request.scope if isinstance(request, HTTPConnection) else None
    key = scope.get(KEY_SCOPE_KEY) if isinstance(scope, dict) else None
    return key if isinstance(key, ApiKey) else None


class ToolsForTheRole:
    """The SDK's middleware (``MCPServer.middleware``) that takes from a ``tools/list`` answer the
    tools the request's key may not call (a tool ``TOOLS`` does not name: an admin's)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        key = key_of(ctx.request)
        if ctx.method != "tools/list" or key is None:
            return result
        if isinstance(result, ListToolsResult):
            return result.model_copy(update={"tools": [t for t in result.tools if _may_call(key, t.name)]})
        if isinstance(result, dict) and isinstance(result.get("tools"), list):  # the SDK's serialised answer
            return {**result, "tools": [t for t in result["tools"] if _may_call(key, str(t.get("name")))]}
        return result


def _may_call(key: ApiKey, tool: str) -> bool:
    return grants(key, TOOLS.get(tool, "admin"))
