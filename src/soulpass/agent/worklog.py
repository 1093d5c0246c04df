"""The working log (tier 1): turn events of a sandbox's session buffer seen as log entries.

Pure functions over buffer events plus the one append path; the facade (``AgentMemory``) adds
time, locking (the sandbox's ``"agent"`` section) and the scribe.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from soulpass.agent.types import EntryKind, LogEntry
from soulpass.errors import InvalidInput
from soulpass.ids import check_name, new_temp_id
from soulpass.records import BufferEvent, Episode, Record, TurnLLM, TurnUser
from soulpass.sessions.buffer import SandboxBuffer

__all__ = [
    "OUTCOME_TAG",
    "SCRIBE_TAG",
    "append_records",
    "entry_from_record",
    "log_entries",
    "make_turn",
    "scribed_ids",
    "unscribed",
]

OUTCOME_TAG = "outcome"
SCRIBE_TAG = "scribe"
_DERIVED = frozenset({"id", "semantic_hash", "episode_id", "created_at", "kind", "type", "content_sha256", "text"})


def make_turn(agent: str, text: str, kind: EntryKind, speaker: str | None, at: datetime,
              fields: dict[str, Any]) -> TurnUser | TurnLLM:
    """The turn a log entry is stored as (validated; ``InvalidInput`` names what was wrong)."""
    check_name(agent, "agent")
    if kind not in ("intent", "outcome"):
        raise InvalidInput(f"log entry kind must be 'intent' or 'outcome', not {kind!r}", field="kind")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("log entry text is empty", field="text")
    reserved = sorted(set(fields) & {"id", "kind", "agent", "created_at", "text", "text_excerpt", "version",
                                     "session_id", "semantic_hash", "schema_version"})
    if reserved:
        raise InvalidInput(f"log entry fields {', '.join(reserved)} are set by the log itself", field=reserved[0])
    tags = tuple(fields.pop("tags", ()))
    if kind == "outcome" and OUTCOME_TAG not in tags:
        tags = (*tags, OUTCOME_TAG)
    data: dict[str, Any] = {"text_excerpt": text, "agent": agent, "created_at": at, "tags": tags, **fields}
    try:
        if speaker == "user":
            if kind == "outcome":
                raise InvalidInput("an outcome is written by an agent, not by the user", field="speaker")
            return TurnUser.model_validate({"id": new_temp_id("turn_user"), **data})
        if speaker is not None and speaker != agent:
            raise InvalidInput(f"speaker must be 'user' or the agent itself ({agent!r}), not {speaker!r}",
                               field="speaker")
        return TurnLLM.model_validate({"id": new_temp_id("turn_llm"), **data})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        raise InvalidInput(f"log entry rejected: {loc}: {err['msg']}", field=loc) from exc


def append_records(buffer: SandboxBuffer, items: Iterable[tuple[str, BaseModel, str | None]],
                   at: datetime) -> list[BufferEvent]:
    """Append ``(event type, model, agent)`` items all-or-nothing with event time ``at``."""
    batch = []
    for type_, model, agent in items:
        data = model.model_dump(mode="json")
        skip = _DERIVED if isinstance(model, Record) and model.text == model.core_text() else _DERIVED - {"text"}
        batch.append((type_, data, agent, skip))
    return buffer.append_many(batch, at)


def entry_from_record(rec: Record, event_id: str = "", agent: str | None = None) -> LogEntry | None:
    if not isinstance(rec, TurnUser | TurnLLM):
        return None
    writer = agent or rec.agent or "user"
    return LogEntry(id=rec.id, event_id=event_id, at=rec.created_at, agent=writer,
                    kind="outcome" if OUTCOME_TAG in rec.tags else "intent",
                    speaker="user" if isinstance(rec, TurnUser) else (rec.agent or writer), text=rec.text_excerpt)


def log_entries(events: Iterable[BufferEvent]) -> list[LogEntry]:
    """Every turn event as a log entry, in append order."""
    out = []
    for ev in events:
        if ev.type != "turn":
            continue
        data = ev.data
        speaker = "user" if data.get("kind") == "turn_user" else str(data.get("agent") or ev.agent or "agent")
        out.append(LogEntry(id=str(data["id"]), event_id=ev.event_id, at=ev.at,
                            agent=ev.agent or str(data.get("agent") or "user"),
                            kind="outcome" if OUTCOME_TAG in data.get("tags", ()) else "intent",
                            speaker=speaker, text=str(data.get("text_excerpt", ""))))
    return out


def scribed_ids(events: Iterable[BufferEvent]) -> set[str]:
    """Ids of the entries a scribe episode covers (its ``turn_refs``)."""
    out: set[str] = set()
    for ev in events:
        if ev.type == "episode" and SCRIBE_TAG in ev.data.get("tags", ()):
            out.update(ev.data.get("turn_refs", ()))
    return out


def unscribed(entries: list[LogEntry], events: list[BufferEvent]) -> list[LogEntry]:
    done = scribed_ids(events)
    return [e for e in entries if e.id not in done]


def scribe_episodes(events: Iterable[BufferEvent]) -> list[Episode]:
    return [Episode.model_validate(ev.data) for ev in events
            if ev.type == "episode" and SCRIBE_TAG in ev.data.get("tags", ())]
