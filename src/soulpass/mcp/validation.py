"""Arguments the MCP SDK rejects, answered like every other tool error: one ``InvalidInput`` line.

The SDK validates a call's arguments against the tool's signature before the tool runs and would
answer pydantic's multi-line report (input values, a documentation URL). docs/mcp.md promises one
line naming what was wrong, as our own errors give.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

__all__ = ["OneLineErrors", "invalid_arguments"]


def invalid_arguments(exc: ValidationError) -> str:
    """``InvalidInput: field: what is wrong; …`` on one line, without the rejected values."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{field}: {' '.join(str(err['msg']).split())}")
    return "InvalidInput: " + "; ".join(parts)


class OneLineErrors(MCPServer):
    """The SDK's server, with argument validation errors rewritten as one ``InvalidInput`` line."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {invalid_arguments(cause)}") from cause
