"""``AgentMemory``: the agent tiers of Volition 7.0 (seed 004) over one sandbox.

Tier 1 is the sandbox's session buffer seen as a working log, tier 1.5 the per-agent clipboards,
tier 2 the scribe's episodes, tier 3 hybrid search; sleep, orientation, ingest, the RAG inbox and
context assembly sit on top. Several agents (and processes) share one sandbox's log; every call
names the agent it acts for. Time comes from ``clock`` so tests can simulate a night.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from soulpass.agent.context import Memory, assemble
from soulpass.agent.ingest import chunk_text, read_source
from soulpass.agent.orientation import committed_episode_lines, digest_lines
from soulpass.agent.rag import find_episodes, render_episode
from soulpass.agent.recall import BufferRows
from soulpass.agent.scribe import SummaryRequest, draft_episode
from soulpass.agent.types import (
    AgentConfig,
    ClipboardView,
    Clock,
    ContextBlock,
    EntryKind,
    InboxMessage,
    IngestResult,
    LogEntry,
    Orientation,
    RagResult,
    ScribeResult,
)
from soulpass.agent.worklog import (
    SCRIBE_TAG,
    append_records,
    entry_from_record,
    log_entries,
    make_turn,
    unscribed,
)
from soulpass.consolidation.clipboard import ClipboardOp, apply_ops, read_clipboard_items
from soulpass.engine import Committed
from soulpass.errors import Conflict, InvalidInput, NotFound
from soulpass.ids import check_name, new_temp_id, utc_now
from soulpass.index.catalog import Filters
from soulpass.index.search import Hit
from soulpass.records import BufferEvent, Episode, SensoryRecord, SituationContext
from soulpass.sessions.buffer import SandboxBuffer
from soulpass.store.contract import SessionTail

if TYPE_CHECKING:
    from soulpass.agent.inbox import Inbox
    from soulpass.agent.scribe import Summariser
    from soulpass.engine import Sandbox

__all__ = ["AgentMemory"]


class AgentMemory:
    """The agent-side view of one sandbox.

    ``summariser``: defaults to the extractive one (no model). ``inbox``: defaults to a list in the
    session buffer; pass a :class:`soulpass.agent.inbox.RedisInbox` to deliver through Redis.
    """

    def __init__(self, sandbox: Sandbox, *, config: AgentConfig | None = None, clock: Clock | None = None,
                 summariser: Summariser | None = None, inbox: Inbox | None = None) -> None:
        from soulpass.agent.inbox import BufferInbox
        from soulpass.agent.scribe import ExtractiveSummariser

        self._sandbox = sandbox
        self.config = config or AgentConfig()
        self.clock: Clock = clock or utc_now
        self.summariser: Summariser = summariser or ExtractiveSummariser()
        self.inbox_backend: Inbox = inbox or BufferInbox(lambda: self._sandbox, self.clock, self._events)
        self._tail: tuple[str, SessionTail] | None = None  # (sandbox id, its reader)
        self._rows: BufferRows | None = None


    @property
    def sandbox(self) -> Sandbox:
        """The sandbox the agents write to now (a fresh one after a deep sleep with ``archive_on_sleep``)."""
        return self._sandbox

    # --- plumbing ---------------------------------------------------------------------------

    def _buffer(self) -> SandboxBuffer:
        return self._sandbox.info.buffer(self._sandbox.account.sp.limits)

    def _gone(self) -> bool:
        try:
            self._sandbox.info.current()
        except NotFound:
            return True
        return False

    def _events(self) -> list[BufferEvent]:
        if self._gone():
            self._follow()  # archived on a deep sleep by another process: read its continuation
        if self._tail is None or self._tail[0] != self._sandbox.id:
            self._tail = (self._sandbox.id, self._buffer().tail())
        return self._tail[1].events()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._gone():
            self._follow()
        try:
            with self._buffer().section("agent"):  # one scribe or wake at a time across processes
                yield
        except FileNotFoundError:
            raise Conflict(f"sandbox {self._sandbox.id} no longer exists", sandbox_id=self._sandbox.id) from None

    def _append(self, items: list[tuple[str, Any, str | None]], at: datetime) -> list[BufferEvent]:
        try:
            return append_records(self._buffer(), items, at)
        except Conflict:
            if not self._follow():
                raise
            return append_records(self._buffer(), items, at)

    def _follow(self) -> bool:
        """After another process archived this sandbox on a deep sleep, move to its continuation."""
        old = self._sandbox.id
        acct = self._sandbox.account
        for info in acct.sandboxes():
            for ev in info.buffer().events()[:5]:
                if ev.type == "wake" and ev.data.get("continued_from") == old:
                    self._sandbox = acct.sandbox(info.sandbox_id)
                    return True
        return False

    def _search(self, query: str, k: int, events: list[BufferEvent], kinds: tuple[str, ...] = ()) -> list[Hit]:
        if self._rows is None or self._rows.sandbox_id != self._sandbox.id:
            self._rows = BufferRows(self._sandbox.id)
        return self._sandbox.search_buffered(query, k, Filters(kinds=kinds), events, self._rows.rows(events))

    def _carried(self, events: list[BufferEvent]) -> list[LogEntry]:
        """Entries that stayed hot when the previous sandbox was archived on a deep sleep."""
        out = []
        for ev in events:
            if ev.type == "wake":
                for rid in ev.data.get("carried", ()):
                    with contextlib.suppress(NotFound):
                        entry = entry_from_record(self._sandbox.account.record(rid))
                        if entry is not None:
                            out.append(entry)
        return out

    def _entries(self, events: list[BufferEvent]) -> list[LogEntry]:
        return self._carried(events) + log_entries(events)

    # --- tier 1: the working log ------------------------------------------------------------

    def log(self, agent: str, text: str, *, kind: EntryKind = "intent", speaker: str | None = None,
            **fields: Any) -> LogEntry:
        """Append one entry: an intent (a turn; ``speaker="user"`` for what the user said) or an
        outcome (a tool or task result). Durable on return; safe from several processes."""
        at = self.clock()
        turn = make_turn(agent, text, kind, speaker, at, dict(fields))
        event = self._append([("turn", turn, agent)], at)[0]
        return log_entries([event])[0]

    def entries(self) -> list[LogEntry]:
        """Every log entry of the sandbox in append order (scribed ones included)."""
        return self._entries(self._events())

    def hot(self, n: int | None = None, *, agent: str | None = None) -> list[LogEntry]:
        """The last ``n`` (default ``config.hot_window``) entries not yet summarised by the scribe,
        oldest first; ``agent`` keeps only that agent's entries."""
        n = self.config.hot_window if n is None else n
        if type(n) is not int or n < 1:
            raise InvalidInput(f"n must be a positive integer, not {n!r}", field="n")
        events = self._events()
        pending = unscribed(self._entries(events), events)
        if agent is not None:
            pending = [e for e in pending if e.agent == check_name(agent, "agent")]
        return pending[-n:]

    # --- tier 1.5: clipboards ---------------------------------------------------------------

    def _clipboard(self, agent: str, events: list[BufferEvent]) -> list[str]:
        check_name(agent, "agent")
        sb = self._sandbox
        base = read_clipboard_items(sb.account.store, agent, sb.info.parent_version)
        ops = [ClipboardOp.model_validate(ev.data) for ev in events
               if ev.type == "clipboard_op" and ev.data.get("agent") == agent]
        return apply_ops(base, ops)

    def _clipboard_op(self, agent: str, **data: Any) -> ClipboardView:
        try:
            op = ClipboardOp(agent=agent, **data)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InvalidInput(f"clipboard {data.get('op')} rejected: {err['msg']}", field="item") from exc
        self._append([("clipboard_op", op, agent)], self.clock())
        return self.clipboard_show(agent)

    def clipboard_show(self, agent: str) -> ClipboardView:
        return ClipboardView(agent=agent, items=tuple(self._clipboard(agent, self._events())))

    def clipboard_add(self, agent: str, item: str) -> ClipboardView:
        """Pin ``item`` (appended at the end; an item already pinned is not added twice)."""
        if not isinstance(item, str):
            raise InvalidInput(f"a clipboard item must be text, not {type(item).__name__}", field="item")
        return self._clipboard_op(agent, op="add", item=item)

    def clipboard_remove(self, agent: str, item: str | int) -> ClipboardView:
        """Unpin an item by its exact text or its 1-based number; ``NotFound`` if it is not there."""
        items = self._clipboard(agent, self._events())
        if isinstance(item, int) and not isinstance(item, bool):
            if not 1 <= item <= len(items):
                raise NotFound(f"{agent}'s clipboard has no item {item} (it has {len(items)})", agent=agent)
            text = items[item - 1]
        elif isinstance(item, str):
            if item not in items:
                raise NotFound(f"{agent}'s clipboard has no item {item[:80]!r}", agent=agent)
            text = item
        else:
            raise InvalidInput(f"a clipboard item is named by text or number, not {type(item).__name__}",
                               field="item")
        return self._clipboard_op(agent, op="remove", item=text)

    def clipboard_clear(self, agent: str) -> ClipboardView:
        items = self._clipboard(agent, self._events())
        return self._clipboard_op(agent, op="clear", items=tuple(items))

    # --- sleep, scribe ----------------------------------------------------------------------

    def wake(self, agent: str) -> Orientation | None:
        """The sleep check. When the gap since ``agent``'s last entry exceeds ``config.sleep_after``:
        scribe all but the last ``keep_after_sleep`` entries, record the wake, and (with
        ``archive_on_sleep``) archive and continue in a fresh sandbox. Returns the orientation while
        it is due (until the agent next writes to the log), else None."""
        check_name(agent, "agent")
        with self._locked():
            events = self._events()
            now = self.clock()
            last: datetime | None = None
            wake: BufferEvent | None = None
            for ev in events:
                if ev.agent == agent and ev.type in ("turn", "wake"):
                    last = ev.at if last is None else max(last, ev.at)
                    wake = ev if ev.type == "wake" else None
            if last is not None and now - last > self.config.sleep_after:
                return self._deep_sleep(agent, last, now, events)
        if wake is None:
            return None
        return self._orientation(agent, wake.data)

    def _orientation(self, agent: str, data: dict[str, Any]) -> Orientation:
        return Orientation(agent=agent, slept_from=datetime.fromisoformat(data["slept_from"]),
                           slept_to=datetime.fromisoformat(data["slept_to"]), digest=tuple(data.get("digest", ())),
                           scribed_episode=data.get("scribed_episode"), sandbox_id=self._sandbox.id,
                           now=self.clock())

    def _deep_sleep(self, agent: str, last: datetime, now: datetime, events: list[BufferEvent]) -> Orientation:
        acct = self._sandbox.account
        per = self.config.digest_items
        entries = self._entries(events)
        for info in acct.sandboxes():  # what the other agents logged in the account's other sandboxes
            if info.sandbox_id != self._sandbox.id:
                with contextlib.suppress(Conflict, NotFound, FileNotFoundError):
                    entries += log_entries(info.buffer().events())
        digest = digest_lines(entries, agent, last, now, per) + committed_episode_lines(acct, agent, last, now, per)
        result = self._scribe_locked(events, "deep_sleep", self.config.keep_after_sleep, now)
        data: dict[str, Any] = {"agent": agent, "slept_from": last.isoformat(), "slept_to": now.isoformat(),
                                "digest": digest, "scribed_episode": result.episode_id if result else None}
        self._buffer().append("wake", data, agent=agent, at=now)
        if self.config.archive_on_sleep:
            data = self._continue_fresh(data, now)
        return self._orientation(agent, data)

    def _continue_fresh(self, data: dict[str, Any], now: datetime) -> dict[str, Any]:
        """Archive the sandbox and continue in a fresh one whose first event carries the hot entries."""
        old = self._sandbox
        events = self._events()
        hot_ids = [e.id for e in unscribed(self._entries(events), events)]
        result = old.archive()
        id_map = result.plan.id_map if isinstance(result, Committed) else {}
        fresh = old.account.create_sandbox(f"{old.info.name[:180]} (after sleep)")
        ep = data.get("scribed_episode")
        data = {**data, "scribed_episode": id_map.get(ep, ep) if ep else None,
                "carried": [id_map.get(i, i) for i in hot_ids], "continued_from": old.id}
        self._sandbox = fresh
        self._buffer().append("wake", data, agent=data["agent"], at=now)
        return data

    def scribe(self, *, reason: str = "manual", keep: int | None = None) -> ScribeResult | None:
        """Summarise every unscribed entry but the last ``keep`` (default ``hot_window``) into one
        Episode in the buffer; None when there is nothing to summarise."""
        keep = self.config.hot_window if keep is None else keep
        if type(keep) is not int or keep < 0:
            raise InvalidInput(f"keep must be a non-negative integer, not {keep!r}", field="keep")
        with self._locked():
            return self._scribe_locked(self._events(), reason, keep, self.clock())

    def scribe_if_full(self) -> ScribeResult | None:
        """Run the scribe when more than ``config.log_limit`` entries are unscribed."""
        with self._locked():
            events = self._events()
            if len(unscribed(self._entries(events), events)) <= self.config.log_limit:
                return None
            return self._scribe_locked(events, "limit", self.config.hot_window, self.clock())

    def _scribe_locked(self, events: list[BufferEvent], reason: str, keep: int, now: datetime) -> ScribeResult | None:
        pending = unscribed(self._entries(events), events)
        batch = pending[: len(pending) - keep] if keep else pending
        if not batch:
            return None
        draft, name, fallback = draft_episode(self.summariser, SummaryRequest(reason=reason, entries=tuple(batch)))
        agents = sorted({e.agent for e in batch})
        ep = Episode(
            id=new_temp_id("episode"), turn_refs=tuple(e.id for e in batch), situation_context=draft.situation_context,
            summary=draft.summary, text=draft.narrative, agent=agents[0] if len(agents) == 1 else None,
            created_at=now, tags=(SCRIBE_TAG,),
            annotations={"scribe": {"reason": reason, "summariser": name, "fallback": fallback, "agents": agents,
                                    "title": draft.title, "first_at": batch[0].at.isoformat(),
                                    "last_at": batch[-1].at.isoformat(), "entries": len(batch)}})
        self._append([("episode", ep, ep.agent)], now)
        return ScribeResult(episode_id=ep.id, covered=ep.turn_refs, summariser=name, fallback=fallback,
                            narrative=draft.narrative)

    # --- ingest, RAG, inbox -----------------------------------------------------------------

    def ingest(self, source: str | Path, *, agent: str, kind: Literal["auto", "path", "url", "text"] = "auto",
               title: str | None = None) -> IngestResult:
        """Keep a document verbatim in sensory memory, chunk it for the index, log an outcome
        and have the scribe write an Episode about it. ``kind="auto"``: an http(s) URL, an existing
        file, else text."""
        check_name(agent, "agent")
        if kind not in ("auto", "path", "url", "text"):
            raise InvalidInput(f"ingest kind must be auto, path, url or text, not {kind!r}", field="kind")
        doc = read_source(source, kind)
        if not doc.text.strip():
            raise InvalidInput(f"{doc.source} has no text to ingest", field="source")
        now = self.clock()
        title = title or doc.title or doc.text.strip().splitlines()[0].strip("# ")[:120]
        doc_tag = "doc:" + hashlib.sha256(doc.text.encode("utf-8")).hexdigest()[:16]
        raw = SensoryRecord(id=new_temp_id("sensory"), content=doc.text, source=doc.source,
                            media_type=doc.media_type, agent=agent, created_at=now, tags=("ingest", "raw", doc_tag))
        pieces = chunk_text(doc.text, self.config.chunk_chars, self.config.chunk_overlap)
        chunks = [] if len(pieces) < 2 else [
            SensoryRecord(id=new_temp_id("sensory"), content=p, source=f"{doc.source}#chunk-{i}/{len(pieces)}",
                          media_type="text/plain", agent=agent, created_at=now, tags=("ingest", "chunk", doc_tag))
            for i, p in enumerate(pieces, 1)]
        self._append([("sensory", r, agent) for r in (raw, *chunks)], now)
        label = doc.source if len(doc.source) <= 200 else doc.source[:199] + "…"
        # No record id in the text: the raw record's is temporary until the archive, and the
        # episode's turn_refs link this entry to it by the id that lasts.
        entry = self.log(agent, f"Ingested {label}: \"{title}\" ({len(doc.text)} characters, "
                                f"{max(len(chunks), 1)} chunk(s)), kept verbatim in sensory memory", kind="outcome")
        draft, name, fallback = draft_episode(self.summariser, SummaryRequest(
            reason="ingest", document=doc.text, source=doc.source))
        ep = Episode(id=new_temp_id("episode"), turn_refs=(entry.id, raw.id), situation_context=draft.situation_context,
                     summary=draft.summary, text=draft.narrative, agent=agent, created_at=now, tags=("ingest",),
                     annotations={"scribe": {"reason": "ingest", "summariser": name, "fallback": fallback,
                                             "agents": [agent], "title": title, "source": doc.source,
                                             "doc_tag": doc_tag}})
        self._append([("episode", ep, agent)], now)
        return IngestResult(raw_id=raw.id, chunk_ids=tuple(c.id for c in chunks), episode_id=ep.id,
                            source=doc.source, chars=len(doc.text))

    def rag_search(self, agent: str, query: str, k: int | None = None) -> RagResult:
        """Hybrid search for episodes; their full text as Markdown is delivered to ``agent``'s inbox
        (nothing is delivered when no episode matches)."""
        check_name(agent, "agent")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("rag_search needs a non-empty query", field="query")
        k = self.config.rag_k if k is None else k
        if type(k) is not int or k < 1:
            raise InvalidInput(f"k must be a positive integer, not {k!r}", field="k")
        events = self._events()
        hits = self._search(query, max(4 * k, 10), events, ("episode", "turn_user", "turn_llm"))
        episodes = find_episodes(self._sandbox, hits, k, events)
        body = "\n\n".join(render_episode(e) for e in episodes) or "No matching episodes."
        markdown = f"## rag_search: {query}\n\n{body}"
        msg = InboxMessage(id=uuid.uuid4().hex, at=self.clock(), to_agent=agent, from_tool="rag_search",
                           subject=query, markdown=markdown, refs=tuple(e.id for e in episodes))
        if episodes:  # nothing found is said in the answer, not left in the inbox as context noise
            self.inbox_backend.push(msg)
        return RagResult(query=query, episode_ids=msg.refs, markdown=markdown, message=msg)

    def inbox(self, agent: str, *, pop: bool = False) -> list[InboxMessage]:
        """Messages waiting for ``agent``, oldest first; ``pop`` marks them read."""
        return self.inbox_backend.read(agent, pop=pop)

    # --- context ----------------------------------------------------------------------------

    def _memory_text(self, rid: str, kind: str, text: str, events: list[BufferEvent]) -> str:
        """An episode is shown by its structured summary (its narrative can be long), the rest as found."""
        if kind != "episode":
            return text
        ep: Any = next((ev.data for ev in events if ev.type == "episode" and ev.data.get("id") == rid), None)
        try:
            episode = Episode.model_validate(ep) if ep is not None else self._sandbox.account.record(rid)
        except (NotFound, ValidationError):
            return text
        if not isinstance(episode, Episode):
            return text
        s = episode.summary
        parts = [f"Action: {s.action_taken}" if s.action_taken else "", f"Outcome: {s.key_outcome}" if s.key_outcome
                 else "", f"Next: {s.future_implication}" if s.future_implication else ""]
        return " | ".join(p for p in parts if p) or text

    def context(self, agent: str, message: str, budget_tokens: int = 2000, *,
                situation: SituationContext | dict[str, Any] | None = None) -> ContextBlock:
        """The block ``agent`` gets this turn: orientation (if due), clipboard, situation guidance,
        hot log, retrieved memories, cut to ``budget_tokens`` (see docs/agent.md for the order)."""
        check_name(agent, "agent")
        if type(budget_tokens) is not int or budget_tokens < 1:
            raise InvalidInput(f"budget_tokens must be a positive integer, not {budget_tokens!r}",
                               field="budget_tokens")
        if not isinstance(message, str):
            raise InvalidInput(f"message must be text, not {type(message).__name__}", field="message")
        if isinstance(situation, dict):
            try:
                situation = SituationContext.model_validate(situation)
            except ValidationError as exc:
                raise InvalidInput(f"situation rejected: {exc.errors()[0]['msg']}", field="situation") from exc
        orientation = self.wake(agent)
        self.scribe_if_full()
        events = self._events()
        hot = unscribed(self._entries(events), events)[-self.config.hot_window:]
        memories = [Memory(id=m.id, kind="inbox", when=m.at, text=m.markdown) for m in self.inbox(agent)]
        wanted = len(memories) + self.config.memories_k
        if message.strip():
            shown = {e.id for e in hot}
            for hit in self._search(message, self.config.memories_k + len(shown), events):
                standing = "standing" in hit.parts  # it governs the message: shown whatever its similarity
                if hit.id in shown or not (standing or _clears_floor(hit, self.config.memory_floor)):
                    continue
                when = hit.row.event_time if hit.row is not None else None
                memories.append(Memory(id=hit.id, kind=hit.kind, when=when, text=self._memory_text(hit.id, hit.kind,
                                                                                                 hit.text, events),
                                       standing=standing))
                if len(memories) >= wanted:
                    break
        return assemble(agent, self._sandbox.id, budget_tokens, orientation=orientation,
                        clipboard=ClipboardView(agent=agent, items=tuple(self._clipboard(agent, events))),
                        situation=situation, hot=hot, memories=memories)


def _clears_floor(hit: Hit, floor: float) -> bool:
    """Found by the message's words (a full-text match), or at least ``floor`` similar in meaning:
    a neighbour that rode in on conversation context alone stays out of the block."""
    return floor <= 0.0 or "fts" in hit.parts or hit.parts.get("dense", 0.0) >= floor
