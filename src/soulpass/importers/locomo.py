"""Conversations in the LoCoMo layout (LoCoMo itself, and BEAM converted to it) taken into an account.

The layout: a list of samples; a sample's ``conversation`` holds ``session_<n>_date_time``
("1:56 pm on 8 May, 2023") and ``session_<n>`` (turns with ``speaker``, ``dia_id``, ``text``, an
optional ``blip_caption``); its ``qa`` holds questions with ``evidence`` dialog ids and a ``category``.

:func:`ingest` makes each session a sandbox, archived in order; each turn a record with the
session's date as event time (30 s apart, so turns keep their order) and the tag ``dia:<dialog
id>``. Speakers: ``user`` writes a ``turn_user``, ``assistant`` a ``turn_llm`` by agent
``assistant`` (a user-assistant chat: BEAM); any other speaker is a person, a ``turn_user`` by that
speaker as agent (two friends chatting: LoCoMo).

Nothing bad stops it: a sample that is not a conversation, a session without a readable date, a
turn or question without its fields are :class:`~soulpass.importers.base.Failure` s of reading; a
turn the sandbox refuses (a body over ``Limits.max_body_chars``, text that is not UTF-8) is a
failure of :func:`ingest`; everything else is stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import InvalidInput
from soulpass.importers.base import Failure, failure, split

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["TAG_PREFIX", "Conversation", "Ingested", "LocomoFile", "Question", "Session", "Turn", "ingest", "load",
           "parse_when", "read", "turn_text"]

TAG_PREFIX = "dia:"
_DIA = re.compile(r"D:?(\d+):(\d+)")
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], 1)}
_SESSION = re.compile(r"session_(\d+)")
TURN_GAP = timedelta(seconds=30)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    when: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    """One sample; ``failures``: its sessions, turns and questions that could not be read."""

    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    dropped_evidence: int = 0
    failures: tuple[Failure, ...] = ()

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass(frozen=True)
class Ingested:
    """What :func:`ingest` stored (turns) and what it could not (failures)."""

    turns: int
    failures: tuple[Failure, ...] = ()


def parse_when(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware UTC datetime."""
    m = _DATE.search(text)
    if not m:
        raise InvalidInput(f"unrecognised session date {text!r}", field="session_date_time")
    hour, minute, ampm, day, month, year = m.groups()
    if month.lower() not in _MONTHS:
        raise InvalidInput(f"unrecognised month in session date {text!r}", field="session_date_time")
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), h, int(minute), tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    """What a speaker said, with the caption of a shared image (part of the turn's content)."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text


class LocomoFile:
    """A LoCoMo-layout JSON file as an importer of :class:`Conversation` s; a sample that is not a
    conversation is a :class:`Failure`. A file that is not JSON or not a list is refused."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            samples = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"cannot read LoCoMo data {self.path}: {exc}", field="data") from exc
        if not isinstance(samples, list):
            raise InvalidInput(f"{self.path}: expected a list of samples", field="data")
        self.samples: list[Any] = samples

    def items(self) -> Iterator[Conversation | Failure]:
        for n, sample in enumerate(self.samples):
            sample_id = str(sample.get("sample_id", f"conv-{n}")) if isinstance(sample, dict) else f"conv-{n}"
            try:
                yield _conversation(sample_id, sample)
            except (KeyError, TypeError, ValueError) as exc:
                yield Failure(sample_id, f"not a conversation in the LoCoMo layout: {type(exc).__name__} {exc}")


def read(path: str | Path) -> tuple[list[Conversation], list[Failure]]:
    """The file's conversations and the samples that are none (see :class:`LocomoFile`)."""
    return split(LocomoFile(path).items())


def load(path: str | Path) -> list[Conversation]:
    """The file's conversations; :func:`read` also returns the samples that could not be read."""
    return read(path)[0]


def _conversation(sample_id: str, sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    failures: list[Failure] = []
    sessions = []
    for number in sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k))):
        item = f"{sample_id}/session_{number}"
        try:
            when = parse_when(str(conv.get(f"session_{number}_date_time", "")))
        except InvalidInput as exc:
            failures.append(failure(item, exc))
            continue
        turns = []
        for i, t in enumerate(conv[f"session_{number}"]):
            try:
                turns.append(Turn(dia_id=str(t["dia_id"]), speaker=str(t["speaker"]), text=turn_text(t)))
            except (KeyError, TypeError, AttributeError) as exc:
                failures.append(Failure(f"{item}[{i}]", f"not a turn (speaker, dia_id, text): {exc!r}"))
        sessions.append(Session(number, when, tuple(turns)))
    known = {t.dia_id for s in sessions for t in s.turns}
    questions, dropped = [], 0
    for i, qa in enumerate(sample.get("qa", [])):
        try:
            evidence = [f"D{int(s)}:{int(t)}" for ev in qa.get("evidence", []) for s, t in _DIA.findall(str(ev))]
            question = Question(str(qa["question"]), tuple(dict.fromkeys(e for e in evidence if e in known)),
                                int(qa["category"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            failures.append(Failure(f"{sample_id}/qa[{i}]", f"not a question (question, evidence, category): {exc!r}"))
            continue
        dropped += sum(e not in known for e in evidence)
        if question.evidence:
            questions.append(question)
    return Conversation(sample_id, tuple(sessions), tuple(questions), dropped, tuple(failures))


def _role(speaker: str) -> dict[str, str]:
    """The record kind and agent of a speaker's turn."""
    if speaker == "user":
        return {"kind": "turn_user"}
    if speaker == "assistant":
        return {"kind": "turn_llm", "agent": "assistant"}
    return {"kind": "turn_user", "agent": re.sub(r"[^A-Za-z0-9_.-]", "_", speaker) or "speaker"}


def ingest(account: Account, conv: Conversation) -> Ingested:
    """Each session a sandbox, archived in order; a turn the sandbox refuses is a failure (its
    dialog id and the reason) and the rest of the session is stored."""
    stored, failures = 0, []
    for session in conv.sessions:
        sandbox = account.create_sandbox(f"session-{session.number}")
        written = 0
        for i, turn in enumerate(session.turns):
            try:
                sandbox.write_turn({**_role(turn.speaker), "text_excerpt": turn.text,
                                    "created_at": session.when + TURN_GAP * i, "tags": [TAG_PREFIX + turn.dia_id]})
            except InvalidInput as exc:
                failures.append(failure(f"{conv.sample_id}/{turn.dia_id}", exc))
                continue
            written += 1
        if written:
            sandbox.archive()
        else:
            sandbox.discard()
        stored += written
    return Ingested(stored, tuple(failures))
