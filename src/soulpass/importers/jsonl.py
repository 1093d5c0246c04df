"""A generic JSONL of messages: one JSON object per line, for any tool without its own importer.

Fields of a line (the first name found is used):

- conversation: ``conversation_id`` | ``conversation`` | ``session_id`` | ``thread_id``
  (optional: lines without one form the conversation ``default``);
- speaker: ``role`` | ``speaker`` | ``sender`` | ``author`` — ``user``/``human`` is the user,
  ``assistant``/``ai``/``bot``/``model`` the assistant; other speakers (``system``, ``tool``)
  are skipped;
- text: ``text`` | ``content`` | ``message`` (a string);
- time: ``timestamp`` | ``created_at`` | ``time`` (ISO 8601 or seconds since the epoch;
  required);
- id: ``id`` | ``message_id`` (optional; the content identity uses it when present);
- title: ``title`` (optional, of the conversation).

Conversations keep the order of their first line; a line that is not such an object is a
:class:`Failure` naming its line number.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from soulpass.errors import InvalidInput
from soulpass.importers.base import Failure, failure
from soulpass.importers.conversations import ChatConversation, Message, parse_time
from soulpass.store.fsio import parse_json

__all__ = ["SOURCE", "JsonlMessages"]

SOURCE = "jsonl"
_ROLE = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "bot": "assistant",
         "model": "assistant"}
_SKIPPED = frozenset({"system", "tool", "function", "developer"})


def _first(line: dict[str, Any], *names: str) -> Any:
    return next((line[n] for n in names if line.get(n) not in (None, "")), None)


class JsonlMessages:
    """A JSONL file of messages as an importer of conversations (see the module for the schema)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"cannot read a JSONL of messages {self.path}: {exc}", path=str(self.path)) from exc

    def items(self) -> Iterator[ChatConversation | Failure]:
        convs: dict[str, tuple[str, list[Message]]] = {}
        for n, raw in enumerate(self.lines, 1):
            if not raw.strip():
                continue
            try:
                found = _message(raw)
            except InvalidInput as exc:
                yield failure(f"line {n}", exc)
                continue
            if found is not None:
                conv, title, message = found
                entry = convs.setdefault(conv, (title, []))
                entry[1].append(message)
        for conv, (title, messages) in convs.items():
            yield ChatConversation(SOURCE, conv, title, tuple(messages))


def _message(raw: str) -> tuple[str, str, Message] | None:
    """``(conversation, title, message)`` of a line; None for a speaker that is skipped."""
    line = parse_json(raw, "line")
    if not isinstance(line, dict):
        raise InvalidInput("not a JSON object", field="line")
    speaker = str(_first(line, "role", "speaker", "sender", "author") or "").lower()
    if speaker in _SKIPPED:
        return None
    if speaker not in _ROLE:
        raise InvalidInput(f"speaker {speaker!r} is neither the user nor the assistant", field="role")
    text = _first(line, "text", "content", "message")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("no text (text, content or message)", field="text")
    when = parse_time(_first(line, "timestamp", "created_at", "time"), "timestamp")
    key = _first(line, "id", "message_id")
    conv = str(_first(line, "conversation_id", "conversation", "session_id", "thread_id") or "default")
    return conv, str(line.get("title") or ""), Message(_ROLE[speaker], text.strip(), when,
                                                       None if key is None else str(key))
