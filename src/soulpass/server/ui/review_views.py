"""What the Sandboxes and review pages show: an account's open sandboxes, and one sandbox's archive
preview item by item (plain dicts for the templates, no HTML here, like ``views``)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from soulpass.consolidation.preview import PreviewItem
from soulpass.engine import Account
from soulpass.errors import SoulpassError
from soulpass.ids import utc_now
from soulpass.sessions.sandbox import SandboxInfo

__all__ = ["GROUPS", "KEEPS", "RECORD_KINDS", "SHOWN", "age", "awaiting_review", "event_count", "history_view",
           "is_kept", "kept_rows", "review_view", "sandbox_rows"]


def age(since: datetime, now: datetime) -> str:
    """How long ago ``since`` was, in the largest whole unit (``"3 min"``, ``"2 h"``, ``"5 d"``)."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _row(info: SandboxInfo, now: datetime, awaiting: int = 0) -> dict[str, Any]:
    events = info.buffer().events()
    agents = sorted({e.agent for e in events if e.agent})
    return {"id": info.sandbox_id, "name": info.name, "agents": agents, "parent": info.parent_version,
            "created": info.created_at.isoformat(timespec="seconds")[:19].replace("T", " "),
            "age": age(info.created_at, now), "events": len(events),
            "last": age(events[-1].at, now) if events else "", "awaiting": awaiting}


def awaiting_review(acct: Account) -> dict[str, int]:
    """Open sandboxes whose archive holds items for a person (the review policy): id -> how many."""
    return {p.sandbox_id: len(p.needs_review) for p in acct.awaiting_review()}


def event_count(acct: Account, sandbox_id: str) -> int:
    """How many events a sandbox's buffer holds (it only grows: the same count is the same buffer)."""
    return len(acct.sandbox(sandbox_id).info.buffer().events())


def sandbox_rows(acct: Account, awaiting: dict[str, int], now: datetime | None = None) -> list[dict[str, Any]]:
    """The account's open sandboxes, oldest first: name, the agents that wrote to it, the version it
    was opened at, its age, how many events its buffer holds, how long since the last, and how many
    of its items await a person's review (``awaiting``, from :func:`awaiting_review`)."""
    when = now or utc_now()
    return [_row(info, when, awaiting.get(info.sandbox_id, 0))
            for info in sorted(acct.sandboxes(), key=lambda i: i.created_at)]


RECORD_KINDS = ("turn_user", "turn_llm", "episode", "sensory", "journal")
KEEPS = ("add", "supersede", "change")  # what reaches the master: the items a person may untick
GROUPS = ("records", "facts", "documents", "rejected", "duplicates")
SHOWN = 200  # items of a group the review page lists (each with its box); the rest are counted


def _value(value: Any) -> str:
    """A document value as text: strings as they are, anything else as compact JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _fact_text(acct: Account, fact_id: str, at: int) -> str:
    try:
        return str(acct.show(fact_id, at).model_dump(mode="json").get("text", ""))
    except SoulpassError:
        return "(not readable at this version)"


def _item(acct: Account, item: PreviewItem, base: int) -> dict[str, Any]:
    return {"id": item.id, "kind": item.kind, "action": item.action, "text": item.text,
            "temp_ids": list(item.temp_ids), "record_id": item.record_id or "", "confidence": item.confidence,
            "rule": item.rule or "", "reason": item.reason or "", "review": item.review or "",
            "supersedes": [{"id": f, "text": _fact_text(acct, f, base)} for f in item.supersedes],
            "changes": [{"document": c.document, "key": c.key, "before": _value(c.before), "after": _value(c.after)}
                        for c in item.changes],
            "keep": item.action in KEEPS}


def _group(item: PreviewItem) -> str:
    """Where the review page lists an item."""
    if item.action == "reject":
        return "rejected"
    if item.action == "skip-duplicate":
        return "duplicates"
    if item.kind == "fact":
        return "facts"
    return "records" if item.kind in RECORD_KINDS else "documents"


def review_view(acct: Account, sandbox_id: str, now: datetime | None = None, shown: int = SHOWN) -> dict[str, Any]:
    """One sandbox's archive preview as the review page shows it, grouped: records added, facts
    (with the committed facts each supersedes), document changes key by key, what a rule rejects
    and the duplicates skipped; the first ``shown`` items of each group (``totals`` counts them
    all). ``offered`` are the ids listed with a box, which a person may untick; the items past
    ``shown`` are approved with the rest."""
    info = acct.sandbox(sandbox_id).info
    preview = acct.preview(sandbox_id)
    groups: dict[str, list[dict[str, Any]]] = {g: [] for g in GROUPS}
    totals = dict.fromkeys(GROUPS, 0)
    for item in preview.items:
        group = _group(item)
        totals[group] += 1
        if totals[group] <= shown:
            groups[group].append(_item(acct, item, preview.base_version))
    held = preview.needs_review
    return {"sandbox": _row(info, now or utc_now(), len(held)), "base": preview.base_version,
            "version": preview.version, "rebased": preview.rebased, "empty": preview.empty, "groups": groups,
            "totals": totals, "needs_review": [_item(acct, i, preview.base_version) for i in held[:shown]],
            "needs_review_total": len(held), "conflicts": list(preview.conflicts),
            "offered": [r["id"] for g in groups.values() for r in g if r["keep"]], "head": acct.head()}


def kept_rows(acct: Account) -> list[dict[str, Any]]:
    """The sandboxes kept for their history (their archive left items out), oldest first: name, the
    version each was archived as. Metadata only: the history itself is an owner's page."""
    return [{"id": i.sandbox_id, "name": i.name, "archived_as": i.archived_as,
             "created": i.created_at.isoformat(timespec="seconds")[:19].replace("T", " ")}
            for i in acct.kept_sandboxes()]


def is_kept(acct: Account, sandbox_id: str) -> bool:
    return any(i.sandbox_id == sandbox_id for i in acct.kept_sandboxes())


def history_view(acct: Account, sandbox_id: str) -> dict[str, Any]:
    """A kept sandbox's history as its page shows it: each event, archived (and the record it
    became) or excluded (its text), with who excluded and why."""
    h = acct.sandbox_history(sandbox_id)
    return {"id": h.sandbox_id, "name": h.name, "parent": h.parent_version, "archived_as": h.archived_as,
            "by": h.excluded_by or "", "reason": h.excluded_reason or "", "excluded": len(h.excluded),
            "events": [{"id": e.event_id, "kind": e.kind, "outcome": e.outcome, "record_id": e.record_id or "",
                        "text": e.text, "at": e.at.isoformat(timespec="seconds")[:19].replace("T", " ")}
                       for e in h.events]}
