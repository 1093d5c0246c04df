"""A sandbox: a conversation's writable view of an account (the session buffer), and the one
sandbox search (the master as of the sandbox's parent version plus its own buffer)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soulpass.consolidation.outcomes import ArchiveResult
from soulpass.errors import NotFound
from soulpass.ids import check_name, new_temp_id, utc_now
from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.relevance import above
from soulpass.index.results import SearchResults, search_results
from soulpass.retrieval.plans import governed_search
from soulpass.sessions import sandbox as sandboxes
from soulpass.sessions.arguments import library_boundary
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store import keys as store_keys
from soulpass.store.contract import Hook

if TYPE_CHECKING:  # what only writes need loads when first used
    from pydantic import BaseModel

    from soulpass.consolidation.preview import ArchivePreview
    from soulpass.engine.account import Account
    from soulpass.records import BufferEvent, Episode, SessionBuffer, TurnLLM, TurnUser

__all__ = ["Sandbox"]


@library_boundary
class Sandbox:
    """A conversation's writable view: every write goes to the session buffer only. What it is given
    is validated into record models when written (pydantic loads then: a search never needs it)."""

    def __init__(self, account: Account, info: SandboxInfo) -> None:
        self.account, self.info = account, info
        self.id = info.sandbox_id
        self._buffer = info.buffer(account.sp.limits)

    def _append(self, *items: tuple[str, BaseModel]) -> None:
        """Append events all-or-nothing (a seed episode and its inline turns go in one write)."""
        from soulpass.records import Record
        from soulpass.sessions.inputs import dump
        batch = []
        for type_, model in items:
            # Fields Soulpass derived itself are not the caller's text: don't size-check them.
            derived = {"id", "semantic_hash", "episode_id", "created_at", "kind", "type", "content_sha256"}
            if isinstance(model, Record) and model.text == model.core_text():
                derived.add("text")
            skip = frozenset(derived)
            # Check the raw values first: JSON serialisation would quietly coerce some of them.
            raw = model.model_dump()
            self.account.sp.limits.check(type_, raw, skip)
            batch.append((type_, dump(model), raw.get("agent"), skip))
        self._buffer.append_many(batch)

    def write_turn(self, turn: TurnUser | TurnLLM | dict[str, Any]) -> str:
        """Append a user or LLM turn; returns its temporary id."""
        from soulpass.sessions.inputs import turn_model
        model = turn_model(turn)
        self._append(("turn", model))
        return model.id

    def add_turn(self, speaker: str, text: str, **fields: Any) -> str:
        """``speaker`` "user" makes a ``TurnUser``, anything else a ``TurnLLM`` by that agent."""
        check_name(speaker, "speaker")
        if speaker == "user":
            return self.write_turn({"kind": "turn_user", "text_excerpt": text, **fields})
        return self.write_turn({"kind": "turn_llm", "text_excerpt": text, "agent": speaker, **fields})

    def write_episode(self, episode: Episode | dict[str, Any]) -> str:
        """Append an episode (an ``Episode``, a V3 dict or a seed dict with inline turns)."""
        from soulpass.sessions.inputs import episode_model
        ep, turns = episode_model(episode)
        self._append(*(("turn", t) for t in turns), ("episode", ep))
        return ep.id

    def write_many(self, episodes: Iterable[Episode | dict[str, Any]] = (),
                   states: dict[str, dict[str, Any]] | None = None) -> list[str]:
        """Episodes (with their inline turns) and state deltas in one all-or-nothing write."""
        from soulpass.records import StateDelta
        from soulpass.sessions.inputs import episode_model, validate
        items: list[tuple[str, BaseModel]] = []
        ids = []
        for episode in episodes:
            ep, turns = episode_model(episode)
            items += [("turn", t) for t in turns] + [("episode", ep)]
            ids.append(ep.id)
        for name, data in (states or {}).items():
            items.append(("state_delta", validate(StateDelta, {"name": name, "data": data})))
        self._append(*items)
        return ids

    def add_fact(self, subject: str | None = None, predicate: str | None = None, object: str | None = None,
                 *, confidence: float, content: str | None = None, source_refs: Iterable[str] = ()) -> str:
        from soulpass.records import SemanticCandidate
        from soulpass.sessions.inputs import string_list, validate
        cand = validate(SemanticCandidate, {
            "id": new_temp_id("fact"), "subject": subject, "predicate": predicate, "object": object,
            "confidence": confidence, "content": content, "source_refs": string_list(source_refs, "source_refs")})
        self._append(("semantic_candidate", cand))
        return str(cand.id)

    def fact_warning(self, confidence: float) -> str | None:
        """Why a fact this confident will be rejected at archive (None: it will not be for that)."""
        why = self.account.sp.rules.semantic.confidence_refusal(confidence)
        return None if why is None else f"this fact will be rejected at archive: {why}"

    def update_state(self, name: str, data: dict[str, Any]) -> None:
        from soulpass.records import StateDelta
        from soulpass.sessions.inputs import validate
        self._append(("state_delta", validate(StateDelta, {"name": name, "data": data})))

    def update_profile(self, data: dict[str, Any]) -> None:
        from soulpass.records import ProfileUpdate
        from soulpass.sessions.inputs import validate
        self._append(("profile_update", validate(ProfileUpdate, {"data": data})))

    def propose_core(self, section: str, value: Any, *, confidence: float, reason: str, key: str | None = None) -> None:
        from soulpass.records import CoreProposal
        from soulpass.sessions.inputs import validate
        self._append(("core_proposal", validate(CoreProposal, {
            "section": section, "key": key, "value": value, "confidence": confidence, "reason": reason})))

    def add_sensory(self, content: str, *, source: str | None = None, modality: str = "text",
                    media_type: str = "text/plain") -> str:
        from soulpass.records import SensoryRecord
        from soulpass.sessions.inputs import validate
        rec = validate(SensoryRecord, {"id": new_temp_id("sensory"), "content": content, "source": source,
                                        "modality": modality, "media_type": media_type})
        self._append(("sensory", rec))
        return str(rec.id)

    def add_journal(self, text: str, *, type: str = "journal", title: str = "", tags: Iterable[str] = (),
                    core_insight: str = "", brief_summary: str = "", timestamp: datetime | None = None,
                    agent: str | None = None) -> str:
        """Append a prose record (journal, experiment, reflection or conversation entry), stored
        verbatim as Markdown on archive; returns its temporary id."""
        from soulpass.prose import JournalEntry
        from soulpass.sessions.inputs import string_list, validate
        data: dict[str, Any] = {"id": new_temp_id("journal"), "text": text, "type": type, "title": title,
                                "tags": string_list(tags, "tags"), "core_insight": core_insight,
                                "brief_summary": brief_summary, "agent": agent}
        if timestamp is not None:
            data["created_at"] = timestamp
        entry = validate(JournalEntry, data)
        self._append(("journal", entry))
        return str(entry.id)

    def buffer(self) -> SessionBuffer:
        return sandboxes.session_buffer_view(self.info, self._buffer.events())

    def search(self, query: str, k: int = 10, *, kinds: Iterable[str] = (), agent: str | None = None,
               tags: Iterable[str] = (), since: datetime | None = None, until: datetime | None = None,
               session_id: str | None = None, persona_id: str | None = None,
               event_id: str | None = None, source: str | None = None, min_score: float | None = None,
               ) -> SearchResults:
        """Hybrid search over what this sandbox sees: the master as of its parent version plus its
        own buffer (turns, episodes, sensory records, proposed facts; their ids are temporary). A
        committed fact this session's facts supersede ranks below the fact superseding it."""
        filters = Filters(kinds=tuple(kinds), agent=agent, tags=tuple(tags), since=since, until=until,
                          session_id=session_id, persona_id=persona_id, event_id=event_id, source=source)
        from soulpass.index.catalog.make_rows import buffer_event_row
        events = self._buffer.events()
        path = store_keys.buffer_key(self.id)
        rows = [row for event in events if (row := buffer_event_row(event, path, self.id))]
        return self.search_buffered(query, k, filters, events, rows, min_score=min_score)

    def search_buffered(self, query: str, k: int, filters: Filters, events: Sequence[BufferEvent],
                        rows: Sequence[CatalogRow], *, min_score: float | None = None) -> SearchResults:
        """``search`` over the buffer as the caller read it: ``events`` (this sandbox's, in order)
        and ``rows``, their catalog rows. The one sandbox search, ``search``'s and the agent
        tiers' (which keep both between turns: agent/recall.py); ``filters.as_of_version`` is set
        here, to the sandbox's parent version."""
        acct = self.account
        at = self.info.parent_version
        filters = replace(filters, as_of_version=None if at == acct.store.head() else at)
        with acct.exclusive():
            index = acct.index()
            found = search_results(index, governed_search(index, query, k, filters, extra=rows))
        from soulpass.consolidation.session_view import demote_superseded, holds_committed_fact, superseded_in_session
        if holds_committed_fact(found):  # what the session supersedes must not outrank what supersedes it
            superseded = superseded_in_session(acct.store.snapshot(), self.info, events, acct.sp.rules, utc_now())
            found = SearchResults(demote_superseded(found, superseded), found.pending_embeddings,
                                  found.dense_error)  # still says why it is full text only
        return above(found, query, min_score)

    def archive(self, *, dry_run: bool = False, exclude: Iterable[str] = (), by: str | None = None,
                reason: str | None = None, may_approve: bool = False, hook: Hook | None = None) -> ArchiveResult:
        return self.account.archive(self.id, dry_run=dry_run, exclude=exclude, by=by, reason=reason,
                                    may_approve=may_approve, hook=hook)

    def preview(self, *, exclude: Iterable[str] = ()) -> ArchivePreview:
        return self.account.preview(self.id, exclude=exclude)

    def discard(self) -> None:
        self.account.discard(self.id)

    @property
    def archived(self) -> bool:
        """Archived (the commit marked it) or gone (archived, then removed; or discarded)."""
        try:
            return self.info.current().archived_as is not None
        except NotFound:
            return True
