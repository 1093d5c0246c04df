"""The MCP server (official ``mcp`` SDK): memory tools that call the library directly.

Over stdio the server acts for the one account it was started with, with every right (it is the
local user). Over streamable HTTP every request carries ``Authorization: Bearer <key>``; an account
key acts for its account, an admin key for the account named in the ``X-Soulpass-Account`` header,
and a tool the key's role does not allow (``roles.TOOLS``: an agent key rolling back) is refused
with a tool error ``Forbidden: …`` naming the role it needs. Tool failures come back as tool
errors (``is_error``) whose text names the problem.
"""

from __future__ import annotations

import socket
from functools import partial
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from soulpass import __version__
from soulpass.engine import Soulpass
from soulpass.errors import SoulpassError
from soulpass.mcp.hints import ADDS, ADDS_ONCE, DESTRUCTIVE, DESTRUCTIVE_ONCE, READ_ONLY
from soulpass.mcp.reads import add_reading_tools, add_resources
from soulpass.mcp.resources import MemoryServer, add_account_resources, add_prompts
from soulpass.mcp.sessions import AutoArchive, SessionKeeper
from soulpass.mcp.tool_roles import KEY_SCOPE_KEY, ToolsForTheRole, key_of
from soulpass.mcp.tools import ClipboardAction, MemoryTools, RememberWhat
from soulpass.mcp.tools import import_memories as import_memories_text
from soulpass.mcp.validation import OneLineErrors
from soulpass.pool import AccountPool
from soulpass.server.access import approver
from soulpass.server.keys import ApiKey, KeyStore
from soulpass.server.limits import KeyAttempts, RateLimited, ServerLimits
from soulpass.server.roles import TOOLS, RoleMissing, require

__all__ = ["ACCOUNT_SCOPE_KEY", "KEY_SCOPE_KEY", "TOOL_NAMES", "build", "build_server", "http_app", "http_server",
           "run_http", "run_stdio"]

ACCOUNT_SCOPE_KEY = "soulpass.account"
TOOL_NAMES = ("rag_search", "remember", "manage_clipboard", "get_context", "create_sandbox", "archive_session",
              "preview_archive", "approve_archive", "discard_session", "memory_log", "export_account",
              "import_memories", "edit_memory", "memory_history", "forget_memory", "delete_account", "get_memory",
              "list_memories", "search_memory", "memory_diff", "rollback_memory", "add_journal_entry", "read_identity",
              "propose_core", "update_profile")

SandboxArg = Annotated[str | None, Field(description="Sandbox id; default: the session the agent works in (the one "
                                                     "it created or named last, else the open 'mcp' session)")]
AgentArg = Annotated[str, Field(description="The agent acting (clipboards and context are per agent)")]
QueryArg = Annotated[str, Field(description="What to look for, in words")]
RecordArg = Annotated[str, Field(description="A record id (TU_…, TL_…, EP_…, SF_…, SR_…, JE_…)")]
ReasonArg = Annotated[str, Field(description="Why: kept in the version log")]
DryRunArg = Annotated[bool, Field(description="Only say what would happen; write nothing")]

INSTRUCTIONS = (
    "Soulpass long-term memory. Write with `remember` (turns, facts, journal entries) into your "
    "session (the sandbox you created or named last); read with `search_memory`, `get_memory`, "
    "`list_memories`, `rag_search` and `get_context`; pin notes with `manage_clipboard`. "
    "`archive_session` commits the session as a new memory version now; the server also archives it "
    "by itself (after N writes, when idle, when it stops) so nothing is lost. The prompt `use_memory` "
    "says how to use all this; the resources soulpass://identity and soulpass://log show who you are and "
    "the latest versions."
)


def build_server(engine: Soulpass, account: str | None = None, policy: AutoArchive | None = None) -> MCPServer:
    """The MCP server over ``engine``. ``account``: who the tools act for when the request does not
    say (stdio); over HTTP the key decides. ``policy``: when sessions are archived by themselves."""
    return build(engine, account, policy)[0]


