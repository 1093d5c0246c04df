"""Value types of the agent tiers: what the working log, clipboard, scribe, inbox and context return."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

__all__ = [
    "AgentConfig",
    "Clock",
    "ClipboardView",
    "ContextBlock",
    "ContextSection",
    "InboxMessage",
    "IngestResult",
    "LogEntry",
    "Orientation",
    "RagResult",
    "ScribeResult",
]

Clock = Callable[[], datetime]
EntryKind = Literal["intent", "outcome"]



def format_duration(delta: timedelta) -> str:
    """``8 hours``, ``1 hour 30 minutes``, ``2 days 3 hours``, ``45 minutes``."""
    minutes = int(delta.total_seconds() // 60)
    days, rem = divmod(minutes, 24 * 60)
    hours, mins = divmod(rem, 60)
    parts = []
    for n, unit in ((days, "day"), (hours, "hour"), (mins, "minute")):
        if n:
            parts.append(f"{n} {unit}{'s' if n != 1 else ''}")
    if days:
        parts = parts[:2]
    return " ".join(parts) or "less than a minute"


@dataclass(frozen=True)
class AgentConfig:
    """Knobs of the agent tiers (seed 004 defaults)."""

    hot_window: int = 20  # awake: the last N log entries are hot
    sleep_after: timedelta = timedelta(hours=1)  # a gap longer than this is deep sleep
    keep_after_sleep: int = 3  # deep sleep keeps only the last N entries hot, the rest is scribed
    log_limit: int = 200  # more unscribed entries than this: the oldest go to the scribe
    archive_on_sleep: bool = False  # deep sleep also archives and continues in a fresh sandbox
    memories_k: int = 5  # retrieved memories per context
    # A retrieved memory enters the context when it holds a word of the message (a full-text match)
    # or is at least this similar in meaning (cosine). The shipped all-MiniLM-L6-v2 puts sentences
    # on unrelated topics near 0 (about -0.1 to 0.15) and paraphrases that share no word above 0.2;
    # 0 keeps every hit the search returns.
    memory_floor: float = 0.2
    rag_k: int = 3  # episodes rag_search delivers
    chunk_chars: int = 1200  # ingest: chunk size for the index (characters)
    chunk_overlap: int = 200
    digest_items: int = 8  # social digest: at most this many lines per other agent

    def __post_init__(self) -> None:
        for name in ("hot_window", "keep_after_sleep", "log_limit", "memories_k", "rag_k", "chunk_chars",
                     "digest_items"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"AgentConfig.{name} must be >= 1")
        if not 0.0 <= self.memory_floor <= 1.0:
            raise ValueError("AgentConfig.memory_floor must be from 0 to 1")
        if self.sleep_after <= timedelta(0):
            raise ValueError("AgentConfig.sleep_after must be positive")
        if not 0 <= self.chunk_overlap < self.chunk_chars:
            raise ValueError("AgentConfig.chunk_overlap must be >= 0 and < chunk_chars")


@dataclass(frozen=True)
class LogEntry:
    """One working-log entry: a turn in the sandbox's session buffer.

    ``kind`` is "intent" (something said or asked: a turn) or "outcome" (a tool or task result);
    ``agent`` is the agent that wrote it; ``speaker`` is "user" for what the user said, else the agent.
    ``id`` is the turn's id (temporary in a sandbox, permanent once carried over from the master).
    """

    id: str
    event_id: str
    at: datetime
    agent: str
    kind: EntryKind
    speaker: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "event_id": self.event_id, "at": self.at.isoformat(), "agent": self.agent,
                "kind": self.kind, "speaker": self.speaker, "text": self.text}


@dataclass(frozen=True)
class ClipboardView:
    """An agent's clipboard as this sandbox sees it (master at the parent version + buffered ops)."""

    agent: str
    items: tuple[str, ...]

    def markdown(self) -> str:
        """The ``[ACTIVE_CLIPBOARD]`` block injected into every context."""
        body = "\n".join(f"{i}. {item}" for i, item in enumerate(self.items, 1)) or "(empty)"
        return f"[ACTIVE_CLIPBOARD]\n{body}\n[/ACTIVE_CLIPBOARD]"

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "items": list(self.items)}


