"""The working log (tier 1): turn events of a sandbox's session buffer seen as log entries.

Pure functions over buffer events plus the one append path; the facade (``AgentMemory``) adds
time, locking and the scribe.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from soulpass.agent.types import EntryKind, LogEntry
from soulpass.errors import InvalidInput
from soulpass.ids import check_name, new_temp_id
from soulpass.records import BufferEvent, Episode, Record, TurnLLM, TurnUser
from soulpass.sessions.buffer import SessionBufferFile

__all__ = [
    "OUTCOME_TAG",
    "BufferTail",
    "SCRIBE_TAG",
    "agent_lock",
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


def append_records(buffer: SessionBufferFile, items: Iterable[tuple[str, BaseModel, str | None]],
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


@contextlib.contextmanager
def agent_lock(folder: Path) -> Iterator[None]:
    """The sandbox's agent lock: one scribe or wake at a time across processes (never held by appends)."""
    fd = os.open(folder / ".agent.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class BufferTail:
    """The events of one append-only buffer, parsed incrementally: each read parses only the lines
    appended since the last one (whole lines only; unparsable lines are skipped, as the buffer does)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.parsed: list[BufferEvent] = []

    def events(self) -> list[BufferEvent]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            st = os.fstat(fd)
            if st.st_ino != self.inode or st.st_size < self.offset:  # another file: start over
                self.inode, self.offset, self.parsed = st.st_ino, 0, []
            data = os.pread(fd, st.st_size - self.offset, self.offset) if st.st_size > self.offset else b""
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        if end == -1:
            return list(self.parsed)
        for raw in data[:end].split(b"\n"):
            if raw.strip():
                with contextlib.suppress(ValueError, ValidationError):
                    self.parsed.append(BufferEvent.model_validate(json.loads(raw)))
        self.offset += end + 1
        return list(self.parsed)
