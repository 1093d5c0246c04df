"""The hints every MCP tool carries (``ToolAnnotations``), so a client can tell a read from a write
and ask before what cannot be undone. Each tool touches only this memory: never the open world.

A write here is a new version, the old copy kept in history, so a correction (``edit_memory``,
``update_profile``, the clipboard) is not *destructive*; what removes memory in force for good or
throws unsaved work away is (``forget_memory``, ``rollback_memory``, ``discard_session``).
*Idempotent*: calling again with the same arguments changes nothing more (an import skips what it
already took, an archived session stays archived)."""

from __future__ import annotations

from mcp.types import ToolAnnotations

__all__ = ["ADDS", "ADDS_ONCE", "DESTRUCTIVE", "DESTRUCTIVE_ONCE", "READ_ONLY"]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
ADDS_ONCE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                              open_world_hint=False)
DESTRUCTIVE_ONCE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                   open_world_hint=False)
