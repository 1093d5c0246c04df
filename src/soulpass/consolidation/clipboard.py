"""Clipboards (Volition tier 1.5): one pinned scratchpad per agent, the document
``store.keys.clipboard_key(agent)`` (``core/06_Clipboard/<agent>.md``).

A clipboard changes only by explicit ops (add, remove, clear) that sit in a sandbox's buffer as
``clipboard_op`` events until archive replays them, in order, on the clipboard at HEAD: a rebase
keeps items another sandbox pinned meanwhile (``clear`` removes only the items its writer saw).
The file is Markdown with YAML front matter: ``items`` is the truth, the body renders them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from soulpass.ids import check_name
from soulpass.store.contract import Snapshot
from soulpass.store.keys import clipboard_key

__all__ = [
    "MAX_CLIPBOARD_ITEM",
    "ClipboardOp",
    "apply_ops",
    "plan_clipboards",
    "read_clipboard_items",
]

MAX_CLIPBOARD_ITEM = 10_000


class ClipboardOp(BaseModel):
    """One buffered change to ``agent``'s clipboard. ``items`` of a ``clear`` are the items it saw."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on first use

    agent: str
    op: Literal["add", "remove", "clear"]
    item: str | None = None
    items: tuple[str, ...] = ()

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str) -> str:
        return check_name(value, "agent")

    @field_validator("item")
    @classmethod
    def _item(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.strip():
                raise ValueError("a clipboard item is empty")
            if len(value) > MAX_CLIPBOARD_ITEM:
                raise ValueError(f"a clipboard item is {len(value)} characters (limit {MAX_CLIPBOARD_ITEM})")
        return value

    @model_validator(mode="after")
    def _needs_item(self) -> ClipboardOp:
        if self.op in ("add", "remove") and self.item is None:
            raise ValueError(f"clipboard {self.op} needs an item")
        return self


class Versions(Protocol):
    """Anything that opens a snapshot at a version: a ``MasterStore`` (or the files account)."""

    def snapshot(self, at: int | None = None) -> Snapshot: ...


def apply_ops(items: Iterable[str], ops: Iterable[ClipboardOp]) -> list[str]:
    """Replay ops on a clipboard: add appends (once), remove drops, clear drops what it saw."""
    out = list(items)
    for op in ops:
        if op.op == "add" and op.item is not None and op.item not in out:
            out.append(op.item)
        elif op.op == "remove" and op.item in out:
            out.remove(op.item)
        elif op.op == "clear":
            out = [i for i in out if i not in op.items]
    return out


def read_clipboard_items(master: Versions, agent: str, at: int | None = None) -> list[str]:
    """The items of ``agent``'s clipboard as of version ``at`` (default HEAD); [] if it has none."""
    raw = master.snapshot(at).document(clipboard_key(agent))
    return [str(i) for i in (raw or {}).get("items", [])]


def clipboard_document(agent: str, items: list[str], version: int, now: datetime) -> dict[str, Any]:
    """The clipboard document ``version`` writes for ``agent`` (its front matter, in order); the
    files backend renders ``items`` as the Markdown body."""
    return {"kind": "clipboard", "agent": agent, "version": version, "updated_at": now.isoformat(),
            "schema_version": 1, "items": items}


@dataclass(frozen=True)
class ClipboardPut:
    """A clipboard document to write under ``key``; ``existed``: HEAD has one there."""

    key: str
    document: dict[str, Any]
    existed: bool


def plan_clipboards(master: Snapshot, ops: list[ClipboardOp], version: int, now: datetime) -> list[ClipboardPut]:
    """The clipboards version ``version`` writes: one per agent whose items changed."""
    by_agent: dict[str, list[ClipboardOp]] = {}
    for op in ops:
        by_agent.setdefault(op.agent, []).append(op)
    out = []
    for agent, agent_ops in sorted(by_agent.items()):
        raw = master.document(clipboard_key(agent))
        before = [str(i) for i in (raw or {}).get("items", [])]
        after = apply_ops(before, agent_ops)
        if after != before:
            doc = clipboard_document(agent, after, version, now)
            out.append(ClipboardPut(clipboard_key(agent), doc, existed=raw is not None))
    return out
