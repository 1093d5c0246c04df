"""What the Sandboxes and review pages show: an account's open sandboxes, and one sandbox's archive
preview item by item (plain dicts for the templates, no HTML here, like ``views``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from soulpass.engine import Account
from soulpass.ids import utc_now
from soulpass.sessions.sandbox import SandboxInfo

__all__ = ["age", "sandbox_rows"]


def age(since: datetime, now: datetime) -> str:
    """How long ago ``since`` was, in the largest whole unit (``"3 min"``, ``"2 h"``, ``"5 d"``)."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _row(info: SandboxInfo, now: datetime) -> dict[str, Any]:
    events = info.buffer().events()
    agents = sorted({e.agent for e in events if e.agent})
    return {"id": info.sandbox_id, "name": info.name, "agents": agents, "parent": info.parent_version,
            "created": info.created_at.isoformat(timespec="seconds")[:19].replace("T", " "),
            "age": age(info.created_at, now), "events": len(events),
            "last": age(events[-1].at, now) if events else ""}


def sandbox_rows(acct: Account, now: datetime | None = None) -> list[dict[str, Any]]:
    """The account's open sandboxes, oldest first: name, the agents that wrote to it, the version it
    was opened at, its age, how many events its buffer holds and how long since the last."""
    when = now or utc_now()
    return [_row(info, when) for info in sorted(acct.sandboxes(), key=lambda i: i.created_at)]
