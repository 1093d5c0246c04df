"""What the MCP tools do, as plain functions over the library (no MCP types here).

Each tool acts for one account (the stdio server's, or the HTTP request's key's) and, for the
session tools, on one sandbox: the one named, else the one the agent created or named last
(``soulpass.mcp.sessions``), else the newest live sandbox named ``mcp`` (opened on first use).
Results are JSON-ready dicts.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal

from soulpass.agent import AgentMemory
from soulpass.agent.types import ClipboardView
from soulpass.consolidation.clipboard import read_clipboard_items
from soulpass.consolidation.log_summary import added_counts, refused_counts
from soulpass.engine import AlreadyArchived, ArchiveResult, AwaitingReview, Committed, Sandbox, Unchanged
from soulpass.engine.listing import record_page
from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import check_name
from soulpass.importers import import_text
from soulpass.index.relevance import relevance
from soulpass.mcp.sessions import AutoArchive, SessionKeeper
from soulpass.passport import export_account
from soulpass.pool import AccountPool
from soulpass.server.keyring import key_store

__all__ = ["SESSION_NAME", "MemoryTools", "import_memories"]

SESSION_NAME = "mcp"
RememberWhat = Literal["turn", "fact", "journal"]
ClipboardAction = Literal["add", "remove", "clear", "show"]


class MemoryTools:
    def __init__(self, pool: AccountPool, policy: AutoArchive | None = None) -> None:
        self.pool = pool
        self.sessions = SessionKeeper(pool, policy)
        self._opening = threading.Lock()

    # --- sessions ----------------------------------------------------------------------------

    def _session(self, account: str, sandbox_id: str | None, *, create: bool = True) -> Sandbox:
        acct = self.pool.get(account)
        self.sessions.archive_idle()  # also without the timer thread (a server in a test, a client)
        if sandbox_id:
            sb = acct.sandbox(sandbox_id)
            self.sessions.use(account, sb.id)  # writes go where the agent said, from now on too
            return sb
        with self._opening:  # two first calls at once open one session, not two
            current = self.sessions.current(account)
            if current is not None and any(i.sandbox_id == current for i in acct.sandboxes()):
                return acct.sandbox(current)
            live = sorted((i for i in acct.sandboxes() if i.name == SESSION_NAME), key=lambda i: i.created_at)
            if live:
                sb = acct.sandbox(live[-1].sandbox_id)
            elif not create:
                raise NotFound(f"account {acct.name!r} has no open MCP session; name a sandbox_id", account=acct.name)
            else:
                sb = acct.create_sandbox(SESSION_NAME)
            self.sessions.use(account, sb.id)
            return sb

    def _wrote(self, account: str, sb: Sandbox, out: dict[str, Any]) -> dict[str, Any]:
        """``out``, with the archive's summary when this write made the session due (every N writes)."""
        archived = self.sessions.wrote(account, sb.id)
        return out if archived is None else {**out, "auto_archived": archived}

    def _agent_memory(self, sandbox: Sandbox) -> AgentMemory:
        return AgentMemory(sandbox)

    def create_sandbox(self, account: str, name: str = SESSION_NAME) -> dict[str, Any]:
        sb = self.pool.get(account).create_sandbox(name)
        self.sessions.use(account, sb.id)
        return {"sandbox_id": sb.id, "name": sb.info.name, "parent_version": sb.info.parent_version}

    def archive_session(self, account: str, sandbox_id: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        acct = self.pool.get(account)
        sid = self._session(account, sandbox_id, create=False).id
        result = acct.archive(sid, dry_run=dry_run)  # an MCP client is an agent: it never approves
        if not dry_run:
            self.sessions.done(account, sid)
        return _archived(sid, result)

    def approve_archive(self, account: str, sandbox_id: str, exclude: list[str] | None = None,
                        reason: str | None = None, *, by: str | None = None) -> dict[str, Any]:
        """Archive as the owner (``Account.approve``): what the review policy holds is committed too,
        except ``exclude`` (item ids of ``preview_archive``), which the version entry names with
        ``by`` and ``reason`` and the kept sandbox's history keeps readable."""
        result = self.pool.get(account).approve(sandbox_id, exclude=exclude or (), by=by, reason=reason)
        self.sessions.done(account, sandbox_id)
        out = _archived(sandbox_id, result)
        if isinstance(result, Committed) and result.plan.keeps_sandbox:
            out["excluded"] = sorted(result.plan.exclusion.items)
        return out

    def preview_archive(self, account: str, sandbox_id: str | None = None) -> dict[str, Any]:
        sid = self._session(account, sandbox_id, create=False).id
        return self.pool.get(account).preview(sid).model_dump(mode="json")

    def discard_session(self, account: str, sandbox_id: str | None = None) -> dict[str, Any]:
        sid = self._session(account, sandbox_id, create=False).id
        self.pool.get(account).discard(sid)
        self.sessions.done(account, sid)
        return {"sandbox_id": sid, "status": "discarded"}

    # --- writing -----------------------------------------------------------------------------

    def remember(self, account: str, what: RememberWhat, text: str | None = None, *, agent: str | None = None,
                 speaker: str = "user", subject: str | None = None, predicate: str | None = None,
                 object: str | None = None, confidence: float = 0.9, title: str | None = None,
                 tags: list[str] | None = None, sandbox_id: str | None = None) -> dict[str, Any]:
        """A turn, a fact or a journal entry written to the session. A user's turn is filed under
        the agent it was said to only when ``agent`` names one; an agent's turn defaults ``agent``
        to its ``speaker``."""
        if what not in ("turn", "fact", "journal"):
            raise InvalidInput(f"what must be turn, fact or journal, not {what!r}", field="what")
        sb = self._session(account, sandbox_id)
        tags = list(tags or ())
        if what == "turn":  # a working-log entry: get_context shows it in the hot log
            words = _need(text, "text")
            with self.pool.indexed(account):
                if speaker == "user" and agent is None:
                    rid = sb.add_turn("user", words)
                else:
                    said_by = agent or speaker
                    rid = self._agent_memory(sb).log(said_by, words,
                                                     speaker=None if speaker == said_by else speaker).id
        elif what == "fact":
            spo = (subject, predicate, object)
            if any(spo) and not all(spo):
                missing = next(n for n, v in zip(("subject", "predicate", "object"), spo, strict=True) if not v)
                raise InvalidInput(f"a fact needs all of subject, predicate and object, or none (then text): "
                                   f"{missing} is missing", field=missing)
            if not all(spo) and (text is None or not text.strip()):
                raise InvalidInput("a fact needs text, or subject, predicate and object", field="text")
            rid = sb.add_fact(*spo, confidence=confidence, content=None if all(spo) else text)
            if (warning := sb.fact_warning(confidence)) is not None:
                return self._wrote(account, sb, {"id": rid, "what": what, "sandbox_id": sb.id, "warning": warning})
        else:
            rid = sb.add_journal(_need(text, "text"), title=title or "", tags=tags, agent=agent)
        return self._wrote(account, sb, {"id": rid, "what": what, "sandbox_id": sb.id})

    # --- reading -----------------------------------------------------------------------------

    def rag_search(self, account: str, query: str, agent: str = "agent", k: int = 5,
                   sandbox_id: str | None = None) -> dict[str, Any]:
        """Episodes about ``query`` in full (also delivered to the agent's inbox), and the best
        records of every kind (turns, facts, journal entries, sensory) the session sees."""
        with self.pool.indexed(account):
            sb = self._session(account, sandbox_id)
            result = self._agent_memory(sb).rag_search(agent, query, k)
            hits = sb.search(query, k)
        return {"query": result.query, "episode_ids": list(result.episode_ids), "markdown": result.markdown,
                "hits": [{"id": h.id, "kind": h.kind, "version": h.version, "text": h.text,
                          "relevance": relevance(query, h), "score": round(h.score, 4)} for h in hits],
                "sandbox_id": sb.id}

    def manage_clipboard(self, account: str, action: ClipboardAction, agent: str = "agent",
                         item: str | None = None, sandbox_id: str | None = None) -> dict[str, Any]:
        if action == "show" and sandbox_id is None:  # reading opens no session: committed items when none is open
            try:
                self._session(account, None, create=False)
            except NotFound:
                view = ClipboardView(agent=check_name(agent, "agent"),
                                     items=tuple(read_clipboard_items(self.pool.get(account).store, agent)))
                return {**view.to_dict(), "markdown": view.markdown(), "sandbox_id": None}
        with self.pool.indexed(account):
            sb = self._session(account, sandbox_id)
            out = self._clipboard(self._agent_memory(sb), action, agent, item)
        return out if action == "show" else self._wrote(account, sb, out)

    def _clipboard(self, mem: AgentMemory, action: ClipboardAction, agent: str, item: str | None) -> dict[str, Any]:
        if action == "add":
            view = mem.clipboard_add(agent, _need(item, "item"))
        elif action == "remove":
            target = _need(item, "item")
            view = mem.clipboard_remove(agent, int(target) if target.isdigit() else target)
        elif action == "clear":
            view = mem.clipboard_clear(agent)
        elif action == "show":
            view = mem.clipboard_show(agent)
        else:
            raise InvalidInput(f"action must be add, remove, clear or show, not {action!r}", field="action")
        return {**view.to_dict(), "markdown": view.markdown(), "sandbox_id": mem.sandbox.id}

    def get_context(self, account: str, message: str, agent: str = "agent", budget_tokens: int = 2000,
                    sandbox_id: str | None = None) -> dict[str, Any]:
        with self.pool.indexed(account):
            mem = self._agent_memory(self._session(account, sandbox_id))
            block = mem.context(agent, message, budget_tokens)
        out: dict[str, Any] = block.to_dict()
        return out

    def memory_log(self, account: str, limit: int = 20) -> list[dict[str, Any]]:
        """The newest ``limit`` versions, newest first, each summarised: ``added`` and ``refused``
        count what that version added and refused; ``counts`` are the account's totals at it."""
        if limit < 1:
            raise InvalidInput("limit must be at least 1", field="limit")
        out = []
        for logged in reversed(self.pool.get(account).log()[-limit:]):
            entry = logged.to_json()
            line = {k: entry.get(k) for k in ("version", "kind", "timestamp", "source_sandbox", "sandbox_name",
                                              "rebased") if k in entry}
            out.append(line | {"added": added_counts(entry), "refused": refused_counts(entry),
                               "counts": entry.get("counts", {})})
        return out

    # --- one memory, lists, versions (issue 16) ---------------------------------------------

    def get_memory(self, account: str, ref: str, at: int | None = None) -> dict[str, Any]:
        """A record by id, or a document (``core``, ``profile``, ``gks``, ``state:<name>``), as of ``at``."""
        return self.pool.get(account).show(ref, at).model_dump(mode="json")

    def list_memories(self, account: str, kind: str, limit: int = 20, offset: int = 0,
                      at: int | None = None) -> dict[str, Any]:
        """Records of one kind, newest first, a page at a time (``next_offset``: None on the last)."""
        return record_page(self.pool.get(account), kind, limit, offset, at)

    def search_memory(self, account: str, query: str, k: int = 10, *, kinds: list[str] | None = None,
                      agent: str | None = None, tags: list[str] | None = None, since: datetime | None = None,
                      until: datetime | None = None, session_id: str | None = None, source: str | None = None,
                      at: int | None = None, min_score: float | None = None) -> dict[str, Any]:
        """Search with filters: committed memory as of ``at``; without ``at``, also the agent's
        open session when there is one (what it remembered is found at once). Writes nothing."""
        filters: dict[str, Any] = {"kinds": kinds or (), "agent": agent, "tags": tags or (), "since": since,
                                   "until": until, "session_id": session_id, "source": source,
                                   "min_score": min_score}
        with self.pool.indexed(account) as acct:
            sb = None
            if at is None:
                with contextlib.suppress(NotFound):
                    sb = self._session(account, None, create=False)
            found = sb.search(query, k, **filters) if sb is not None else acct.search(query, k, at=at, **filters)
        return {"query": query, "at": at, "sandbox_id": sb.id if sb is not None else None,
                "hits": [{"id": h.id, "kind": h.kind, "version": h.version, "text": h.text,
                          "relevance": relevance(query, h), "score": round(h.score, 4)} for h in found],
                "incomplete": bool(getattr(found, "incomplete", False))}

    def memory_diff(self, account: str, a: int, b: int) -> dict[str, Any]:
        return self.pool.get(account).diff(a, b).to_json()

    def rollback(self, account: str, version: int) -> dict[str, Any]:
        """A new version whose content equals ``version``'s (nothing in between is lost: it stays in history)."""
        acct = self.pool.get(account)
        return {"version": acct.rollback(version), "rolled_back_to": version}

    def add_journal_entry(self, account: str, text: str, *, title: str = "", tags: list[str] | None = None,
                          type: str = "journal", agent: str | None = None) -> dict[str, Any]:
        """A journal entry committed at once, as its own version (``remember`` journal waits for the session)."""
        return self.pool.get(account).journal().add(text, type=type, title=title, tags=tags or (), agent=agent)

    def read_identity(self, account: str, at: int | None = None) -> dict[str, Any]:
        acct = self.pool.get(account)
        return {"version": acct.check_version(at), "core": acct.show("core", at).model_dump(mode="json"),
                "profile": acct.show("profile", at).model_dump(mode="json")}

    def propose_core(self, account: str, section: str, value: Any, *, confidence: float, reason: str,
                     key: str | None = None, sandbox_id: str | None = None) -> dict[str, Any]:
        sb = self._session(account, sandbox_id)
        sb.propose_core(section, value, confidence=confidence, reason=reason, key=key)
        return self._wrote(account, sb, {"sandbox_id": sb.id, "proposed": {"section": section, "key": key}})

    def update_profile(self, account: str, data: dict[str, Any], sandbox_id: str | None = None) -> dict[str, Any]:
        sb = self._session(account, sandbox_id)
        sb.update_profile(data)
        return self._wrote(account, sb, {"sandbox_id": sb.id, "updated": sorted(data)})

    # --- editing and forgetting (issue 15) ---------------------------------------------------

    def edit_memory(self, account: str, record_id: str, fields: dict[str, Any], reason: str = "") -> dict[str, Any]:
        """A new version in which the record carries ``fields``; ``now`` is the id to read (a new fact's)."""
        acct = self.pool.get(account)
        version = acct.edit(record_id, reason=reason, by="mcp", **fields)
        now = next(e.edited_as or record_id for e in reversed(acct.log()) if e.version == version)
        return {"version": version, "record": record_id, "now": now}

    def memory_history(self, account: str, record_id: str) -> list[dict[str, Any]]:
        return [step.to_json() for step in self.pool.get(account).history(record_id)]

    def forget_memory(self, account: str, reason: str, ids: list[str] | None = None, subject: str | None = None,
                      query: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        with self.pool.indexed(account) as acct:
            result = acct.forget(ids or (), subject=subject, query=query, reason=reason, by="mcp", dry_run=dry_run)
        return result.to_json()

    def delete_account(self, account: str, confirm: str) -> dict[str, Any]:
        """Erase the whole account and its API keys (``Soulpass.delete_account``); its sessions end."""
        done = self.pool.delete(account, confirm=confirm, by="mcp", keys=key_store(self.pool.engine))
        self.sessions.drop_account(account)
        return done.to_json()

    # --- the passport (issue 15, exp) ---------------------------------------------------------

    def export_account(self, account: str, history: bool = False, vectors: bool = False) -> dict[str, Any]:
        """Write the account as a passport file under ``<home>/exports/`` and say where, with its digests."""
        folder = self.pool.engine.home / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        head = self.pool.get(account).head()
        res = export_account(self.pool.engine, account, folder / f"{account}-v{head}.soulpass", history=history,
                             vectors=vectors)
        return asdict(res)


def _archived(sid: str, result: ArchiveResult) -> dict[str, Any]:
    """An archive's outcome as the session tools say it."""
    if isinstance(result, AlreadyArchived):
        return {"sandbox_id": sid, "status": "already_archived", "version": result.version}
    if isinstance(result, AwaitingReview):
        return {"sandbox_id": sid, "status": "awaiting_review", "version": result.version,
                "needs_review": [i.model_dump(mode="json", include={"id", "kind", "action", "text", "review"})
                                 for i in result.items]}
    summary = result.plan.summary()
    if isinstance(result, Unchanged):  # nothing to store: no version, HEAD stays
        return {"sandbox_id": sid, "status": "unchanged", "version": result.version,
                "duplicates": summary["duplicates"], "rejected": summary["rejected"]}
    out = {"sandbox_id": sid, "status": "committed" if isinstance(result, Committed) else "planned",
           "version": summary["version"], "added": summary["added"], "rejected": summary["rejected"],
           "conflicts": summary["conflicts"]}
    if isinstance(result, Committed) and result.warning is not None:  # durable; recovery finishes the rest
        out["warning"] = result.warning
    return out


def _need(value: str | None, field: str) -> str:
    if value is None or not value.strip():
        raise InvalidInput(f"{field} is required for this action", field=field)
    return value


# --- importers (issue 15) ---------------------------------------------------------------------


def import_memories(tools: MemoryTools, account: str, source: str, content: str,
                    dry_run: bool = False) -> dict[str, Any]:
    """Another tool's export, sent as text, imported into ``account`` (see docs/importers.md)."""
    return import_text(tools.pool.get(account), source, content, dry_run=dry_run).to_json()
