"""A ChatGPT data export's ``conversations.json`` (Settings → Data controls → Export data).

The file is a list of conversations, each with ``title``, ``create_time`` (seconds since the
epoch), ``id`` (or ``conversation_id``), ``current_node`` and ``mapping``: a tree of nodes
``{id, message, parent, children}`` whose ``message`` has ``id``, ``author.role`` (``user``,
``assistant``, ``system``, ``tool``), ``create_time`` and ``content`` (``content_type`` and
``parts``, strings or attached objects). The conversation as shown is the branch from the root
to ``current_node`` (edits and regenerations are other branches); only its user and assistant
messages with text are taken: system prompts, tool calls and hidden messages are left out,
attachments' objects too (their text parts are kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from soulpass.errors import InvalidInput
from soulpass.importers.base import Failure
from soulpass.importers.conversations import ROLES, ChatConversation, Message, each_conversation, parse_time, read_json

__all__ = ["SOURCE", "ChatGPTExport"]

SOURCE = "chatgpt"


class ChatGPTExport:
    """``conversations.json`` of a ChatGPT export as an importer of conversations; one without
    a readable tree is a :class:`Failure`. A file that is not a JSON list is refused."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        data = read_json(self.path, "a ChatGPT conversations.json")
        if not isinstance(data, list):
            raise InvalidInput(f"{self.path}: a ChatGPT export is a list of conversations", path=str(self.path))
        self.raw: list[Any] = data

    def items(self) -> Iterator[ChatConversation | Failure]:
        named = ((_name(n, c), c) for n, c in enumerate(self.raw))
        return each_conversation(named, _conversation)


def _name(n: int, conv: Any) -> str:
    if isinstance(conv, dict):
        return str(conv.get("conversation_id") or conv.get("id") or f"conversation[{n}]")
    return f"conversation[{n}]"


def _conversation(name: str, conv: dict[str, Any]) -> ChatConversation:
    mapping: dict[str, Any] = conv["mapping"]
    started = parse_time(conv.get("create_time"), "create_time") if conv.get("create_time") is not None else None
    messages: list[Message] = []
    for node in _branch(mapping, conv.get("current_node")):
        msg = node.get("message")
        if not msg or (msg.get("author") or {}).get("role") not in ROLES:
            continue
        if (msg.get("metadata") or {}).get("is_visually_hidden_from_conversation"):
            continue
        text = _text(msg.get("content") or {})
        if not text:
            continue
        when = parse_time(msg["create_time"], "create_time") if msg.get("create_time") is not None else started
        if when is None:
            raise InvalidInput(f"message {msg.get('id')} of {name} has no create_time", field="create_time")
        messages.append(Message(msg["author"]["role"], text, when, str(msg.get("id") or node.get("id"))))
    return ChatConversation(SOURCE, name, str(conv.get("title") or ""), tuple(messages))


def _branch(mapping: dict[str, Any], current: str | None) -> list[dict[str, Any]]:
    """The nodes from the root to ``current`` (else to the leaf reached by the latest children)."""
    if current is None or current not in mapping:
        roots = [k for k, v in mapping.items() if not v.get("parent") or v["parent"] not in mapping]
        if not roots:
            raise InvalidInput("the message tree has no root", field="mapping")
        current = roots[0]
        while mapping[current].get("children"):
            current = mapping[current]["children"][-1]
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node: str | None = current
    while node is not None and node in mapping:
        if node in seen:
            raise InvalidInput(f"the message tree has a cycle at {node}", field="mapping")
        seen.add(node)
        path.append(mapping[node])
        node = mapping[node].get("parent")
    return path[::-1]


def _text(content: dict[str, Any]) -> str:
    if isinstance(content.get("text"), str):  # content_type "code" and others keep it here
        return str(content["text"]).strip()
    parts = content.get("parts") or []
    return "\n".join(p for p in parts if isinstance(p, str) and p.strip()).strip()
