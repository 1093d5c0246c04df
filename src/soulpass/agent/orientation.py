"""Sleep and the orientation block (Volition "tier 0"): temporal grounding and a social digest."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from soulpass.agent.types import LogEntry
from soulpass.index.catalog import Filters
from soulpass.records import Episode

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["committed_episode_lines", "digest_lines"]


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(at: datetime, start: datetime) -> str:
    return f"{at:%H:%M}" if at.date() == start.date() else f"{at:%Y-%m-%d %H:%M}"


def digest_lines(entries: Iterable[LogEntry], me: str, start: datetime, end: datetime, per_agent: int) -> list[str]:
    """One line per log entry other agents wrote in ``(start, end]``; the latest ``per_agent`` each."""
    by_agent: dict[str, list[LogEntry]] = defaultdict(list)
    for e in entries:
        if e.agent != me and start < e.at <= end:
            by_agent[e.agent].append(e)
    lines = []
    for agent in sorted(by_agent):
        items = sorted(by_agent[agent], key=lambda e: e.at)
        if len(items) > per_agent:
            lines.append(f"{agent}: {len(items) - per_agent} earlier log entries not shown")
            items = items[-per_agent:]
        for e in items:
            who = "the user to " + agent if e.speaker == "user" else agent
            lines.append(f"{who} ({e.kind}, {_when(e.at, start)}): {_clip(e.text)}")
    return lines


def committed_episode_lines(acct: Account, me: str, start: datetime, end: datetime, per_agent: int) -> list[str]:
    """Episodes other agents committed to the master with an event time in ``[start, end)``."""
    index = acct.index()
    ids = index.catalog.ids_matching(Filters(kinds=("episode",), since=start, until=end))
    lines: list[str] = []
    counts: dict[str, int] = defaultdict(int)
    for row in sorted(index.catalog.get(ids), key=lambda r: (r.event_time or start, r.id)):
        rec = acct.record(row.id)
        if not isinstance(rec, Episode):
            continue
        scribe = rec.annotations.get("scribe", {}) if isinstance(rec.annotations, dict) else {}
        agents = {rec.agent} if rec.agent else set(scribe.get("agents", ()))
        others = sorted(a for a in agents if a and a != me)
        if not others:
            continue
        key = ",".join(others)
        counts[key] += 1
        if counts[key] > per_agent:
            continue
        what = rec.summary.key_outcome or rec.summary.action_taken or rec.text
        lines.append(f"{' and '.join(others)}: committed episode {rec.id} ({_when(rec.created_at, start)}): "
                     f"{_clip(what)}")
    return lines
