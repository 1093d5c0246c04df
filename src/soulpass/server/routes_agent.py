"""The agent tiers over a sandbox (``soulpass.agent.AgentMemory``): working log, clipboards,
context, RAG search with its inbox, and ingest of text (never a path or URL from the client)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, status
from pydantic import Field

from soulpass.agent import AgentMemory
from soulpass.errors import InvalidInput
from soulpass.ids import MAX_NAME_LENGTH
from soulpass.server.deps import AccountName, Pool, SandboxId
from soulpass.server.models import NAME_PATTERN, _In, _Out
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}/sandboxes/{sandbox_id}", tags=["agent"], responses=ERRORS)
AgentName = Annotated[str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="The agent")]
Agent = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="The agent acting")


class LogIn(_In):
    agent: str = Agent
    text: str
    kind: Literal["intent", "outcome"] = "intent"
    speaker: str | None = Field(default=None, description="'user' for what the user said; default the agent")


class LogEntryOut(_Out):
    id: str
    event_id: str
    at: str
    agent: str
    kind: str
    speaker: str
    text: str


class ClipboardIn(_In):
    action: Literal["add", "remove", "clear"]
    item: str | None = Field(default=None, description="add: the text; remove: the text or its 1-based number")


class ClipboardOut(_Out):
    agent: str
    items: list[str]
    markdown: str


class ContextIn(_In):
    agent: str = Agent
    message: str
    budget_tokens: int = Field(default=2000, ge=50, le=200_000)
    situation: dict[str, Any] | None = None


class RagIn(_In):
    agent: str = Agent
    query: str = Field(max_length=10_000)
    k: int | None = Field(default=None, ge=1, le=50)


class RagOut(_Out):
    query: str
    episode_ids: list[str]
    markdown: str
    message_id: str


class IngestIn(_In):
    agent: str = Agent
    text: str = Field(min_length=1, description="The document itself (the server reads no paths or URLs)")
    title: str | None = None


class IngestOut(_Out):
    raw_id: str
    chunk_ids: list[str]
    episode_id: str
    source: str
    chars: int


class InboxMessageOut(_Out):
    id: str
    at: str
    to_agent: str
    from_tool: str
    subject: str
    markdown: str
    refs: list[str]


@contextmanager
def _memory(pool: Pool, account: str, sandbox_id: str) -> Iterator[AgentMemory]:
    """The agent view of the sandbox, with the account's index to ourselves: a log write may wake
    the agent, and waking reads the index."""
    with pool.indexed(account) as acct:
        yield AgentMemory(acct.sandbox(sandbox_id))


def _clipboard(view: Any) -> ClipboardOut:
    return ClipboardOut(agent=view.agent, items=list(view.items), markdown=view.markdown())


@router.post("/log", response_model=LogEntryOut, status_code=status.HTTP_201_CREATED,
             summary="Append a working-log entry (an intent or an outcome)")
def log_entry(account: AccountName, sandbox_id: SandboxId, body: LogIn, pool: Pool) -> LogEntryOut:
    with _memory(pool, account, sandbox_id) as mem:
        entry = mem.log(body.agent, body.text, kind=body.kind, speaker=body.speaker)
    return LogEntryOut(**entry.to_dict())


@router.get("/log", response_model=list[LogEntryOut], summary="The hot window: the newest entries not yet scribed")
def hot_log(account: AccountName, sandbox_id: SandboxId, pool: Pool,
            n: Annotated[int | None, Query(ge=1, le=1000)] = None,
            agent: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)] = None,
            ) -> list[LogEntryOut]:
    with _memory(pool, account, sandbox_id) as mem:
        return [LogEntryOut(**e.to_dict()) for e in mem.hot(n, agent=agent)]


@router.get("/clipboard/{agent}", response_model=ClipboardOut, summary="An agent's clipboard")
def show_clipboard(account: AccountName, sandbox_id: SandboxId, agent: AgentName, pool: Pool) -> ClipboardOut:
    with _memory(pool, account, sandbox_id) as mem:
        return _clipboard(mem.clipboard_show(agent))


@router.post("/clipboard/{agent}", response_model=ClipboardOut,
             summary="Change an agent's clipboard: add an item, remove one (text or number), clear")
def manage_clipboard(account: AccountName, sandbox_id: SandboxId, agent: AgentName, body: ClipboardIn,
                     pool: Pool) -> ClipboardOut:
    item = (body.item or "").strip()
    if body.action != "clear" and not item:
        raise InvalidInput(f"item is required to {body.action} a clipboard item", field="item")
    with _memory(pool, account, sandbox_id) as mem:
        if body.action == "clear":
            return _clipboard(mem.clipboard_clear(agent))
        if body.action == "add":
            return _clipboard(mem.clipboard_add(agent, item))
        return _clipboard(mem.clipboard_remove(agent, int(item) if item.isdigit() else item))


@router.post("/context", response_model=dict[str, Any],
             summary="The context block for the agent's next turn (clipboard, hot log, memories; within budget)")
def context(account: AccountName, sandbox_id: SandboxId, body: ContextIn, pool: Pool) -> dict[str, Any]:
    with _memory(pool, account, sandbox_id) as mem:
        block = mem.context(body.agent, body.message, body.budget_tokens, situation=body.situation)
    out: dict[str, Any] = block.to_dict()
    return out


@router.post("/rag_search", response_model=RagOut,
             summary="Search episodes; their full text goes to the agent's inbox and comes back here")
def rag_search(account: AccountName, sandbox_id: SandboxId, body: RagIn, pool: Pool) -> RagOut:
    with _memory(pool, account, sandbox_id) as mem:
        result = mem.rag_search(body.agent, body.query, body.k)
    return RagOut(query=result.query, episode_ids=list(result.episode_ids), markdown=result.markdown,
                  message_id=result.message.id)


@router.get("/inbox/{agent}", response_model=list[InboxMessageOut], summary="Messages waiting for an agent")
def inbox(account: AccountName, sandbox_id: SandboxId, agent: AgentName, pool: Pool,
          pop: bool = False) -> list[InboxMessageOut]:
    with _memory(pool, account, sandbox_id) as mem:
        return [InboxMessageOut(**m.to_dict()) for m in mem.inbox(agent, pop=pop)]


@router.post("/ingest", response_model=IngestOut, status_code=status.HTTP_201_CREATED,
             summary="Keep a text document verbatim (sensory memory), chunked for search, with an episode about it")
def ingest(account: AccountName, sandbox_id: SandboxId, body: IngestIn, pool: Pool) -> IngestOut:
    with _memory(pool, account, sandbox_id) as mem:
        result = mem.ingest(body.text, agent=body.agent, kind="text", title=body.title)
    return IngestOut(raw_id=result.raw_id, chunk_ids=list(result.chunk_ids), episode_id=result.episode_id,
                     source=result.source, chars=result.chars)