class SoulpassMCPServer(OneLineErrors, MemoryServer):
    """The SDK's server with refused arguments as one ``InvalidInput`` line (``validation``),
    resources read for the requesting account (``resources``) and each tool call checked against
    the role the tool needs (``roles.TOOLS``) when a key made the request."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        key = _request_key(context)
        if key is not None:
            try:  # a tool not declared in TOOLS is refused but to an admin (the tests fail on it first)
                require(key, TOOLS.get(name, "admin"), f"the tool {name}")
            except RoleMissing as exc:
                raise ToolError(f"Forbidden: {exc}") from exc
        return await super().call_tool(name, arguments, context)


def _request_key(context: Context[Any, Any] | None) -> ApiKey | None:
    """The key an HTTP request came with (``KeyAuth``); None over stdio."""
    if context is None:
        return None
    try:
        request = context.request_context.request
    except ValueError:  # no request at all: a call from within this process
        return None
    return key_of(request)


def build(engine: Soulpass, account: str | None = None,
          policy: AutoArchive | None = None) -> tuple[MCPServer, SessionKeeper]:
    """The server and its session keeper (start it for the idle timer; close it when the server stops)."""
    undeclared = set(TOOL_NAMES) - set(TOOLS)
    if undeclared:
        raise LookupError(f"MCP tools without a role: {sorted(undeclared)}; declare the role each needs in "
                          "soulpass/server/roles.py (TOOLS)")
    tools = MemoryTools(AccountPool(engine), policy)
    server: MCPServer = SoulpassMCPServer("soulpass", instructions=INSTRUCTIONS, version=__version__)
    server.middleware.append(ToolsForTheRole())  # over HTTP, a key is offered only the tools its role may call
    call = _Caller(engine, account)
    _add_memory_tools(server, tools, call)
    _add_session_tools(server, tools, call)
    _add_import_tools(server, tools, call)
    _add_editing_tools(server, tools, call)
    add_reading_tools(server, tools, call)
    add_resources(server, tools, call)
    add_account_resources(server, tools, call)
    add_prompts(server)
    return server, tools.sessions


class _Caller:
    """Calls a tool for the account the request acts for, turning our errors into tool errors."""

    def __init__(self, engine: Soulpass, account: str | None) -> None:
        self.engine, self.account = engine, account

    def who(self, ctx: Context) -> str:
        request = ctx.request_context.request
        scope = request.scope if isinstance(request, HTTPConnection) else None
        if isinstance(scope, dict) and scope.get(ACCOUNT_SCOPE_KEY):
            return str(scope[ACCOUNT_SCOPE_KEY])
        if request is None and self.account is not None:
            return self.account
        raise ToolError("no account: start the stdio server with --account, or send an API key over HTTP")

    def __call__(self, fn: Any, ctx: Context, /, *args: Any, **kwargs: Any) -> Any:
        acct = self.who(ctx)
        try:
            return fn(acct, *args, **kwargs)
        except SoulpassError as exc:
            raise ToolError(f"{type(exc).__name__}: {str(exc).replace(str(self.engine.home), '<home>')}") from exc
        except NotImplementedError as exc:
            raise ToolError(f"not available in this build: {exc}") from exc


def _add_memory_tools(server: MCPServer, tools: MemoryTools, call: _Caller) -> None:
    """Reading and writing memory: rag_search, remember, manage_clipboard, get_context."""

    @server.tool(annotations=ADDS)
    def rag_search(query: QueryArg, ctx: Context, agent: AgentArg = "agent",
                   k: Annotated[int, Field(ge=1, le=50, description="How many hits")] = 5,
                   sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """Search long-term memory and the open session for `query`: `hits` are the best records of every
        kind (turns, facts, journal entries, documents); `markdown` holds the matching episodes in full
        (also delivered to the agent's inbox)."""
        result: dict[str, Any] = call(tools.rag_search, ctx, query, agent=agent, k=k, sandbox_id=sandbox_id)
        return result

    @server.tool(annotations=ADDS)
    def remember(what: Annotated[RememberWhat, Field(description="turn, fact or journal")],
                 ctx: Context,
                 text: Annotated[str | None, Field(description="The turn's words, the fact in words (or give "
                                                               "subject/predicate/object), or the entry")] = None,
                 agent: Annotated[str | None, Field(description="The agent whose log the turn joins (default: "
                                                                "an agent's turn is its speaker's; a user's "
                                                                "turn is filed under no agent)")] = None,
                 speaker: Annotated[str, Field(description="Who said a turn: 'user' or the agent's name")] = "user",
                 subject: Annotated[str | None, Field(description="A fact's subject (with predicate, object)")] = None,
                 predicate: Annotated[str | None, Field(description="A fact's predicate, e.g. lives_in")] = None,
                 object: Annotated[str | None, Field(description="A fact's object")] = None,
                 confidence: Annotated[float, Field(ge=0.0, le=1.0, description="How sure a fact is (kept at "
                                                                                "archive above 0.7)")] = 0.9,
                 title: Annotated[str | None, Field(description="A journal entry's title")] = None,
                 tags: Annotated[list[str] | None, Field(description="A journal entry's tags")] = None,
                 sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """Write to the session: a `turn` (`text` said by `speaker`, 'user' or the agent, in `agent`'s log), a `fact`
        (`text` like 'User likes tea', or subject/predicate/object; kept if confidence > 0.7 at archive) or
        a `journal` entry (`title`, `text`, `tags`). Searchable at once with search_memory."""
        result: dict[str, Any] = call(tools.remember, ctx, what, text, agent=agent, speaker=speaker, subject=subject,
                                      predicate=predicate, object=object, confidence=confidence, title=title,
                                      tags=tags, sandbox_id=sandbox_id)
        return result

    @server.tool(annotations=ADDS)
    def manage_clipboard(action: Annotated[ClipboardAction, Field(description="add, remove, clear or show")],
                         ctx: Context, agent: AgentArg = "agent",
                         item: Annotated[str | None, Field(description="The note to add, or to remove (its text or "
                                                                        "1-based number)")] = None,
                         sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """Pin notes the agent always sees: `add` an item, `remove` one (by text or 1-based number),
        `clear` all, or `show` them."""
        result: dict[str, Any] = call(tools.manage_clipboard, ctx, action, agent=agent, item=item,
                                      sandbox_id=sandbox_id)
        return result

    @server.tool(annotations=ADDS_ONCE)
    def get_context(message: Annotated[str, Field(description="The user's message the context is for")],
                    ctx: Context, agent: AgentArg = "agent",
                    budget_tokens: Annotated[int, Field(ge=100, le=100_000, description="Most tokens the block "
                                                                                       "may take")] = 2000,
                    sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """The context block for the agent's next turn: clipboard, recent log, retrieved memories, cut to
        `budget_tokens`; `text` is ready to put in a prompt."""
        result: dict[str, Any] = call(tools.get_context, ctx, message, agent=agent, budget_tokens=budget_tokens,
                                      sandbox_id=sandbox_id)
        return result


def _add_session_tools(server: MCPServer, tools: MemoryTools, call: _Caller) -> None:
    """Sessions and versions: create_sandbox, archive_session, preview_archive, approve_archive,
    discard_session, memory_log."""

    @server.tool(annotations=ADDS)
    def create_sandbox(ctx: Context, name: Annotated[str, Field(description="A label for the session")] = "mcp"
                       ) -> dict[str, Any]:
        """Open a new sandbox (a session) on the current memory version; returns its id. It becomes your
        session: the other tools write to it until you create or name another."""
        result: dict[str, Any] = call(tools.create_sandbox, ctx, name)
        return result

    @server.tool(annotations=ADDS_ONCE)
    def archive_session(ctx: Context, sandbox_id: SandboxArg = None, dry_run: DryRunArg = False) -> dict[str, Any]:
        """Consolidate the session into a new memory version (what was added, rejected, conflicts);
        `dry_run` only plans. A session with nothing to store commits no version: status 'unchanged'.
        Status 'awaiting_review': the memory's review policy wants a person to approve some items
        (`needs_review`); nothing was committed and the session waits for the owner's approval."""
        result: dict[str, Any] = call(tools.archive_session, ctx, sandbox_id=sandbox_id, dry_run=dry_run)
        return result

    @server.tool(annotations=READ_ONLY)
    def preview_archive(ctx: Context, sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """What archiving the session would commit now, item by item: each item's id, kind, action
        (add, supersede, change, reject, skip-duplicate), text, the permanent id it gets, the facts it
        supersedes, document changes (key: before -> after), the rule and reason of a reject, and
        `review` when the review policy holds it for a person. Writes nothing."""
        result: dict[str, Any] = call(tools.preview_archive, ctx, sandbox_id=sandbox_id)
        return result

    @server.tool(annotations=ADDS_ONCE)
    def approve_archive(sandbox_id: Annotated[str, Field(description="The sandbox to approve")], ctx: Context,
                        exclude: Annotated[list[str] | None, Field(description="Item ids (preview_archive) to leave "
                                                                               "out")] = None,
                        reason: Annotated[str | None, Field(description="Why they are left out: kept in the "
                                                                        "version log")] = None) -> dict[str, Any]:
        """The owner's approval: archive the sandbox with what the review policy held for a person,
        except the `exclude`d items. The version log names what was left out, who and why; the
        sandbox is kept, closed, so what was left out stays readable in its history (an owner's)."""
        key = _request_key(ctx)
        by = approver(key) if key is not None else "mcp (local user)"
        result: dict[str, Any] = call(tools.approve_archive, ctx, sandbox_id, exclude, reason, by=by)
        return result

    @server.tool(annotations=DESTRUCTIVE_ONCE)
    def discard_session(ctx: Context, sandbox_id: SandboxArg = None) -> dict[str, Any]:
        """Throw the session and everything written to it away; memory is untouched."""
        result: dict[str, Any] = call(tools.discard_session, ctx, sandbox_id=sandbox_id)
        return result

    @server.tool(annotations=READ_ONLY)
    def memory_log(ctx: Context, limit: Annotated[int, Field(ge=1, le=1000, description="How many versions")] = 20
                   ) -> list[dict[str, Any]]:
        """The newest memory versions, newest first: when, from which session, what that version added
        and refused (`added`, `refused`: counts by kind) and the memory's totals after it (`counts`)."""
        result: list[dict[str, Any]] = call(tools.memory_log, ctx, limit)
        return result

    # --- the passport (issue 15, exp) ---
    @server.tool(annotations=ADDS_ONCE)
    def export_account(ctx: Context,
                       history: Annotated[bool, Field(description="Keep every superseded copy too")] = False,
                       vectors: Annotated[bool, Field(description="Carry the vectors (no re-embedding on "
                                                                  "import)")] = False) -> dict[str, Any]:
        """Write this memory as one verified passport file (a zip, docs/passport.md) on the server and
        return its path, version, file count and the manifest's SHA-256. `history`: keep superseded copies;
        `vectors`: carry the vectors, so an import with the same embedder embeds nothing again."""
        result: dict[str, Any] = call(tools.export_account, ctx, history, vectors)
        return result


def run_stdio(engine: Soulpass, account: str, policy: AutoArchive | None = None) -> None:
    engine.account(account)  # NotFound now rather than at the first tool call
    server, sessions = build(engine, account, policy)
    sessions.start()
    try:
        server.run("stdio")
    finally:  # end of input: the sessions written to are archived (AutoArchive.on_close)
        sessions.close()


# --- HTTP --------------------------------------------------------------------------------------

class KeyAuth:
    """Every HTTP request needs a valid key; it decides the account the tools act for. An address
    that sent too many wrong keys is refused (429) before its key is checked, as REST and /ui do."""

    def __init__(self, app: ASGIApp, keys: KeyStore, attempts: KeyAttempts) -> None:
        self.app, self.keys, self.attempts = app, keys, attempts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else "unknown"
        try:
            self.attempts.before_key_check(client)
        except RateLimited as exc:
            await _deny(send, 429, str(exc), retry_after=exc.retry_after)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        auth = headers.get("authorization", "")
        if not auth.lower().startswith("bearer "):
            await _deny(send, 401, "an API key is required: send 'Authorization: Bearer <key>'")
            return
        key = self.keys.verify(auth[7:].strip())
        if key is None:
            self.attempts.key_failed(client)
            await _deny(send, 401, "the API key is not valid (unknown, revoked or malformed)")
            return
        account = key.account if key.account is not None else headers.get("x-soulpass-account")
        if not account:
            await _deny(send, 400, "an admin key must name the account in the X-Soulpass-Account header")
            return
        scope[ACCOUNT_SCOPE_KEY] = account
        scope[KEY_SCOPE_KEY] = key
        await self.app(scope, receive, send)


_DENIED = {401: "Unauthorized", 429: "RateLimited"}


async def _deny(send: Send, status: int, message: str, retry_after: int | None = None) -> None:
    import json

    body = json.dumps({"error": _DENIED.get(status, "BadRequest"), "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(engine: Soulpass, keys: KeyStore, host: str = "127.0.0.1", policy: AutoArchive | None = None,
             failed_keys: int = ServerLimits.failed_keys) -> ASGIApp:
    """The streamable-HTTP MCP app at ``/mcp``, behind key checks (``failed_keys``: wrong keys per
    minute per client address before 429, as ``soulpass serve --failed-keys``; 0: no limit)."""
    return http_server(engine, keys, host, policy, failed_keys)[0]


def http_server(engine: Soulpass, keys: KeyStore, host: str = "127.0.0.1", policy: AutoArchive | None = None,
                failed_keys: int = ServerLimits.failed_keys) -> tuple[ASGIApp, SessionKeeper]:
    server, sessions = build(engine, None, policy)
    return KeyAuth(server.streamable_http_app(host=host), keys, KeyAttempts(failed_keys)), sessions


def run_http(engine: Soulpass, keys: KeyStore, *, sock: socket.socket, policy: AutoArchive | None = None,
             failed_keys: int = ServerLimits.failed_keys) -> None:
    """Serve MCP over streamable HTTP on ``sock`` (bound, not yet listening) until stopped."""
    import uvicorn

    host = str(sock.getsockname()[0])
    app, sessions = http_server(engine, keys, host, policy, failed_keys)
    sessions.start()
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="info")).run(sockets=[sock])
    finally:  # shut down: the sessions written to are archived (AutoArchive.on_close)
        sessions.close()


# --- importers (issue 15) ----------------------------------------------------------------------

ImportSource = Literal["chatgpt", "claude", "mem0", "jsonl"]  # soulpass.importers.FILE_SOURCES


def _add_import_tools(server: MCPServer, tools: MemoryTools, call: _Caller) -> None:
    """import_memories: another tool's export, sent as its text (the server reads no path)."""

    @server.tool(annotations=ADDS_ONCE)
    def import_memories(source: Annotated[ImportSource, Field(description="The tool the export comes from")],
                        content: Annotated[str, Field(description="The export file's text")], ctx: Context,
                        dry_run: DryRunArg = False) -> dict[str, Any]:
        """Import another tool's memories from the text of its export file: `chatgpt` or `claude`
        (a data export's conversations.json), `mem0` (a get_all JSON) or `jsonl` (one message per
        line: conversation_id, role, text, timestamp). What memory already holds is skipped as a
        duplicate; returns the counts imported and skipped by kind and the items that failed, with why."""
        result: dict[str, Any] = call(partial(import_memories_text, tools), ctx, source, content, dry_run=dry_run)
        return result


def _add_editing_tools(server: MCPServer, tools: MemoryTools, call: _Caller) -> None:
    """One memory at a time (issue 15): edit_memory, memory_history, forget_memory."""

    @server.tool(annotations=ADDS)
    def edit_memory(record_id: RecordArg,
                    fields: Annotated[dict[str, Any], Field(description='The fields to set, e.g. {"text_excerpt": '
                                                                        '"…"} or a fact\'s {"object": "…"}')],
                    ctx: Context, reason: ReasonArg = "") -> dict[str, Any]:
        """Correct a committed memory: a new version in which the record carries `fields` (e.g.
        {"text_excerpt": "..."} or, for a fact, {"object": "..."}); a fact is superseded by a new one,
        whose id `now` gives. Earlier versions keep the old copy."""
        result: dict[str, Any] = call(tools.edit_memory, ctx, record_id, fields, reason=reason)
        return result

    @server.tool(annotations=READ_ONLY)
    def memory_history(record_id: RecordArg, ctx: Context) -> list[dict[str, Any]]:
        """Every version that wrote a memory, oldest first, with the fields each added, changed, removed."""
        result: list[dict[str, Any]] = call(tools.memory_history, ctx, record_id)
        return result

    @server.tool(annotations=DESTRUCTIVE_ONCE)
    def forget_memory(reason: ReasonArg, ctx: Context,
                      ids: Annotated[list[str] | None, Field(description="Record ids to forget")] = None,
                      subject: Annotated[str | None, Field(description="Forget every fact about this subject")] = None,
                      query: Annotated[str | None, Field(description="Forget what this search finds")] = None,
                      dry_run: DryRunArg = False) -> dict[str, Any]:
        """Erase memories for good (by id, every fact about `subject`, or what `query` finds): they leave
        the current memory, every earlier version and the search index. Irreversible; `dry_run` lists
        what would be forgotten. Only when the user asks to forget something."""
        result: dict[str, Any] = call(tools.forget_memory, ctx, reason, ids=ids, subject=subject, query=query,
                                      dry_run=dry_run)
        return result

    @server.tool(annotations=DESTRUCTIVE)
    def delete_account(confirm: Annotated[str, Field(description="The account's name, typed again")],
                       ctx: Context) -> dict[str, Any]:
        """Delete this whole account for good: every memory, version, session, index and API key. Only
        when the user asks for their account to be deleted; `confirm` must be the account's name.
        Returns the tombstone (who, when; no content)."""
        result: dict[str, Any] = call(tools.delete_account, ctx, confirm)
        return result
