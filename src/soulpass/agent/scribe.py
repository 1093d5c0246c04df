"""The scribe (tier 2): log entries or a document become an Episode plus a narrative Markdown summary.

A :class:`Summariser` turns a :class:`SummaryRequest` into an :class:`EpisodeDraft`. Two ship:
:class:`ExtractiveSummariser` (no model, deterministic) and
:class:`soulpass.agent.chat.ChatSummariser` (an OpenAI-compatible chat endpoint). A model's output
is validated against ``EpisodeDraft``; when it fails or is invalid, :func:`draft_episode` falls
back to the extractive summariser and logs why.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from soulpass.agent.types import LogEntry
from soulpass.records import SituationContext, StructuredSummary
from soulpass.sentences import sentences

__all__ = [
    "EpisodeDraft",
    "ExtractiveSummariser",
    "SummaryFailed",
    "SummaryRequest",
    "Summariser",
    "draft_episode",
]

log = logging.getLogger("soulpass.scribe")

MAX_LINE = 300  # characters of one log entry quoted in a narrative
MAX_LINES = 200  # log entries quoted in one narrative
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]{2,}")
_STOP = frozenset("""the and for that this with from have has had was were are you your our not but all any can
will would should could into about there their them they then than what when where which who why how its
just also more most some such only over very been being does did doing done each few here let may might
must nor off once other own same she he him her his out per too under until upon while yes yet""".split())  # noqa: SIM905
_NEXT = re.compile(r"\b(next|todo|to do|will|should|must|need|needs|plan|tomorrow|later|follow[- ]up)\b", re.I)


class EpisodeDraft(BaseModel):
    """What a summariser must produce (the schema a model's JSON is validated against)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(min_length=1, max_length=200)
    situation_context: SituationContext = SituationContext()
    summary: StructuredSummary
    narrative: str = Field(min_length=1, max_length=20_000)


@dataclass(frozen=True)
class SummaryRequest:
    """Either log ``entries`` or a ``document`` (ingest) to summarise."""

    reason: str  # "limit" | "deep_sleep" | "manual" | "ingest"
    entries: tuple[LogEntry, ...] = ()
    document: str | None = None
    source: str | None = None
    situation: SituationContext | None = None


class SummaryFailed(Exception):
    """A summariser could not produce a valid draft (the scribe falls back and logs this)."""


@runtime_checkable
class Summariser(Protocol):
    name: str

    def summarise(self, request: SummaryRequest) -> EpisodeDraft:
        """A valid draft, or raise :class:`SummaryFailed`."""
        ...


def _clip(text: str, limit: int = MAX_LINE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_sentence(text: str, limit: int = 200) -> str:
    for part in sentences(text.strip(), lines=True):
        return _clip(part, limit)
    return ""


def keywords(text: str, n: int = 6) -> list[str]:
    """The most frequent content words, ties broken alphabetically (deterministic)."""
    counts = Counter(w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP)
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


class ExtractiveSummariser:
    """Picks sentences from the input itself: no model, same input -> same draft."""

    name = "extractive"

    def summarise(self, request: SummaryRequest) -> EpisodeDraft:
        if request.document is not None:
            return self._document(request)
        return self._entries(request)

    def _entries(self, request: SummaryRequest) -> EpisodeDraft:
        entries = request.entries
        if not entries:
            raise SummaryFailed("nothing to summarise")
        agents = sorted({e.agent for e in entries})
        intents = [e for e in entries if e.kind == "intent"]
        outcomes = [e for e in entries if e.kind == "outcome"]
        first = intents[0] if intents else entries[0]
        last = outcomes[-1] if outcomes else entries[-1]
        action = f"{', '.join(agents)}: {len(entries)} log entries, starting with \"{_first_sentence(first.text)}\""
        outcome = _first_sentence(last.text) or "(no outcome recorded)"
        nxt = next((e for e in reversed(entries) if _NEXT.search(e.text)), None)
        implication = (f"Follow up: {_first_sentence(nxt.text)}" if nxt is not None
                       else f"Continue from: {_first_sentence(entries[-1].text)}")
        words = keywords(" ".join(e.text for e in entries), 4)
        title = f"{', '.join(agents)}: " + (", ".join(words) if words else _first_sentence(first.text, 80))
        mode = "chat" if any(e.speaker == "user" for e in entries) else "task"
        situation = request.situation or SituationContext(interaction_mode=mode)
        lines = [f"## {_clip(title, 200)}", "",
                 f"*{entries[0].at:%Y-%m-%d %H:%M} to {entries[-1].at:%Y-%m-%d %H:%M} UTC · "
                 f"agents: {', '.join(agents)} · {len(intents)} intents, {len(outcomes)} outcomes*", "",
                 f"- **Action taken:** {action}", f"- **Key outcome:** {outcome}",
                 f"- **Future implication:** {implication}", "", "### Log"]
        for e in entries[:MAX_LINES]:
            lines.append(f"- {e.at:%H:%M} {e.agent} ({e.kind}, {e.speaker}): {_clip(e.text)}")
        if len(entries) > MAX_LINES:
            lines.append(f"- … {len(entries) - MAX_LINES} more entries")
        return EpisodeDraft(title=_clip(title, 200), situation_context=situation,
                            summary=StructuredSummary(action_taken=_clip(action), key_outcome=outcome,
                                                      future_implication=_clip(implication)),
                            narrative="\n".join(lines)[:20_000])

    def _document(self, request: SummaryRequest) -> EpisodeDraft:
        doc = request.document or ""
        if not doc.strip():
            raise SummaryFailed("the document is empty")
        source = request.source or "text"
        heading = next((ln.strip("# ").strip() for ln in doc.splitlines() if ln.strip()), source)
        title = _clip(heading, 120)
        found = [s for s in sentences(doc, lines=True) if len(s) > 20]
        top = set(keywords(doc, 12))
        scored = sorted(range(len(found)),
                        key=lambda i: (-sum(1 for w in _WORD.findall(found[i].lower()) if w in top), i))
        picked = [found[i] for i in sorted(scored[:5])]
        lead = _first_sentence(" ".join(found[:2]) or doc, 300)
        situation = request.situation or SituationContext(interaction_mode="ingest")
        narrative = "\n".join([f"## {title}", "", f"*Ingested from {_clip(source, 200)} · {len(doc)} characters*",
                               "", *(f"- {_clip(s)}" for s in picked),
                               "", f"Keywords: {', '.join(keywords(doc, 8))}"])
        return EpisodeDraft(
            title=title, situation_context=situation,
            summary=StructuredSummary(action_taken=_clip(f"Read {source}: {title}"), key_outcome=lead,
                                      future_implication="The full text is kept in sensory memory; "
                                                         "search it when this topic comes up again"),
            narrative=narrative[:20_000])


def draft_episode(summariser: Summariser, request: SummaryRequest) -> tuple[EpisodeDraft, str, str | None]:
    """(draft, summariser name, fallback reason): a failing or invalid model falls back to extractive."""
    if isinstance(summariser, ExtractiveSummariser):
        return summariser.summarise(request), summariser.name, None
    try:
        draft = summariser.summarise(request)
        if not isinstance(draft, EpisodeDraft):
            raise SummaryFailed(f"{summariser.name} returned a {type(draft).__name__}, not an EpisodeDraft")
        return draft, summariser.name, None
    except SummaryFailed as exc:
        reason = str(exc)
    log.warning("summariser %s failed (%s); falling back to the extractive summariser", summariser.name, reason)
    fallback = ExtractiveSummariser()
    return fallback.summarise(request), fallback.name, reason
