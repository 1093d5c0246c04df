"""The MCP tools a memory needs beyond writing and recall (issue 16): one memory by id, lists,
filtered search as of a version, diff, rollback, the journal, core memory and profile; and the
clipboard, core memory and profile as resources. Registered by ``soulpass.mcp.server``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from soulpass.mcp.hints import ADDS, ADDS_ONCE, DESTRUCTIVE, READ_ONLY
from soulpass.mcp.tools import MemoryTools

__all__ = ["AtArg", "add_reading_tools", "add_resources"]

Call = Callable[..., Any]

AtArg = Annotated[int | None, Field(ge=0, description="Read memory as of this version (default: now, HEAD)")]
SandboxArg = Annotated[str | None, Field(description="Sandbox id; default: the session the agent works in")]
Kind = Literal["episode", "turn_user", "turn_llm", "fact", "sensory"]


def add_reading_tools(server: MCPServer, tools: MemoryTools, call: Call) -> None:
    """get_memory, list_memories, search_memory, memory_diff (read-only); rollback_memory
    (destructive); add_journal_entry, read_identity, propose_core, update_profile."""

    @server.tool(annotations=READ_ONLY)
    def get_memory(ref: Annotated[str, Field(description="A record id (TU_…, TL_…, EP_…, SF_…, SR_…, JE_…) or "
                                                         "a document: core, profile, gks, state:<name>")],
                   ctx: Context, at: AtArg = None) -> dict[str, Any]:
        """One memory in full by its id (or a document by name), as of a version."""
        result: dict[str, Any] = call(tools.get_memory, ctx, ref, at)
        return result

    @server.tool(annotations=READ_ONLY)
    def list_memories(kind: Annotated[Kind, Field(description="Which kind of record to list")], ctx: Context,
                      limit: Annotated[int, Field(ge=1, le=100, description="How many per page")] = 20,
                      offset: Annotated[int, Field(ge=0, description="How many of the newest to skip (paging)")] = 0,
                      at: AtArg = None) -> dict[str, Any]:
        """The most recent memories of one kind, newest first, a page at a time (`next_offset` pages on)."""
        result: dict[str, Any] = call(tools.list_memories, ctx, kind, limit, offset, at)
        return result

    @server.tool(annotations=READ_ONLY)
    def search_memory(query: Annotated[str, Field(description="What to look for, in words")], ctx: Context,
                      k: Annotated[int, Field(ge=1, le=50, description="How many hits")] = 10,
                      kinds: Annotated[list[Kind] | None, Field(description="Only these kinds")] = None,
                      agent: Annotated[str | None, Field(description="Only what this agent wrote or said")] = None,
                      tags: Annotated[list[str] | None, Field(description="Only records with all these tags")] = None,
                      since: Annotated[datetime | None, Field(description="Only records from this time on")] = None,
                      until: Annotated[datetime | None, Field(description="Only records before this time")] = None,
                      session_id: Annotated[str | None, Field(description="Only records of this session")] = None,
                      source: Annotated[str | None, Field(description="Only what this importer or tool brought "
                                                                      "in (chatgpt, claude, mem0, …)")] = None,
                      at: AtArg = None,
                      min_score: Annotated[float | None, Field(ge=0, le=1, description="Drop hits of a lower "
                                                                                       "relevance (0 to 1)")] = None,
                      ) -> dict[str, Any]:
        """Search memory with filters, as of a version (`at`); without `at` the agent's open session is
        searched too, so what it just remembered is found. Reads only (rag_search also fills the inbox)."""
        result: dict[str, Any] = call(tools.search_memory, ctx, query, k, kinds=kinds, agent=agent, tags=tags,
                                      since=since, until=until, session_id=session_id, source=source, at=at,
                                      min_score=min_score)
        return result

    @server.tool(annotations=READ_ONLY)
    def memory_diff(a: Annotated[int, Field(ge=0, description="The older version")],
                    b: Annotated[int, Field(ge=0, description="The newer version")], ctx: Context) -> dict[str, Any]:
        """What changed from version `a` to `b`: records added, superseded, retired; documents created,
        changed or removed, key by key."""
        result: dict[str, Any] = call(tools.memory_diff, ctx, a, b)
        return result

    @server.tool(annotations=DESTRUCTIVE)
    def rollback_memory(version: Annotated[int, Field(ge=0, description="The version whose content to restore")],
                        ctx: Context) -> dict[str, Any]:
        """Make memory what it was at `version`, as a new version (later versions stay in history and can
        be rolled back to). Only when the user asks for it."""
        result: dict[str, Any] = call(tools.rollback, ctx, version)
        return result

    @server.tool(annotations=ADDS_ONCE)
    def add_journal_entry(text: Annotated[str, Field(description="The entry, verbatim (Markdown)")], ctx: Context,
                          title: Annotated[str, Field(description="Its title (default: from the text)")] = "",
                          tags: Annotated[list[str] | None, Field(description="Tags to find it by")] = None,
                          type: Annotated[Literal["journal", "experiment", "reflection", "conversation"],
                                          Field(description="What kind of entry")] = "journal",
                          agent: Annotated[str | None, Field(description="The agent writing it")] = None,
                          ) -> dict[str, Any]:
        """Write a journal entry and commit it at once as its own version (an exact repeat is not stored
        and names the original); `remember` with what=journal waits for the session instead."""
        result: dict[str, Any] = call(tools.add_journal_entry, ctx, text, title=title, tags=tags, type=type,
                                      agent=agent)
        return result

    @server.tool(annotations=READ_ONLY)
    def read_identity(ctx: Context, at: AtArg = None) -> dict[str, Any]:
        """The agent's core memory (identity, values, worldview) and the user's profile, as of a version."""
        result: dict[str, Any] = call(tools.read_identity, ctx, at)
        return result

    @server.tool(annotations=ADDS)
    def propose_core(section: Annotated[Literal["identity", "values", "worldview"],
                                        Field(description="The part of core memory to change")],
                     value: Annotated[Any, Field(description="The new value (a string, list or object)")],
                     reason: Annotated[str, Field(description="Why: kept in the version log")], ctx: Context,
                     confidence: Annotated[float, Field(ge=0, le=1, description="How sure (core changes need a "
                                                                                "high confidence at archive)")] = 0.9,
                     key: Annotated[str | None, Field(description="The key inside the section, if any")] = None,
                     sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """Propose a change to core memory in the session; archive applies it by the core rules."""
        result: dict[str, Any] = call(tools.propose_core, ctx, section, value, confidence=confidence, reason=reason,
                                      key=key, sandbox_id=sandbox_id)
        return result

    @server.tool(annotations=ADDS_ONCE)
    def update_profile(data: Annotated[dict[str, Any], Field(description="Profile fields to set, e.g. "
                                                                          '{"name": "Ann", "city": "Lyon"}')],
                       ctx: Context, sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """Update the user's profile in the session; archive merges it into the profile."""
        result: dict[str, Any] = call(tools.update_profile, ctx, data, sandbox_id=sandbox_id)
        return result


def add_resources(server: MCPServer, tools: MemoryTools, call: Call) -> None:
    """``soulpass://clipboard/{agent}`` (Markdown) and ``soulpass://memory/{document}`` (``core``,
    ``profile``; JSON) of the account the request acts for."""

    @server.resource("soulpass://clipboard/{agent}", name="clipboard", mime_type="text/markdown",
                     description="The agent's pinned notes (its clipboard) in the current session")
    def clipboard(agent: str, ctx: Context) -> str:
        shown: dict[str, Any] = call(tools.manage_clipboard, ctx, "show", agent=agent)
        return str(shown["markdown"])

    @server.resource("soulpass://memory/{document}", name="memory document", mime_type="application/json",
                     description="Core memory (`core`) or the user's profile (`profile`) now")
    def document(document: str, ctx: Context) -> str:
        if document not in ("core", "profile"):
            raise ValueError(f"unknown document {document!r}: core or profile")
        return json.dumps(call(tools.get_memory, ctx, document), ensure_ascii=False, indent=1)
