"""A Claude data export's ``conversations.json`` (Settings → Privacy → Export data).

The file is a list of conversations, each with ``uuid``, ``name``, ``created_at`` (ISO 8601) and
``chat_messages``: ``uuid``, ``sender`` (``human`` or ``assistant``), ``created_at`` and the
message as ``text`` or as ``content`` blocks (``{"type": "text", "text": ...}``; tool use and
other blocks are left out). ``human`` is the user.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from soulpass.errors import InvalidInput
from soulpass.importers.base import Failure
from soulpass.importers.conversations import ChatConversation, Message, each_conversation, parse_time, read_json

__all__ = ["SOURCE", "ClaudeExport"]

SOURCE = "claude"
_ROLE = {"human": "user", "user": "user", "assistant": "assistant"}


class ClaudeExport:
    """``conversations.json`` of a Claude export as an importer of conversations; a conversation
    without ``chat_messages`` is a :class:`Failure`. A file that is not a JSON list is refused."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        data = read_json(self.path, "a Claude conversations.json")
        if not isinstance(data, list):
            raise InvalidInput(f"{self.path}: a Claude export is a list of conversations", path=str(self.path))
        self.raw: list[Any] = data

    def items(self) -> Iterator[ChatConversation | Failure]:
        named = ((str(c.get("uuid") or f"conversation[{n}]") if isinstance(c, dict) else f"conversation[{n}]", c)
                 for n, c in enumerate(self.raw))
        return each_conversation(named, _conversation)


def _conversation(name: str, conv: dict[str, Any]) -> ChatConversation:
    started = conv.get("created_at")
    messages = []
    for n, msg in enumerate(conv["chat_messages"]):
        role = _ROLE.get(str(msg.get("sender")))
        text = _text(msg)
        if role is None or not text:
            continue
        when = parse_time(msg.get("created_at") or started, f"chat_messages[{n}].created_at")
        messages.append(Message(role, text, when, str(msg.get("uuid") or "") or None))
    return ChatConversation(SOURCE, name, str(conv.get("name") or ""), tuple(messages))


def _text(msg: dict[str, Any]) -> str:
    blocks = msg.get("content")
    if isinstance(blocks, list) and blocks:
        text = "\n".join(str(b["text"]) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(b.get("text"), str))
        if text.strip():
            return text.strip()
    return str(msg.get("text") or "").strip()