@dataclass(frozen=True)
class Orientation:
    """What an agent is told on waking from deep sleep."""

    agent: str
    slept_from: datetime
    slept_to: datetime
    digest: tuple[str, ...]  # one line per thing another agent did meanwhile
    scribed_episode: str | None  # the episode the pruned entries became
    sandbox_id: str  # where the agent continues (a fresh one when archive_on_sleep)
    now: datetime | None = None  # when the block is shown (default: the wake)

    @property
    def duration(self) -> timedelta:
        return self.slept_to - self.slept_from

    def text(self, digest: Iterable[str] | None = None) -> str:
        """The ``[ORIENTATION]`` block; ``digest`` replaces the stored digest lines when given."""
        lines = ["[ORIENTATION]",
                 f"You slept for {format_duration(self.duration)} (from {self.slept_from:%Y-%m-%d %H:%M} to "
                 f"{self.slept_to:%Y-%m-%d %H:%M} UTC). It is now {self.now or self.slept_to:%Y-%m-%d %H:%M} UTC."]
        items = list(self.digest if digest is None else digest)
        if items:
            lines.append("While you slept:")
            lines += [f"- {d}" for d in items]
        else:
            lines.append("While you slept, the other agents recorded nothing.")
        if self.scribed_episode:
            lines.append(f"Older log entries were summarised into episode {self.scribed_episode}.")
        lines.append("[/ORIENTATION]")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "slept_from": self.slept_from.isoformat(),
                "slept_to": self.slept_to.isoformat(), "duration_seconds": self.duration.total_seconds(),
                "digest": list(self.digest), "scribed_episode": self.scribed_episode,
                "sandbox_id": self.sandbox_id, "text": self.text()}


@dataclass(frozen=True)
class ScribeResult:
    """An episode the scribe wrote (into the buffer), which entries it covers and how it was made."""

    episode_id: str
    covered: tuple[str, ...]  # turn ids (the episode's turn_refs)
    summariser: str  # "extractive" or "chat:<model>"
    fallback: str | None  # why the model's output was not used, when it was not
    narrative: str  # the Markdown summary (also the episode's text)


@dataclass(frozen=True)
class IngestResult:
    raw_id: str  # the sensory record holding the document verbatim
    chunk_ids: tuple[str, ...]  # sensory records of the chunks the index finds
    episode_id: str  # the scribe's episode about the document
    source: str
    chars: int


@dataclass(frozen=True)
class InboxMessage:
    id: str
    at: datetime
    to_agent: str
    from_tool: str  # "rag_search"
    subject: str  # the query
    markdown: str
    refs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "at": self.at.isoformat(), "to_agent": self.to_agent, "from_tool": self.from_tool,
                "subject": self.subject, "markdown": self.markdown, "refs": list(self.refs)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InboxMessage:
        return cls(id=str(data["id"]), at=datetime.fromisoformat(data["at"]), to_agent=str(data["to_agent"]),
                   from_tool=str(data["from_tool"]), subject=str(data["subject"]),
                   markdown=str(data["markdown"]), refs=tuple(data.get("refs", ())))


@dataclass(frozen=True)
class RagResult:
    query: str
    episode_ids: tuple[str, ...]
    markdown: str
    message: InboxMessage  # what was delivered to the inbox


@dataclass(frozen=True)
class ContextSection:
    name: str  # orientation | clipboard | guidance | hot_log | memories
    text: str
    tokens: int
    truncated: bool = False
    dropped: int = 0  # items left out to fit the budget


@dataclass(frozen=True)
class ContextBlock:
    """The block an agent gets each turn, and how the budget was spent."""

    agent: str
    sandbox_id: str
    budget_tokens: int
    sections: tuple[ContextSection, ...]
    orientation: Orientation | None = None
    tokens: int = 0  # of the whole ``text``, by the counter the budget used
    over_budget: bool = False  # only what is never cut (clipboard, temporal grounding) exceeded it
    memory_ids: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections if s.text)

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "sandbox_id": self.sandbox_id, "budget_tokens": self.budget_tokens,
                "tokens": self.tokens, "over_budget": self.over_budget, "text": self.text,
                "sections": [{"name": s.name, "tokens": s.tokens, "truncated": s.truncated, "dropped": s.dropped}
                             for s in self.sections],
                "orientation": self.orientation.to_dict() if self.orientation else None,
                "memory_ids": list(self.memory_ids)}
